"""The ``cdc`` command line, built in one place: every command and option.

A default shown here is read from the module that owns it (a dataclass field or a named
constant), never written a second time; the help texts show it through ``%(default)s``.
"""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Callable, Sequence

from cdc import __version__
from cdc.cli import sql
from cdc.config import add_config_argument, add_dsn_argument, default
from cdc.spark import add_conf_argument

DESCRIPTION = "The ``cdc`` command."
SPARK_COMMANDS = ("drain", "snapshot", "resync", "verify", "sql", "maintain")  # take --conf
FAST_COMMANDS = ("sql",)  # parsed without the other commands (build_parser)

Command = Callable[[argparse.Namespace], int]


def _age(text: str) -> dt.timedelta:
    """--purge-deleted-older-than's value (cdc.ops.maintain.parse_age), its error as the
    command line's."""
    from cdc.ops import maintain

    try:
        return maintain.parse_age(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def fast_command(argv: Sequence[str]) -> str | None:
    """The command of argv when it is one of FAST_COMMANDS (the first word that is not an
    option: the options before a command take no value), else None."""
    command = next((word for word in argv if not word.startswith("-")), None)
    return command if command in FAST_COMMANDS else None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of command alone (one of FAST_COMMANDS: ``cdc sql``,
    whose datafusion engine answers without importing Spark, is parsed by its own; see
    fast_command). The other commands' modules are imported here, not at import time (the
    pipeline modules import pyspark), for their defaults and the drain's options."""
    p = argparse.ArgumentParser(prog="cdc", description=DESCRIPTION)
    p.add_argument("--version", action="version", version=f"cdc {__version__}")
    # logging (cdc.logs): one format; -v and -q set how loud the project, libraries and Spark are
    loud = p.add_mutually_exclusive_group()
    loud.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="log more: the project's debug lines, Spark's warnings, the full trace of an"
        " error; -vv: Spark's info lines too",
    )
    loud.add_argument("-q", "--quiet", action="store_true", help="log only warnings and errors")
    sub = p.add_subparsers(dest="command", required=True)

    def add(name: str, func: Command, help: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help, description=help)
        sp.set_defaults(func=func)
        return sp

    if command in FAST_COMMANDS:
        sql.add_arguments(add("sql", sql.cmd_sql, sql.HELP))
        add_conf_argument(sub.choices["sql"])
        return p
    # the other commands' modules (the pipeline modules import pyspark)
    from cdc import demo, formats
    from cdc.cli import capture, ops, pipeline, quarantine, queue, roles, submit
    from cdc.jobs import JOBS
    from cdc.ops import maintain
    from cdc.ops.status import MAX_PENDING_AGE
    from cdc.pg.capture import CaptureOptions
    from cdc.pg.ticker import TickerSettings
    from cdc.pipeline import drain, snapshot, verify

    # the engine and its queues (cdc.cli.queue)
    sp = add("install", queue.cmd_install, "install or upgrade the queue engine (one transaction)")
    add_dsn_argument(sp)

    sp = add("uninstall", queue.cmd_uninstall, "remove the queue engine and its roles")
    add_dsn_argument(sp)
    sp.add_argument("--keep-roles", action="store_true", help="do not drop the cdc_* roles")
    sp.add_argument(
        "--force",
        action="store_true",
        help="drop queues that have registered consumers without asking",
    )

    sp = add("queue", queue.cmd_queue, "create, drop, show or configure a queue")
    sp.add_argument("action", choices=["create", "drop", "info", "config"])
    sp.add_argument("name", help="queue name")
    sp.add_argument(
        "settings",
        nargs="*",
        metavar="KEY=VALUE",
        help="config: settings to change (ticker_max_lag='5 seconds', max_retries=none, ...);"
        " none: show them",
    )
    add_dsn_argument(sp)
    sp.add_argument("--force", action="store_true", help="drop even with consumers")

    sp = add("consumer", queue.cmd_consumer, "list, register or unregister a queue's consumers")
    sp.add_argument("action", choices=["list", "register", "unregister"])
    sp.add_argument("queue", help="queue name")
    sp.add_argument("name", nargs="?", help="consumer name (register, unregister)")
    sp.add_argument("--json", action="store_true", help="list: JSON output")
    add_dsn_argument(sp)

    # roles (cdc.cli.roles)
    sp = add("grant", roles.cmd_grant, "give a role what it needs to drain, verify, write or admin")
    roles.add_arguments(sp)
    add_dsn_argument(sp)

    # capture (cdc.cli.capture)
    sp = add(
        "attach",
        capture.cmd_attach,
        "capture a table's changes into a queue (generated triggers); a pattern ('public.*')"
        " records a capture rule that also captures tables created later",
    )
    sp.add_argument(
        "table",
        nargs="?",
        help="SCHEMA.TABLE, or a pattern: * any run of characters, ? one character",
    )
    sp.add_argument("--queue", help="queue to write events to (required but with --sync)")
    sp.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help="with a pattern: tables left out, SCHEMA.TABLE or TABLE globs; repeat",
    )
    sp.add_argument(
        "--sync",
        action="store_true",
        help="apply the stored capture rules to the tables there now (from cron without event"
        " triggers); --queue: one queue's rules",
    )
    sp.add_argument(
        "--format", choices=list(formats.NAMES), default=default(CaptureOptions, "format")
    )
    sp.add_argument("--ignore", help="columns left out of events: c1,c2")
    sp.add_argument(
        "--pkey",
        help="key columns instead of the primary key (or, without one, the usable unique"
        " index): c1,c2",
    )
    sp.add_argument("--backup", action="store_true", help="old row in ev_extra2 on UPDATE")
    sp.add_argument("--when", help="boolean expression; false skips the event")
    sp.add_argument(
        "--extra",
        action="append",
        default=[],
        metavar="N=EXPR",
        help="ev_extraN from an expression (N 1-4); repeat",
    )
    sp.add_argument("--ev-type", help="expression for ev_type")
    sp.add_argument("--skip", action="store_true", help="queue the event, skip the row change")
    sp.add_argument("--deny", action="store_true", help="refuse changes to the table")
    sp.add_argument("--mode", choices=["row", "statement"], default=default(CaptureOptions, "mode"))
    sp.add_argument(
        "--print",
        action="store_true",
        help="show the generated SQL (a pattern or --sync: what would be attached), change nothing",
    )
    add_dsn_argument(sp)

    sp = add("detach", capture.cmd_detach, "remove capture triggers from a table, or a rule")
    sp.add_argument("table", nargs="?", help="SCHEMA.TABLE")
    sp.add_argument("--queue", help="only this queue's capture (default: all)")
    sp.add_argument(
        "--rule", type=int, metavar="ID", help="remove capture rule ID (cdc rules lists them)"
    )
    add_dsn_argument(sp)

    sp = add("rules", capture.cmd_rules, "list the capture rules (cdc attach with a pattern)")
    sp.add_argument("--json", action="store_true", help="JSON output")
    add_dsn_argument(sp)

    sp = add(
        "triggers",
        capture.cmd_triggers,
        "list captured tables and the state of their triggers; exit 3 when one is stale and"
        " nothing will refresh it",
    )
    sp.add_argument("--json", action="store_true", help="JSON output")
    add_dsn_argument(sp)

    sp = add("ticker", queue.cmd_ticker, "tick queues, re-insert retries, rotate tables")
    add_dsn_argument(sp, several=True)
    sp.add_argument("--once", action="store_true", help="one round, then exit")
    for name, help in (
        ("tick_period", "seconds between ticks"),
        ("retry_period", "seconds between retry runs"),
        ("maint_period", "seconds between maintenance"),
    ):
        sp.add_argument(
            f"--{name.replace('_', '-')}",
            type=float,
            default=default(TickerSettings, name),
            help=f"{help} (%(default)g)",
        )
    sp.add_argument("--metrics-port", type=int, help="serve Prometheus metrics on this port")

    sp = add(
        "status",
        ops.cmd_status,
        "health, queue, consumer and tables of a pipeline; exit 3 when unhealthy (pending"
        " events older than --max-pending-age with no drain at work, a failing table, a failed"
        " snapshot), the same in every output",
    )
    add_config_argument(sp)
    sp.add_argument(
        "--max-pending-age",
        type=float,
        default=MAX_PENDING_AGE,
        metavar="SECONDS",
        help="pending events older than this are unhealthy (%(default)g): more than the"
        " drain's schedule interval plus its run time",
    )
    shown = sp.add_mutually_exclusive_group()
    shown.add_argument("--json", action="store_true", help="JSON output")
    shown.add_argument("--prometheus", action="store_true", help="Prometheus text format")

    # the Spark commands of a pipeline (cdc.cli.pipeline)
    sp = add(
        "drain", pipeline.cmd_drain, "apply queue batches to Delta tables (local Spark session)"
    )
    drain.add_arguments(sp)

    sp = add(
        "snapshot",
        pipeline.cmd_snapshot,
        "load captured tables' existing rows into their Delta tables in chunks, consistent with"
        " the queue, while the drain goes on; an unfinished snapshot resumes",
    )
    sp.add_argument("tables", nargs="+", metavar="SCHEMA.TABLE", help="source tables to load")
    add_config_argument(sp)
    _add_copy_arguments(sp, snapshot.PARTITIONS)
    sp.add_argument(
        "--chunk-rows",
        type=int,
        default=snapshot.CHUNK_ROWS,
        help="rows per chunk, each its own short snapshot and MERGE (%(default)s)",
    )
    sp.add_argument(
        "--nice",
        type=_nice,
        default=snapshot.NICE,
        metavar="N",
        help="lower this process's CPU priority by N (its local Spark JVM's too), so that a"
        " drain on the same machine keeps its freshness; 0: as started (%(default)s)",
    )
    sp.add_argument(
        "--restart", action="store_true", help="start over instead of resuming an unfinished one"
    )
    sp.add_argument(
        "--request",
        action="store_true",
        help="ask the running drain to take it (a signal event in the queue), then exit",
    )

    sp = add(
        "resync",
        pipeline.cmd_resync,
        "recover a failing table: a new snapshot of it, then its events apply again",
    )
    sp.add_argument("table", metavar="SCHEMA.TABLE", help="the source table, as in the config")
    add_config_argument(sp)
    _add_copy_arguments(sp, snapshot.PARTITIONS)

    sp = add(
        "verify",
        pipeline.cmd_verify,
        "compare mirror targets with their sources at one consistent point; exit 4 if any differs"
        " (keys explained by open quarantined events are reported apart and do not count)",
    )
    sp.add_argument("tables", nargs="*", metavar="SCHEMA.TABLE", help="default: every mirror")
    add_config_argument(sp)
    sp.add_argument(
        "--limit",
        type=int,
        default=verify.LIMIT,
        help="differing keys shown per table (%(default)s)",
    )
    sp.add_argument("--json", action="store_true", help="JSON output")

    # the quarantine (cdc.cli.quarantine)
    sp = add(
        "quarantine",
        quarantine.cmd_quarantine,
        "list quarantined events, replay them once the cause is fixed, or discard them",
    )
    quarantine.add_arguments(sp)

    # operations (cdc.cli.ops, cdc.cli.sql)
    sql.add_arguments(add("sql", sql.cmd_sql, sql.HELP))

    sp = add("maintain", ops.cmd_maintain, "OPTIMIZE (ordered by key) and VACUUM the Delta tables")
    sp.add_argument("targets", nargs="*", help="targets (default: all and the quarantine)")
    add_config_argument(sp)
    sp.add_argument("--no-optimize", action="store_true", help="skip OPTIMIZE")
    sp.add_argument("--no-vacuum", action="store_true", help="skip VACUUM")
    sp.add_argument(
        "--retain-hours",
        type=int,
        default=maintain.DEFAULT_RETAIN_HOURS,
        help="VACUUM keeps files this recent (%(default)s)",
    )
    sp.add_argument(
        "--purge-deleted-older-than",
        metavar="AGE",
        type=_age,
        help="first delete the rows marked deleted longer ago than AGE (such as 30d, 12h;"
        ' units s, m, h, d, w) from the targets that keep them (deletes = "soft")',
    )

    sp = add("demo", ops.cmd_demo, "replicate a small shop from an embedded PostgreSQL into Delta")
    demo.add_arguments(sp)

    sp = add("jars", ops.cmd_jars, "fetch the Delta and PostgreSQL JDBC jars through Maven")
    sp.add_argument("--dest", help="folder (default: $CDC_JARS_DIR or ~/.cache/cdc-delta/jars)")

    # spark-submit (cdc.cli.submit); every Spark command takes --conf NAME=VALUE (cdc.spark)
    for name in SPARK_COMMANDS:
        add_conf_argument(sub.choices[name])
    sp = add(
        "submit",
        submit.cmd_submit,
        "run a job (drain, snapshot, maintain) with spark-submit: Delta's jars, the [spark]"
        " settings and quiet logs on the command line; --print shows it",
    )
    sp.add_argument("--print", action="store_true", help="print the command, run nothing")
    sp.add_argument("job", choices=JOBS)
    sp.add_argument(
        "args",
        nargs=argparse.REMAINDER,
        metavar="...",
        help="the job's arguments (--config FILE, ...), then -- and spark-submit's own",
    )
    return p


def _nice(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 19:
        raise argparse.ArgumentTypeError(f"--nice: a whole number from 0 to 19, not {text!r}")
    return value


def _add_copy_arguments(parser: argparse.ArgumentParser, partitions: int) -> None:
    """The options of the commands that copy a table (snapshot, resync)."""
    parser.add_argument(
        "--partitions",
        type=int,
        default=partitions,
        help="parallel JDBC reads by key range (%(default)s)",
    )
    parser.add_argument(
        "--no-progress", action="store_true", help="no progress lines, only the summary"
    )
