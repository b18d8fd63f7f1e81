"""``cdc quarantine list | replay | discard``: what the drain could not apply, applied once
the cause is fixed, or acknowledged (cdc.pipeline.replay, cdc.targets.quarantine)."""

from __future__ import annotations

import argparse
import datetime as dt
import json
from typing import TYPE_CHECKING, Any

from cdc.cli import exitcodes
from cdc.cli.common import pipeline_and_spark
from cdc.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from cdc.config import Pipeline

LIMIT = 20  # events listed


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from cdc.config import add_config_argument
    from cdc.spark import add_conf_argument

    sub = parser.add_subparsers(dest="action", required=True)
    shown = sub.add_parser(
        "list",
        help="per table, open events by reason, then the events",
        description="per table, the quarantined rows by state and reason, then the open ones",
    )
    shown.add_argument("--table", metavar="SCHEMA.TABLE", help="only this source table")
    shown.add_argument("--reason", metavar="TEXT", help="only reasons containing TEXT")
    shown.add_argument(
        "--limit", type=int, default=LIMIT, help="events listed, 0 for none (%(default)s)"
    )
    shown.add_argument("--all", action="store_true", help="list resolved rows too")
    shown.add_argument("--json", action="store_true", help="JSON output")
    add_config_argument(shown)
    add_conf_argument(shown)
    replay = sub.add_parser(
        "replay",
        help="apply a table's quarantined events once the cause is fixed (exactly once)",
        description="apply a table's open quarantined events through the drain's path,"
        " exactly once; events of keys changed later are marked superseded, events that still"
        " fail stay quarantined with the new reason",
    )
    replay.add_argument("table", metavar="SCHEMA.TABLE", help="the source table, as configured")
    add_config_argument(replay)
    add_conf_argument(replay)
    discard = sub.add_parser(
        "discard",
        help="mark quarantined rows acknowledged (kept, no longer counted)",
        description="mark open quarantined rows discarded: kept for audit, no longer counted",
    )
    discard.add_argument("--table", metavar="SCHEMA.TABLE", help="only this source table")
    discard.add_argument("--reason", metavar="TEXT", help="only reasons containing TEXT")
    discard.add_argument(
        "--before", metavar="TIME", help="only events older than TIME (ISO 8601, default UTC)"
    )
    discard.add_argument("--yes", action="store_true", help="discard (without: only show)")
    add_config_argument(discard)
    add_conf_argument(discard)


def cmd_quarantine(args: argparse.Namespace) -> int:
    before = _time(args.before) if getattr(args, "before", None) else None
    check = "drain" if args.action == "replay" else None  # it applies events as the drain
    pipeline, session = pipeline_and_spark(args, f"cdc-quarantine-{args.action}", check=check)
    if args.action == "list":
        return _list(pipeline, session, args)
    from cdc.pipeline import replay

    replayer = replay.Replayer(pipeline, session)
    if args.action == "replay":
        result = replayer.replay(args.table)
        if result.run is None:
            print(f"{result.source}: no open quarantined events to replay")
            return exitcodes.OK
        resumed = " (finishing an interrupted run)" if result.resumed else ""
        print(
            f"{result.source}: replay run {result.run}{resumed} into"
            f" {', '.join(result.targets)}: {result.replayed:,} replayed,"
            f" {result.superseded:,} superseded, {result.failed:,} still quarantined"
        )
        for why, n in sorted(result.reasons.items()):
            print(f"  {n:,} still quarantined: {why}")
        return exitcodes.OK
    counts = replayer.discard(args.table, args.reason, before, dry_run=not args.yes)
    total = sum(counts.values())
    for source, n in sorted(counts.items(), key=lambda c: str(c[0])):
        print(f"{source}: {n:,} {'discarded' if args.yes else 'would be discarded'}")
    if not total:
        print("no open quarantined rows match")
    elif not args.yes:
        print(f"{total:,} row(s) match: run again with --yes to discard them")
    return exitcodes.OK


