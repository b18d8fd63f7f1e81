"""The ``cdc`` command.

Exit codes (cdc.cli.exitcodes): 0 success, 1 an error the message explains (bad input,
unknown queue, the database refused), 2 wrong usage, 3 unhealthy (status), 4 differs
(verify). Logs: one format on stderr, ``-v`` / ``-q`` (cdc.logs).

Layout: ``parser`` builds the whole command line in one place (every option, its default
read from the module that owns it); the commands sit by group: ``queue`` (engine, queues,
ticker), ``capture`` (attach, detach, triggers), ``pipeline`` (the Spark commands that run a
pipeline file: drain, snapshot, resync, verify), ``sql`` and ``ops`` (status, maintain, demo,
jars). ``main`` runs one and turns every failure into one line on stderr.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence

import psycopg

from cdc import errors, failures, logs
from cdc.cli import exitcodes
from cdc.cli.parser import build_parser, fast_command

__all__ = ["build_parser", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    args = build_parser(fast_command(words)).parse_args(argv)
    logs.setup(logs.verbosity_of(args.verbose, args.quiet))
    try:
        return args.func(args)
    except errors.CdcError as exc:
        print(f"cdc: error: {exc}", file=sys.stderr)
        return exitcodes.COULD_NOT_RUN
    except psycopg.Error as exc:
        _trace_if(args.verbose)
        translated = errors.translate(exc)
        if translated is exc:
            translated = failures.classify(exc).message
        print(f"cdc: error: {translated}", file=sys.stderr)
        return exitcodes.COULD_NOT_RUN
    except Exception as exc:  # one line that names the cause; the trace only under -v
        _trace_if(args.verbose)
        print(f"cdc: error: {failures.classify(exc, _folder(args)).message}", file=sys.stderr)
        if not args.verbose:
            print("cdc: run with -v for the full trace", file=sys.stderr)
        return exitcodes.COULD_NOT_RUN


def _trace_if(verbose: bool) -> None:
    if verbose:
        traceback.print_exc()


def _folder(args: argparse.Namespace) -> str | None:
    """The target folder of the --config pipeline, for the message of a storage failure."""
    if not getattr(args, "config", None):
        return None
    try:
        from cdc import config

        return config.load(args.config).target_path
    except errors.CdcError:
        return None
