"""The ``cdc`` command.

Exit codes: 0 success, 1 an error the message explains (bad input, unknown queue, the
database refused), 2 wrong usage.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import psycopg

from cdc import __version__, errors, failures
from cdc.config import add_config_argument
from cdc.pg import capture, install
from cdc.pg.queue import Queue
from cdc.pg.ticker import Ticker, TickerSettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cdc.config import Pipeline

log = logging.getLogger("cdc")


def _dsn(args: argparse.Namespace) -> str:
    dsn = args.dsn or os.environ.get("CDC_DSN")
    if not dsn:
        raise errors.ConfigError("no database given: pass --dsn or set CDC_DSN")
    return dsn


def cmd_install(args: argparse.Namespace) -> int:
    version = install.install(_dsn(args))
    print(f"cdc {version} installed")
    return 0


def cmd_uninstall(args: argparse.Namespace) -> int:
    dropped = install.uninstall(_dsn(args), drop_roles=not args.keep_roles)
    print("cdc removed" + (f"; dropped roles {', '.join(dropped)}" if dropped else ""))
    return 0


def cmd_queue(args: argparse.Namespace) -> int:
    with psycopg.connect(_dsn(args), autocommit=True) as conn:
        queue = Queue(conn, args.name)
        if args.action == "create":
            created = queue.create()
            print(f"queue {args.name!r} " + ("created" if created else "exists already"))
        elif args.action == "drop":
            queue.drop(force=args.force)
            print(f"queue {args.name!r} dropped")
        else:
            info = queue.info()
            print(json.dumps(info, default=str, indent=2))
    return 0


def _extras(items: list[str]) -> dict[int, str]:
    extras: dict[int, str] = {}
    for item in items:
        number, sep, expr = item.partition("=")
        if not sep or number.strip() not in ("1", "2", "3", "4") or not expr.strip():
            raise errors.ConfigError(f"--extra takes N=EXPR with N from 1 to 4, not {item!r}")
        extras[int(number)] = expr
    return extras


def _names(text: str | None) -> tuple[str, ...]:
    return tuple(n.strip() for n in text.split(",") if n.strip()) if text else ()


def cmd_attach(args: argparse.Namespace) -> int:
    opts = capture.CaptureOptions(
        queue=args.queue,
        format=args.format,
        ignore=_names(args.ignore),
        pkey=_names(args.pkey),
        backup=args.backup,
        when=args.when,
        extra=_extras(args.extra),
        ev_type=args.ev_type,
        skip=args.skip,
        deny=args.deny,
        mode=args.mode,
    )
    with psycopg.connect(_dsn(args)) as conn:
        if args.print:
            print(capture.generated_sql(conn, args.table, opts))
            return 0
        capture.attach(conn, args.table, opts)
    print(f"{args.table} captured into queue {args.queue!r} ({args.format})")
    return 0


def cmd_detach(args: argparse.Namespace) -> int:
    with psycopg.connect(_dsn(args)) as conn:
        n = capture.detach(conn, args.table, args.queue)
    print(f"{args.table}: {n} capture(s) removed")
    return 0


def cmd_triggers(args: argparse.Namespace) -> int:
    with psycopg.connect(_dsn(args)) as conn:
        rows = capture.captures(conn)
    if args.json:
        print(json.dumps(rows, default=str, indent=2))
        return 0
    if not rows:
        print("no table is captured")
        return 0
    width = max(len(r["table_name"]) for r in rows)
    for r in rows:
        state = "current" if r["current"] else "STALE: run cdc attach again"
        opts = {k: v for k, v in r["options"].items() if k != "format"}
        name = r["table_name"]
        print(f"{name:<{width}}  {r['queue_name']}  {r['format']:<6}  {state}  {json.dumps(opts)}")
    return 0 if all(r["current"] for r in rows) else 1


def cmd_ticker(args: argparse.Namespace) -> int:
    dsns = args.dsn or ([os.environ["CDC_DSN"]] if os.environ.get("CDC_DSN") else [])
    if not dsns:
        raise errors.ConfigError("no database given: pass --dsn (once per database) or set CDC_DSN")
    for name in ("tick_period", "retry_period", "maint_period"):
        if getattr(args, name) <= 0:
            raise errors.ConfigError(f"--{name.replace('_', '-')} must be positive")
    ticker = Ticker(dsns, TickerSettings(args.tick_period, args.retry_period, args.maint_period))
    if args.metrics_port:
        from prometheus_client import start_http_server
        from prometheus_client.registry import CollectorRegistry

        from cdc.ops.status import TickerCollector

        registry = CollectorRegistry()
        registry.register(TickerCollector(dsns))
        start_http_server(args.metrics_port, registry=registry)
    if args.once:
        totals = ticker.run_once()
        print(" ".join(f"{k}={v}" for k, v in totals.items()))
        return 0

    def _stop(signum: int, _frame: object) -> None:
        log.info("received %s, stopping", signal.Signals(signum).name)
        ticker.stop()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    ticker.run()
    return 0


def _pipeline_and_spark(args: argparse.Namespace, app: str) -> tuple[Pipeline, SparkSession]:
    """The --config pipeline and the Spark session of a Spark command (loaded in that order:
    a bad configuration fails before Spark starts)."""
    from cdc import config
    from cdc import spark as spark_module

    pipeline = config.load(args.config)
    session = spark_module.session(app)
    # a failure reaches the user as one line (main); Spark's own logs of it (task failures
    # with their Java traces, many lines) only with -v
    session.sparkContext.setLogLevel("WARN" if args.verbose else "OFF")
    return pipeline, session


def cmd_drain(args: argparse.Namespace) -> int:
    from cdc.pipeline import drain

    pipeline, session = _pipeline_and_spark(args, "cdc-drain")
    on_batch = None
    if args.mode == "follow" and pipeline.metrics_port:
        on_batch = drain.serve_metrics(pipeline)
    with drain.Drain(pipeline, session, tick=not args.no_tick) as runner:
        runner.stop_on_signals()
        batches = runner.run(args.mode, on_batch=on_batch)
    log.info("%d batch(es) applied", batches)
    return 0


def cmd_snapshot(args: argparse.Namespace) -> int:
    from cdc.pipeline import snapshot

    pipeline, session = _pipeline_and_spark(args, "cdc-snapshot")
    loader = snapshot.Snapshot(pipeline, session, progress=not args.no_progress)
    for table in args.tables:
        result = loader.run(table, args.partitions)
        print(
            f"{result.table}: {result.rows:,} rows into {', '.join(result.targets)}"
            f" in {result.seconds:.1f} s"
            + (f", {result.quarantined:,} quarantined" if result.quarantined else "")
        )
    return 0


def cmd_resync(args: argparse.Namespace) -> int:
    from cdc.pipeline import resync

    pipeline, session = _pipeline_and_spark(args, "cdc-resync")
    result = resync.resync(
        pipeline, session, args.table, args.partitions, progress=not args.no_progress
    )
    cleared = ", ".join(result.cleared) if result.cleared else "none was failing"
    print(
        f"{result.table}: {result.rows:,} rows at tick {result.position} in"
        f" {result.seconds:.1f} s"
        + (f", {result.quarantined:,} quarantined" if result.quarantined else "")
        + f"; failing marks cleared: {cleared}"
    )
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from cdc.pipeline import verify

    pipeline, session = _pipeline_and_spark(args, "cdc-verify")
    verdicts = verify.Verifier(pipeline, session, args.limit).run(args.tables)
    if args.json:
        print(json.dumps([v.as_dict() for v in verdicts], indent=2, default=str))
    else:
        for v in verdicts:
            state = "ok" if v.ok else "DIFFERS"
            print(
                f"{v.source} -> {v.target}: {state} at tick {v.tick_id} (Delta version"
                f" {v.delta_version}): source {v.source_rows:,} rows, Delta {v.delta_rows:,}"
                f" rows, hashes {v.source_hash} / {v.delta_hash}"
            )
            if not v.ok:
                print(f"  {v.differences:,} differing key(s); the first {len(v.keys)}:")
                for k in v.keys:
                    print(f"    {k['kind']}: {k['key']}")
    return 0 if all(v.ok for v in verdicts) else 1


def cmd_status(args: argparse.Namespace) -> int:
    from prometheus_client import generate_latest

    from cdc import config
    from cdc.ops import status

    pipeline = config.load(args.config)
    state = status.collect(pipeline)
    if args.json:
        print(status.to_json(state))
    elif args.prometheus:
        print(generate_latest(status.registry(pipeline)).decode(), end="")
    else:
        print(status.render(state))
    return 1 if state.queue.stalled or state.failing else 0


def cmd_sql(args: argparse.Namespace) -> int:
    from cdc.ops import query

    pipeline, session = _pipeline_and_spark(args, "cdc-sql")
    print(query.run(pipeline, session, args.query, args.limit, args.format))
    return 0


def cmd_maintain(args: argparse.Namespace) -> int:
    from cdc.ops import maintain

    pipeline, session = _pipeline_and_spark(args, "cdc-maintain")
    done = maintain.maintain(
        pipeline,
        session,
        args.targets,
        optimize=not args.no_optimize,
        vacuum=not args.no_vacuum,
        retain_hours=args.retain_hours,
    )
    for m in done:
        print(f"{m.target}: {m.files_before} file(s) -> {m.files_after}")
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


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="cdc", description=__doc__.splitlines()[0])
    p.add_argument("--version", action="version", version=f"cdc {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="log more")
    sub = p.add_subparsers(dest="command", required=True)

    def add(
        name: str, func: Callable[[argparse.Namespace], int], help: str
    ) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help, description=help)
        sp.set_defaults(func=func)
        return sp

    sp = add("install", cmd_install, "install or upgrade the queue engine (one transaction)")
    sp.add_argument("--dsn", help="database connection string (default: $CDC_DSN)")

    sp = add("uninstall", cmd_uninstall, "remove the queue engine and its roles")
    sp.add_argument("--dsn", help="database connection string (default: $CDC_DSN)")
    sp.add_argument("--keep-roles", action="store_true", help="do not drop the cdc_* roles")

    sp = add("queue", cmd_queue, "create, drop or show a queue")
    sp.add_argument("action", choices=["create", "drop", "info"])
    sp.add_argument("name", help="queue name")
    sp.add_argument("--dsn", help="database connection string (default: $CDC_DSN)")
    sp.add_argument("--force", action="store_true", help="drop even with consumers")

    sp = add("attach", cmd_attach, "capture a table's changes into a queue (generated triggers)")
    sp.add_argument("table", help="SCHEMA.TABLE")
    sp.add_argument("--queue", required=True, help="queue to write events to")
    sp.add_argument("--format", choices=["json", "urlenc", "sql"], default="json")
    sp.add_argument("--ignore", help="columns left out of events: c1,c2")
    sp.add_argument("--pkey", help="key columns instead of the primary key: c1,c2")
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
    sp.add_argument("--mode", choices=["row", "statement"], default="row")
    sp.add_argument("--print", action="store_true", help="show the generated SQL, run nothing")
    sp.add_argument("--dsn", help="database connection string (default: $CDC_DSN)")

    sp = add("detach", cmd_detach, "remove capture triggers from a table")
    sp.add_argument("table", help="SCHEMA.TABLE")
    sp.add_argument("--queue", help="only this queue's capture (default: all)")
    sp.add_argument("--dsn", help="database connection string (default: $CDC_DSN)")

    sp = add("triggers", cmd_triggers, "list captured tables; exit 1 when any trigger is stale")
    sp.add_argument("--json", action="store_true", help="JSON output")
    sp.add_argument("--dsn", help="database connection string (default: $CDC_DSN)")

    sp = add("ticker", cmd_ticker, "tick queues, re-insert retries, rotate tables")
    sp.add_argument("--dsn", action="append", help="a database to serve; repeat for several")
    sp.add_argument("--once", action="store_true", help="one round, then exit")
    sp.add_argument("--tick-period", type=float, default=1.0, help="seconds between ticks (1)")
    sp.add_argument(
        "--retry-period", type=float, default=30.0, help="seconds between retry runs (30)"
    )
    sp.add_argument(
        "--maint-period", type=float, default=120.0, help="seconds between maintenance (120)"
    )
    sp.add_argument("--metrics-port", type=int, help="serve Prometheus metrics on this port")

    sp = add(
        "status",
        cmd_status,
        "queue, consumer and tables of a pipeline; exit 1 when the ticker is stalled or a table"
        " is failing",
    )
    add_config_argument(sp)
    shown = sp.add_mutually_exclusive_group()
    shown.add_argument("--json", action="store_true", help="JSON output")
    shown.add_argument("--prometheus", action="store_true", help="Prometheus text format")

    sp = add("drain", cmd_drain, "apply queue batches to Delta tables (local Spark session)")
    from cdc.pipeline.drain import add_arguments

    add_arguments(sp)

    sp = add(
        "snapshot",
        cmd_snapshot,
        "load captured tables' existing rows into their Delta tables, consistent with the queue",
    )
    sp.add_argument("tables", nargs="+", metavar="SCHEMA.TABLE", help="source tables to load")
    add_config_argument(sp)
    sp.add_argument(
        "--partitions", type=int, default=8, help="parallel JDBC reads by key range (8)"
    )
    sp.add_argument("--no-progress", action="store_true", help="no progress line on stderr")

    sp = add(
        "resync",
        cmd_resync,
        "recover a failing table: a new snapshot of it, then its events apply again",
    )
    sp.add_argument("table", metavar="SCHEMA.TABLE", help="the source table, as in the config")
    add_config_argument(sp)
    sp.add_argument(
        "--partitions", type=int, default=8, help="parallel JDBC reads by key range (8)"
    )
    sp.add_argument("--no-progress", action="store_true", help="no progress line on stderr")

    sp = add(
        "verify",
        cmd_verify,
        "compare mirror targets with their sources at one consistent point; exit 1 if any differs",
    )
    sp.add_argument("tables", nargs="*", metavar="SCHEMA.TABLE", help="default: every mirror")
    add_config_argument(sp)
    sp.add_argument("--limit", type=int, default=20, help="differing keys shown per table (20)")
    sp.add_argument("--json", action="store_true", help="JSON output")

    sp = add("sql", cmd_sql, "Spark SQL over the replicated tables (views named as targets)")
    sp.add_argument("query", help="a Spark SQL query, e.g. 'select count(*) from orders'")
    add_config_argument(sp)
    sp.add_argument("--limit", type=int, default=100, help="rows shown, 0 for all (100)")
    sp.add_argument("--format", default="table", help="table, json (lines) or csv")

    sp = add("maintain", cmd_maintain, "OPTIMIZE (ordered by key) and VACUUM the Delta tables")
    sp.add_argument("targets", nargs="*", help="targets (default: all and the quarantine)")
    add_config_argument(sp)
    sp.add_argument("--no-optimize", action="store_true", help="skip OPTIMIZE")
    sp.add_argument("--no-vacuum", action="store_true", help="skip VACUUM")
    sp.add_argument(
        "--retain-hours", type=int, default=168, help="VACUUM keeps files this recent (168)"
    )

    sp = add("demo", cmd_demo, "replicate a small shop from an embedded PostgreSQL into Delta")
    sp.add_argument("--dir", default="demo-output", help="where the Delta tables go")

    sp = add("jars", cmd_jars, "fetch the Delta and PostgreSQL JDBC jars through Maven")
    sp.add_argument("--dest", help="folder (default: $CDC_JARS_DIR or ~/.cache/cdc-delta/jars)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return args.func(args)
    except errors.CdcError as exc:
        print(f"cdc: error: {exc}", file=sys.stderr)
        return 1
    except psycopg.Error as exc:
        _trace_if(args.verbose)
        translated = errors.translate(exc)
        if translated is exc:
            translated = failures.classify(exc).message
        print(f"cdc: error: {translated}", file=sys.stderr)
        return 1
    except Exception as exc:  # one line that names the cause; the trace only under -v
        _trace_if(args.verbose)
        print(f"cdc: error: {failures.classify(exc, _folder(args)).message}", file=sys.stderr)
        if not args.verbose:
            print("cdc: run with -v for the full trace", file=sys.stderr)
        return 1


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


if __name__ == "__main__":
    sys.exit(main())
