"""The operations commands: status (no Spark), maintain, demo, jars (sql: cdc.cli.sql)."""

from __future__ import annotations

import argparse

from cdc import errors
from cdc.cli import exitcodes
from cdc.cli.common import pipeline_and_spark


def cmd_status(args: argparse.Namespace) -> int:
    """The pipeline's status in one of three outputs; the same health and exit code in all:
    UNHEALTHY (pending events older than --max-pending-age and no drain at work, a failing
    table, a failed snapshot, a table the configuration refuses), else OK."""
    from cdc import config
    from cdc.ops import status
    from cdc.pg import privileges
    from cdc.pipeline.tables import resolved

    if args.max_pending_age <= 0:
        raise errors.ConfigError(
            f"--max-pending-age must be a positive number of seconds, not {args.max_pending_age:g}"
        )
    pipeline = resolved(config.load(args.config))
    privileges.check_pipeline(pipeline, "status")
    state = status.collect(pipeline, args.max_pending_age)
    if args.json:
        print(status.to_json(state))
    elif args.prometheus:
        print(status.to_prometheus(state), end="")
    else:
        print(status.render(state))
    return exitcodes.UNHEALTHY if state.health.state == status.UNHEALTHY else exitcodes.OK


def cmd_maintain(args: argparse.Namespace) -> int:
    from cdc.ops import maintain

    pipeline, session = pipeline_and_spark(args, "cdc-maintain")
    done = maintain.maintain(
        pipeline,
        session,
        args.targets,
        optimize=not args.no_optimize,
        vacuum=not args.no_vacuum,
        retain_hours=args.retain_hours,
        purge_older_than=args.purge_deleted_older_than,
    )
    for m in done:
        purged = "" if m.purged is None else f", {m.purged} row(s) marked deleted purged"
        print(f"{m.target}: {m.files_before} file(s) -> {m.files_after}{purged}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from cdc import demo

    return demo.main(["--dir", args.dir])


def cmd_jars(args: argparse.Namespace) -> int:
    from pathlib import Path

    from cdc import jars

    found = jars.fetch(Path(args.dest) if args.dest else None)
    print(f"{len(found)} jars in {found[0].parent}")
    return 0