def _time(text: str) -> dt.datetime:
    try:
        value = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(
            f"--before {text!r} is not a time: give ISO 8601, e.g. 2026-11-25 or"
            " '2026-11-25 14:00:00+00'"
        ) from None
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def _list(pipeline: Pipeline, spark: SparkSession, args: argparse.Namespace) -> int:
    from pyspark.sql import functions as F

    from cdc.pipeline import replay
    from cdc.targets import quarantine

    rows = quarantine.with_state(
        spark,
        pipeline.table(pipeline.quarantine),
        pipeline.table(quarantine.resolved_name(pipeline.quarantine)),
    )
    if rows is None:
        print("the quarantine is empty" if not args.json else "[]")
        return exitcodes.OK
    rows = replay.filtered(rows, pipeline, args.table, args.reason, None).cache()
    summary = (
        rows.groupBy("source", "state", "current_reason")
        .count()
        .orderBy("source", "state", "current_reason")
        .collect()
    )
    shown = rows if args.all else quarantine.open_rows(rows)
    limit = max(args.limit, 0)
    events = shown.orderBy(F.col("source"), F.col("ev_id").asc_nulls_last()).limit(limit)
    listed = [_event(r.asDict(), keys) for r, keys in _with_keys(pipeline, events)]
    rows.unpersist()
    if args.json:
        tables: dict[str, Any] = {}
        for r in summary:
            entry = tables.setdefault(r["source"], {"source": r["source"], "states": {}})
            states = entry["states"].setdefault(r["state"], {})
            states[r["current_reason"]] = r["count"]
        out = {"tables": list(tables.values()), "events": listed}
        print(json.dumps(out, indent=2, default=str))
        return exitcodes.OK
    if not summary:
        print("no quarantined rows match")
        return exitcodes.OK
    current = None
    for r in summary:
        if r["source"] != current:
            current = r["source"]
            print(f"{current}:")
        print(f"  {r['state']:<10} {r['count']:>8,}  {r['current_reason']}")
    if listed:
        print()
        print(f"{'ev_id':>10}  {'tick':>6}  {'time':<26}  {'state':<10}  key / reason")
        for e in listed:
            print(
                f"{e['ev_id'] if e['ev_id'] is not None else '-':>10}  {e['tick_id'] or '-':>6}"
                f"  {e['ev_time'] or '-'!s:<26}  {e['state']:<10}  {e['source']}"
                f" {json.dumps(e['key'])}: {e['reason']}"
            )
    return exitcodes.OK


def _with_keys(pipeline: Pipeline, events: DataFrame) -> list[tuple[Any, list[str]]]:
    """The events with their key columns' names (from the source's catalog; none for a
    table the source no longer has)."""
    import psycopg

    from cdc.engines.spark import decode as spark_decode
    from cdc.names import parse_table_name
    from cdc.pg import pgtypes

    typed = spark_decode.with_op_and_map(events).collect()
    names: dict[str, list[str]] = {}
    with psycopg.connect(pipeline.source.dsn, autocommit=True) as conn:
        for source in {r["source"] for r in typed if r["source"]}:
            try:
                schema, table = parse_table_name(source)
                cols = pgtypes.keyed_columns(conn, schema, table, pipeline.source.capture_queue)
                names[source] = [c.name for c in cols if c.is_key]
            except (ConfigError, ValueError, psycopg.Error):
                names[source] = []
    return [(r, names.get(r["source"], [])) for r in typed]


def _event(row: dict[str, Any], keys: list[str]) -> dict[str, Any]:
    kv = row.get("kv") or {}
    if row.get("ev_type") == "snapshot" and row.get("ev_data"):
        try:
            kv = json.loads(row["ev_data"])
        except ValueError:
            kv = {}
    return {
        "source": row["source"],
        "ev_id": row["ev_id"],
        "tick_id": row["tick_id"],
        "ev_time": row["ev_time"],
        "op": row.get("op"),
        "key": {k: kv.get(k) for k in keys},
        "state": row["state"],
        "reason": row["current_reason"],
        "cause": row.get("cause"),  # cdc.targets.quarantine.CAUSES
    }
