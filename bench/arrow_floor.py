"""The Arrow engine against the floor of its own tools: the drain beside a bare pyarrow JSON
read, a keep-last per key and a delta-rs MERGE of the same events, in one run.

Run from the repository root::

    .venv/bin/python -m bench.arrow_floor                          # 1,000,000 events a batch
    .venv/bin/python -m bench.arrow_floor --events 200000 --json out.json

A throwaway PostgreSQL cluster from ``--pgbin``; ``--tables`` tables (bench.drain_bench's)
captured in json into one queue; two backlogs of ``--events`` events each (drain_bench's
mix: 25% inserts, 60% updates, 15% deletes; the second of other keys), the queue ticked
after each, so two batches. Two consumers take the same two batches in one process:

- **ours**: the drain (local master, unix socket: read with COPY, decoded, folded and MERGEd
  on the driver), the first batch into fresh targets first thing in a fresh Spark session
  (cold), the second into the targets it made (warm); the seconds per phase are
  BatchStats', summed over the tables (which run concurrently);
- **the floor**: the same batch read by the drain's own reader (the same COPY into Arrow,
  the same split by table), then per table, one after the other: *decode*: the payloads
  read by ``pyarrow.json.read_json`` with an explicit schema of the table's column types
  (Spark's types in Arrow, as the drain writes them) and the op from ev_type; *fold*: the
  last event of each key (numpy); *merge*: one delta-rs MERGE into a Delta table of its own
  (deletes, updates, inserts; created first on the cold batch); the batch finished.

The floor keeps no guarantee: it trusts every payload to be a well-formed object of the
table's columns and types, and has no quarantine, no schema drift, no commit identity.
What it reads is what the json capture writes (triggers/capture/formats/json.sql): int2,
int4, int8 as JSON numbers, bool as true/false, timestamp, timestamptz and date as JSON
strings of ``to_json``'s ISO form (timestamptz with its offset), every other type (numeric
here) as a JSON string of its text output; Arrow's reader turns those strings into
decimals and timestamps itself. Shown: seconds per phase of each, and floor / ours (above 1:
ours is faster) for the decode, for the whole batch, for what follows the read, and for the
whole batch with both sides' read made the mean of the two (the same reader: what differs
there is the machine's load, and the server's cache, warm for the floor, which reads the
events second), cold and warm. Last, each floor table is checked to hold the rows of the
drain's.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from bench import drain_bench
from bench.common import (
    BenchError,
    check_args,
    common_arguments,
    progress,
    publish,
    run_facts,
    server,
)
from cdc.pg import pgtypes
from cdc.pg import source as source_module
from cdc.pg.consumer import Consumer
from cdc.pipeline.apply import BatchStats
from cdc.pipeline.drain import WORKERS, Drain
from cdc.pipeline.reader import BatchReader

RUNS = ("cold", "warm")
KEY = "id"  # the key of drain_bench's tables
DELETED = "__deleted"  # the floor's fold: whether a key's last event is a DELETE
DELETE_TYPE = '{"op":"DELETE"'  # how a json DELETE's ev_type begins
FLOOR_PHASES = ("read", "decode", "fold", "merge", "finish")
OURS_PHASES = ("read", "decode", "fold+merge", "schema", "slowest table")


def backlogs(dsn: str, tables: list[str], events: int) -> list[tuple[int, int]]:
    """Two backlogs of about ``events`` events, a tick after each, consumed by 'ours' and
    'floor'; returns each one's events and tick."""
    drain_bench._setup(dsn, tables, ("ours", "floor"))
    found: list[tuple[int, int]] = []
    before = 0
    with psycopg.connect(dsn, autocommit=True) as conn:
        ticker = Consumer(conn, "bench", "ours")
        for first in (0, events // 4 // len(tables)):
            started = time.monotonic()
            total = drain_bench.backlog(dsn, tables, events, first)
            tick = ticker.tick()
            if tick is None:
                raise BenchError("the queue made no tick")
            found.append((total - before, tick))
            before = total
            progress(f"backlog: {found[-1][0]:,} events in {time.monotonic() - started:.0f} s")
    return found


def ours(drain: Drain, tick: int, tables: list[str]) -> dict[str, Any]:
    """The drain's batches up to ``tick`` (one): its wall time, BatchStats' phases, the
    tables' seconds (summed, and the slowest: the tables run concurrently) and what of them
    is neither decode nor fold+merge ("schema"); refused unless every table took the Arrow
    engine (read with COPY, written from the driver)."""
    batches: list[BatchStats] = []
    started = time.monotonic()
    drain.run(on_batch=batches.append, stop_at_tick=tick)
    seconds = time.monotonic() - started
    phases: dict[str, float] = {}
    for stats in batches:
        for name, value in {**stats.seconds, **stats.phases}.items():
            if name not in tables:
                phases[name] = phases.get(name, 0.0) + value
        spent = [stats.seconds.get(t, 0.0) for t in tables]
        phases["slowest table"] = phases.get("slowest table", 0.0) + max(spent)
        phases["tables"] = phases.get("tables", 0.0) + sum(spent)
        if stats.events and (stats.read != "copy" or len(stats.on_driver) < len(tables)):
            raise BenchError(
                f"batch {stats.batch_id} read by {stats.read}, tables written from the driver:"
                f" {sorted(stats.on_driver)} (a larger --memory-budget keeps it on the driver)"
            )
    # a table's work besides decode and fold+merge: its target's schema checked (or the
    # target made, cold) by Spark, its commit identity looked up
    phases["schema"] = phases["tables"] - phases.get("decode", 0.0) - phases.get("fold+merge", 0.0)
    return {
        "events": sum(stats.events for stats in batches),
        "seconds": seconds,
        "phases": phases,
    }


def read_payloads(ev_data: pa.ChunkedArray, schema: pa.Schema) -> pa.Table:
    """The JSON objects, one per line, read by Arrow's JSON reader into the schema's types."""
    texts = ev_data.combine_chunks()
    ended = pc.binary_join_element_wise(texts, pa.scalar("", pa.string()), "\n")
    offsets = np.frombuffer(ended.buffers()[1], dtype=np.int32)
    lines = ended.buffers()[2][int(offsets[ended.offset]) : int(offsets[ended.offset + len(ended)])]
    options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error")
    return pj.read_json(pa.BufferReader(lines), parse_options=options)


def keep_last(rows: pa.Table, deleted: pa.Array) -> pa.Table:
    """Each key's last row (rows in event order), with whether its event was a DELETE."""
    keys = rows.column(KEY).to_numpy()
    _, first_reversed = np.unique(keys[::-1], return_index=True)
    last = pa.array(len(keys) - 1 - first_reversed)
    return rows.take(last).append_column(DELETED, deleted.take(last))


def merge(path: Path, folded: pa.Table, schema: pa.Schema) -> None:
    """One delta-rs MERGE of the folded rows: a deleted key goes, others are written whole."""
    from deltalake import DeltaTable

    if not path.exists():
        DeltaTable.create(str(path), schema)
    rest = [DELETED]
    (
        DeltaTable(str(path))
        .merge(folded, f"t.{KEY} = s.{KEY}", source_alias="s", target_alias="t")
        .when_matched_delete(f"s.{DELETED}")
        .when_matched_update_all(f"not s.{DELETED}", except_cols=rest)
        .when_not_matched_insert_all(f"not s.{DELETED}", except_cols=rest)
        .execute()
    )


def _add(phases: dict[str, float], name: str, started: float) -> float:
    now = time.monotonic()
    phases[name] = phases.get(name, 0.0) + now - started
    return now


def floor(
    conn: psycopg.Connection,
    drain: Drain,
    schemas: dict[str, pa.Schema],
    root: Path,
) -> dict[str, Any]:
    """The floor of one batch: read by the drain's reader, then per table decode, fold and
    merge; the seconds of each phase summed over the tables."""
    pipeline = drain.pipeline
    phases: dict[str, float] = {}
    started = time.monotonic()
    batch = Consumer(conn, "bench", "floor").next_batch()
    if batch is None:
        raise BenchError("the floor found no batch")
    names = source_module.table_names(conn, pipeline.source, pipeline.tables)
    events = BatchReader(drain.spark, pipeline.source, pipeline.drain).read(batch, names)
    if not events.arrow:
        raise BenchError(
            f"the batch was read by {events.route}, not into Arrow: raise --memory-budget"
        )
    now = _add(phases, "read", started)
    count = 0
    for source, raw in events.arrow.items():
        table = source.split(".", 1)[1]
        count += raw.num_rows
        rows = read_payloads(raw.column("ev_data"), schemas[table])
        deleted = pc.starts_with(raw.column("ev_type"), DELETE_TYPE).combine_chunks()
        now = _add(phases, "decode", now)
        folded = keep_last(rows, deleted)
        now = _add(phases, "fold", now)
        merge(root / table, folded, schemas[table])
        now = _add(phases, "merge", now)
    batch.finish()
    _add(phases, "finish", now)
    held = sum(raw.nbytes for raw in events.arrow.values()) / 1e6
    return {"events": count, "mb": held, "seconds": time.monotonic() - started, "phases": phases}


def same_rows(ours_root: Path, floor_root: Path, tables: list[str]) -> dict[str, int]:
    """Each table's rows, the same in the drain's target and the floor's; their counts."""
    from deltalake import DeltaTable

    counts = {}
    for t in tables:
        mine = DeltaTable(str(floor_root / t)).to_pyarrow_table().sort_by(KEY)
        theirs = DeltaTable(str(ours_root / t)).to_pyarrow_table().sort_by(KEY)
        theirs = theirs.select(mine.column_names).cast(mine.schema)
        if not mine.equals(theirs):
            raise BenchError(f"table {t}: the floor's rows differ from the drain's")
        counts[t] = mine.num_rows
    return counts


def run(admin: str, root: Path, args: argparse.Namespace) -> dict[str, Any]:
    from cdc import spark as spark_module

    dsn = drain_bench._database(admin, "bench_floor")
    tables = [f"t{i}" for i in range(1, args.tables + 1)]
    batches = backlogs(dsn, tables, args.events)
    facts: dict[str, Any] = {"events": [events for events, _ in batches]}
    with psycopg.connect(dsn, autocommit=True) as conn:
        columns = {t: pgtypes.keyed_columns(conn, "public", t) for t in tables}
        facts["payload"] = conn.execute(
            "select ev_data from cdc.event where ev_type like %s order by ev_id limit 1",
            ('{"op":"INSERT"%',),
        ).fetchone()[0]
    schemas = {
        t: pa.schema([(c.name, pgtypes.arrow_type(c.spark_type)) for c in cols])
        for t, cols in columns.items()
    }
    facts["schema"] = {c.name: c.spark_type for c in columns[tables[0]]}
    started = time.monotonic()
    spark = spark_module.session("cdc-bench")
    facts["spark_start_s"] = time.monotonic() - started
    # a batch per tick (run's stop_at_tick), as the floor's next_batch takes them
    pipeline = drain_bench._pipeline(dsn, root / "ours", tables, sum(facts["events"]), "ours")
    # a budget the batches stay under: read with COPY into Arrow, the Arrow engine's input
    budget = replace(pipeline.drain, memory_budget=args.memory_budget << 30)
    pipeline = replace(pipeline, drain=budget)
    with (
        Drain(pipeline, spark, tick=False, workers=args.workers) as drain,
        psycopg.connect(dsn, autocommit=True) as conn,
    ):
        conn.execute("set datestyle = 'ISO, YMD'")  # as the drain's connection
        conn.execute("set timezone = 'UTC'")
        for run_name, (events, tick) in zip(RUNS, batches, strict=True):
            # the machine's load (others' work shares its cores): seconds depend on it
            facts[run_name] = {"load": os.getloadavg()[0], "ours": ours(drain, tick, tables)}
            progress(f"ours, {run_name}: {facts[run_name]['ours']}")
            facts[run_name]["floor"] = floor(conn, drain, schemas, root / "floor")
            progress(f"floor, {run_name}: {facts[run_name]['floor']}")
            for side in ("ours", "floor"):
                if facts[run_name][side]["events"] != events:
                    raise BenchError(
                        f"{side}, {run_name}: {facts[run_name][side]['events']:,} events,"
                        f" not {events:,}"
                    )
    facts["rows"] = same_rows(root / "ours", root / "floor", tables)
    for run_name in RUNS:
        facts[run_name]["ratio"] = ratios(facts[run_name]["floor"], facts[run_name]["ours"])
    return facts


def ratios(f: dict[str, Any], o: dict[str, Any]) -> dict[str, float]:
    """floor / ours: of the decode, of the whole batch, of what follows the read (both read
    with the same code: a difference there is the machine's, or the server's cache, warm
    for the floor, which reads second), and of the whole batch had both read in the mean of
    their two reads."""
    read = (f["phases"]["read"] + o["phases"]["read"]) / 2
    after_f, after_o = f["seconds"] - f["phases"]["read"], o["seconds"] - o["phases"]["read"]
    return {
        "decode": f["phases"]["decode"] / o["phases"]["decode"],
        "whole": f["seconds"] / o["seconds"],
        "after read": after_f / after_o,
        "same read": (read + after_f) / (read + after_o),
    }


def report(facts: dict[str, Any]) -> None:
    print(
        f"\n{facts['events'][0]:,} and {facts['events'][1]:,} json events (cold, warm)"
        f" over {facts['args']['tables']} tables;"
        f" Spark session start {facts['spark_start_s']:.1f} s (not counted)"
    )
    print(f"a payload: {facts['payload']}")
    for run_name in RUNS:
        o, f = facts[run_name]["ours"], facts[run_name]["floor"]
        print(
            f"{run_name}: ours {o['seconds']:.2f} s, floor {f['seconds']:.2f} s"
            f" (load average {facts[run_name]['load']:.1f} before)"
        )
        print("  ours:  " + ", ".join(f"{p} {o['phases'].get(p, 0.0):.2f}" for p in OURS_PHASES))
        print("  floor: " + ", ".join(f"{p} {f['phases'].get(p, 0.0):.2f}" for p in FLOOR_PHASES))
        ratio = facts[run_name]["ratio"]
        print(
            f"  floor / ours: decode {ratio['decode']:.2f}, whole batch {ratio['whole']:.2f},"
            f" after the read {ratio['after read']:.2f}, whole with the same read"
            f" {ratio['same read']:.2f} (above 1: ours is faster)"
        )
    print(f"rows after both batches, the same in both: {facts['rows']}")
    if facts["args"]["workers"] > 1:
        print(
            "ours' decode and fold+merge are summed over tables that ran concurrently (each"
            " table's wall time): --workers 1 compares them with the floor's"
        )


def plot(facts: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    groups = [(r, m) for r in RUNS for m in ("whole batch", "decode")]
    xs = np.arange(len(groups))
    for n, side in enumerate(("ours", "floor")):
        heights = [
            facts[r][side]["seconds"] if m == "whole batch" else facts[r][side]["phases"]["decode"]
            for r, m in groups
        ]
        ax.bar(xs + (n - 0.5) * 0.4, heights, 0.4, label=side)
    ax.set_xticks(xs, [f"{r}\n{m}" for r, m in groups])
    ax.set_ylabel("seconds (decode summed over tables)")
    ax.set_title(f"{facts['events'][0]:,} json events a batch: the drain and its tools' floor")
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.arrow_floor", description=__doc__.splitlines()[0]
    )
    common_arguments(parser, reps=False)
    parser.add_argument("--events", type=int, default=1_000_000, help="events a batch")
    parser.add_argument("--tables", type=int, default=3, help="tables (default 3)")
    parser.add_argument(
        "--workers", type=int, default=WORKERS, help=f"tables at once (default {WORKERS})"
    )
    parser.add_argument(
        "--memory-budget",
        type=int,
        default=8,
        metavar="GIB",
        help="the drain's memory budget in GiB (default 8: 1M events stay on the driver)",
    )
    args = parser.parse_args(argv)
    check_args(parser, args)
    if args.quick:
        args.events = 20_000
    if args.tables < 1 or args.workers < 1 or args.events < 4 * args.tables:
        parser.error("--tables and --workers must be 1 or more, --events at least 4 a table")
    facts = run_facts(args)
    try:
        settings = {"max_wal_size": "8GB", "checkpoint_timeout": "30min"}
        with server(args.pgbin, settings, facts) as admin, tempfile.TemporaryDirectory() as tmp:
            facts.update(run(admin, Path(tmp), args))
    except BenchError as exc:
        print(f"arrow_floor: {exc}", file=sys.stderr)
        return 1
    return publish(facts, args, report, plot)


if __name__ == "__main__":
    sys.exit(main())
