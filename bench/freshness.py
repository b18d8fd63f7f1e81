"""Freshness across many tables: p50/p99 of the time from a change's commit to its visibility
in Delta, at a steady rate spread over many tables, with a running ``cdc drain --follow``.

Run from the repository root::

    .venv/bin/python -m bench.freshness                    # 500 events/s over 100 tables, 120 s
    .venv/bin/python -m bench.freshness --quick            # smoke run: 5 tables, 20 events/s
    .venv/bin/python -m bench.freshness --tables 100 --rate 500 --seconds 300 --json out.json

One run starts a throwaway PostgreSQL cluster from ``--pgbin`` (stock settings, listening on
127.0.0.1; ``--socket`` makes the drain use the unix socket), creates ``--tables`` tables of
(id, seq, v, pad) captured in json into one queue, each with ``--keys`` rows, and writes the
pipeline file (every table mirrored). The drain is the real command, ``cdc drain --follow``, in
its own process with its own local Spark session (it ticks the queue itself). Once every target
exists (the first batch), a writer process commits ``--rate`` changes/s for ``--seconds``: one
transaction every 50 ms, each change on a random table, half updates of existing rows, half
inserts. The run then waits until every change is visible and stops the drain with SIGTERM.

Freshness is measured from the Delta logs, without touching the drain (bench/follow.py): the
moment the first Delta version holding the change became readable, minus the moment its commit
returned to the writer. Shown: p50, p99 and max over every change, the writer's achieved rate,
and the drain's batches.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

from bench import follow
from bench.common import (
    BenchError,
    check_args,
    common_arguments,
    git_state,
    machine_info,
    progress,
    server_info,
    write_json,
)

# bench.follow.TABLE_DDL's columns as the textbook drain types them, the key first
TEXTBOOK_COLUMNS = "id bigint,seq bigint,v int,pad string"


def run(
    args: argparse.Namespace, admin_dsn: str, work: Path, database: str = "bench_freshness"
) -> dict[str, Any]:
    tables = [f"t{i:03d}" for i in range(1, args.tables + 1)]
    dsn = follow.database(admin_dsn, database)
    progress(f"freshness: {len(tables)} tables of {args.keys} rows, captured in json")
    follow.create_tables(dsn, tables, args.keys)
    root = work / "delta"
    spark = {"spark.driver.memory": args.driver_memory}
    config = follow.write_pipeline(work / "pipeline.toml", dsn, root, tables, spark)
    logs = [follow.DeltaLog(root / t) for t in tables]
    if args.system == "textbook":  # bench/textbook_drain.py, the baseline, same settings
        command = [
            sys.executable, "-m", "bench.textbook_drain", "--dsn", dsn, "--root", str(root),
            "--tables", ",".join(tables), "--columns", TEXTBOOK_COLUMNS,
            "--conf", json.dumps(spark),
        ]  # fmt: skip
        drain = follow.CdcProcess([], work / "drain.log", command)
    else:
        args_ = ["drain", "--config", str(config), "--follow"]
        drain = follow.CdcProcess(args_, work / "drain.log")
    try:
        started = time.monotonic()

        def targets_exist() -> bool:
            for log in logs:
                log.refresh()
            return all(log.exists for log in logs)

        follow.wait_for(
            "the first batch (every target created)", targets_exist, args.timeout, [drain]
        )
        progress(f"  targets created in {time.monotonic() - started:.0f} s (drain start included)")
        batches_before = drain.batches()
        progress(f"freshness: {args.rate} changes/s over {len(tables)} tables for {args.seconds} s")
        writer = follow.Writer(
            dsn, tables, args.keys, args.rate, args.seconds, 1, work / "writer.json"
        )
        written = writer.result()
        progress(f"  written: {len(written['changes']):,} changes at {written['rate']:.0f}/s")
        follow.wait_for(
            "every change to be visible in Delta",
            lambda: follow.all_visible(written["changes"], logs),
            args.timeout,
            [drain],
        )
        batches = drain.batches() - batches_before
    finally:
        drain.stop()
    values, missing = follow.latencies(written["changes"], logs)
    assert missing == 0  # all_visible said so
    found = follow.summary(values)
    return {
        "system": args.system,
        "tables": len(tables),
        "rate_asked": args.rate,
        "rate_written": written["rate"],
        "late_slots": written["late_slots"],
        "seconds": args.seconds,
        "changes": len(written["changes"]),
        "batches": batches,
        "freshness_s": found,
        "versions_per_table": sum(len(log.times) for log in logs) / len(logs),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.freshness", description=__doc__.split("\n")[0])
    common_arguments(parser, reps=False)
    parser.add_argument("--tables", type=int, default=100, help="tables written (100)")
    parser.add_argument("--rate", type=float, default=500, help="changes per second (500)")
    parser.add_argument("--seconds", type=float, default=120, help="writing time (120)")
    parser.add_argument("--keys", type=int, default=100, help="rows per table before (100)")
    parser.add_argument("--driver-memory", default="2g", help="the drain's Spark driver (2g)")
    parser.add_argument("--timeout", type=float, default=1800, help="longest wait, seconds")
    parser.add_argument("--socket", action="store_true", help="the drain uses the unix socket")
    parser.add_argument("--keep", type=Path, help="keep the work folder (logs, Delta) here")
    parser.add_argument(
        "--system",
        choices=("ours", "textbook"),
        default="ours",
        help="the drain: cdc drain --follow, or the textbook Spark drain (bench/textbook_drain.py)",
    )
    args = parser.parse_args(argv)
    check_args(parser, args)
    if args.quick:
        args.tables, args.rate, args.seconds, args.keys = 5, 20, 20, 20
    if min(args.tables, args.rate, args.seconds, args.keys) <= 0:
        parser.error("--tables, --rate, --seconds and --keys must be positive")
    facts: dict[str, Any] = {
        "machine": machine_info(),
        "git": git_state(),
        "note": follow.free_cpu_note(),
    }
    try:
        with (
            follow.tcp_cluster(args.pgbin, {}, args.socket) as admin,
            follow.work_folder(args.keep, "bench-freshness-") as work,
        ):
            with psycopg.connect(admin) as conn:
                facts["server"], facts["settings"] = server_info(conn)
            facts["freshness"] = result = run(args, admin, work)
    except BenchError as exc:
        print(f"bench.freshness: {exc}", file=sys.stderr)
        return 2
    f = result["freshness_s"]
    print(
        f"{args.system}: {result['tables']} tables, {result['rate_written']:.0f} changes/s for"
        f" {result['seconds']:.0f} s ({result['changes']:,} changes, {result['batches']} batches):"
        f" freshness p50 {f['p50']:.2f} s, p99 {f['p99']:.2f} s, max {f['max']:.2f} s"
    )
    if args.json:
        write_json(args.json, facts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
