"""Snapshot while draining: the freshness of a busy small table while a large table is being
snapshotted, against the same without the snapshot; and the snapshot's rows/s against a plain
``COPY`` of the same table on the same machine.

Run from the repository root::

    .venv/bin/python -m bench.snapshot_bench                  # 2,000,000 rows (minutes)
    .venv/bin/python -m bench.snapshot_bench --rows 10000000  # the 10M-row measure
    .venv/bin/python -m bench.snapshot_bench --quick          # smoke run: 50,000 rows
    .venv/bin/python -m bench.snapshot_bench --snapshot-args="--chunk-rows 500000" --json out.json

One run starts a throwaway PostgreSQL cluster from ``--pgbin`` (stock settings, listening on
127.0.0.1, so the snapshot may read over JDBC; ``--socket`` for the unix socket) and one
database with three tables, all captured in json and mirrored by one pipeline file:

- ``busy`` (id, seq, v, pad), ``--busy-keys`` rows, written by a writer process at
  ``--busy-rate`` changes/s (one transaction every 50 ms, half updates, half inserts);
- ``big`` (id bigint key, seq, a text, b int, c numeric, d timestamptz, e bool), ``--rows``
  rows loaded before its capture (so only the snapshot brings them), then VACUUM ANALYZE;
- ``tiny``, the same columns, one row: its snapshot measures the command's fixed cost.

The real commands run, each in its own process with its own local Spark session: ``cdc drain
--follow`` for the whole run, and ``cdc snapshot``. In order:

1. **COPY**: ``COPY (select * from big) TO STDOUT`` read to the end by psycopg, ``--reps``
   times (the median counts), with the drain idle: rows/s.
2. ``cdc snapshot public.tiny``: the command's fixed cost (JVM, session, look-ups).
3. **Without the snapshot**: the writer on ``busy`` for ``--seconds``; freshness of every
   change (time from its commit to the first Delta version holding it, see bench/follow.py).
4. **During the snapshot**: the writer again, and ``cdc snapshot public.big``; freshness of the
   changes committed while the snapshot command ran. The snapshot's own seconds are the ones
   it prints (else its wall time minus the fixed cost of step 2); rows/s = rows / seconds.
5. ``cdc sql`` counts the rows of ``big`` in Delta: the run fails unless they are all there.

Shown: busy's p50/p99/max without and during the snapshot and the p99 ratio (goal: at most 2),
COPY and snapshot rows/s and their ratio (goal: at least 0.5).
"""

from __future__ import annotations

import argparse
import re
import statistics
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

BIG_DDL = (
    "create table {} (id bigint primary key, seq bigint not null, a text, b int,"
    " c numeric(12,2), d timestamptz, e bool)"
)
BIG_ROWS = (
    "select g, 0, 'row ' || g || ' ' || md5(g::text), (g %% 1000)::int, g * 1.25,"
    " timestamptz '2024-01-01 00:00+00' + g * interval '1 s', g %% 2 = 0"
    " from generate_series(1, %s::bigint) g"
)
# what `cdc snapshot` prints per table: "... in 12.3 s"
SNAPSHOT_SECONDS = re.compile(r"rows\b.* in ([0-9]+(?:\.[0-9]+)?) s\b")


def setup(dsn: str, rows: int, busy_keys: int) -> None:
    """busy (captured, rows after the capture), big and tiny (rows before their capture)."""
    from psycopg import sql

    from cdc.pg import capture
    from cdc.pg.capture import CaptureOptions

    follow.create_tables(dsn, ["busy"], busy_keys)
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name, count in (("big", rows), ("tiny", 1)):
            table = sql.Identifier(name)
            conn.execute(sql.SQL(BIG_DDL).format(table))
            conn.execute(sql.SQL("insert into {} ").format(table) + sql.SQL(BIG_ROWS), (count,))
            capture.attach(conn, f"public.{name}", CaptureOptions(queue=follow.QUEUE))
            conn.execute(sql.SQL("vacuum analyze {}").format(table))


def copy_rate(dsn: str, rows: int, reps: int) -> dict[str, Any]:
    """COPY (select * from big) TO STDOUT read to the end by psycopg: median seconds, rows/s."""
    samples = []
    size = 0
    with psycopg.connect(dsn, autocommit=True) as conn:
        for _ in range(reps):
            size = 0
            started = time.monotonic()
            with conn.cursor().copy("copy (select * from big) to stdout") as copy:
                for block in copy:
                    size += len(block)
            samples.append(time.monotonic() - started)
    seconds = statistics.median(samples)
    return {
        "seconds": seconds,
        "rows_per_s": rows / seconds,
        "mb": size / 2**20,
        "samples": samples,
    }


def snapshot(config: Path, table: str, extra: list[str], log: Path) -> dict[str, Any]:
    """``cdc snapshot`` of one table, to its end: wall seconds and the seconds it printed."""
    wall, out = follow.run_cdc(
        ["snapshot", table, "--config", str(config), "--no-progress", *extra], log
    )
    found = SNAPSHOT_SECONDS.search(out)
    return {"wall": wall, "printed": float(found.group(1)) if found else None, "output": out}


def freshness(
    dsn: str,
    args: argparse.Namespace,
    logs: list[follow.DeltaLog],
    drain: Any,
    out: Path,
    first_seq: int,
    during: Any = None,
) -> tuple[dict, dict, int]:
    """The writer on busy, for --seconds or while ``during()`` runs; the freshness of the
    changes committed meanwhile. Returns (summary, what ``during`` returned, the last seq)."""
    seconds = None if during is not None else args.seconds
    writer = follow.Writer(dsn, ["busy"], args.busy_keys, args.busy_rate, seconds, first_seq, out)
    result: dict = {}
    since, until = float("-inf"), float("inf")
    try:
        if during is not None:
            time.sleep(2)  # the writer at its pace before the snapshot starts
            since = time.time()
            result = during()
            until = time.time()
    finally:
        if during is not None:
            writer.stop()
    written = writer.result()
    follow.wait_for(
        "busy's changes to be visible in Delta",
        lambda: follow.all_visible(written["changes"], logs),
        args.timeout,
        [drain],
    )
    values, _ = follow.latencies(written["changes"], logs, since, until)
    found = {**follow.summary(values), "rate_written": written["rate"]}
    return found, result, written["last_seq"]


def run(args: argparse.Namespace, admin_dsn: str, work: Path) -> dict[str, Any]:
    dsn = follow.database(admin_dsn, "bench_snapshot")
    progress(f"snapshot: big = {args.rows:,} rows, busy = {args.busy_keys} rows")
    setup(dsn, args.rows, args.busy_keys)
    root = work / "delta"
    spark = {"spark.driver.memory": args.driver_memory}
    config = follow.write_pipeline(
        work / "pipeline.toml", dsn, root, ["busy", "big", "tiny"], spark
    )
    logs = [follow.DeltaLog(root / "busy")]
    out: dict[str, Any] = {"rows": args.rows, "busy_rate": args.busy_rate}
    drain = follow.CdcProcess(["drain", "--config", str(config), "--follow"], work / "drain.log")
    try:
        follow.wait_for(
            "the drain's first batch (busy's target)",
            lambda: all_refreshed(logs),
            args.timeout,
            [drain],
        )
        progress(f"COPY of big, {args.reps} time(s)")
        out["copy"] = copy_rate(dsn, args.rows, args.reps)
        progress(f"  {out['copy']['rows_per_s']:,.0f} rows/s")
        progress("snapshot of tiny (the command's fixed cost)")
        out["tiny"] = snapshot(config, "public.tiny", args.snapshot_args, work / "tiny.log")
        progress(f"freshness of busy without a snapshot, {args.seconds:.0f} s")
        out["without"], _, last = freshness(dsn, args, logs, drain, work / "w1.json", 1)
        progress(f"  {out['without']}")
        progress("freshness of busy during the snapshot of big")

        def snapshot_big() -> dict[str, Any]:
            return snapshot(config, "public.big", args.snapshot_args, work / "big.log")

        out["during"], big, _ = freshness(
            dsn, args, logs, drain, work / "w2.json", last + 1, snapshot_big
        )
        progress(f"  {out['during']}")
    finally:
        drain.stop()
    seconds = big["printed"] or max(big["wall"] - out["tiny"]["wall"], 1e-9)
    out["snapshot"] = {
        "wall": big["wall"],
        "printed": big["printed"],
        "seconds": seconds,
        "rows_per_s": args.rows / seconds,
        "output": big["output"].strip()[-500:],
    }
    out["copy_ratio"] = out["snapshot"]["rows_per_s"] / out["copy"]["rows_per_s"]
    p99 = out["without"]["p99"], out["during"]["p99"]
    out["p99_ratio"] = p99[1] / p99[0] if p99[0] and p99[1] is not None else None
    out["big_rows_in_delta"] = delta_rows(config, work / "count.log")
    if out["big_rows_in_delta"] != args.rows:
        raise BenchError(f"big has {out['big_rows_in_delta']} rows in Delta, not {args.rows}")
    return out


def all_refreshed(logs: list[follow.DeltaLog]) -> bool:
    for log in logs:
        log.refresh()
    return all(log.exists for log in logs)


def delta_rows(config: Path, log: Path) -> int:
    """The rows of big's target, counted by ``cdc sql``."""
    _, output = follow.run_cdc(
        ["sql", "select count(*) as n from big", "--config", str(config), "--format", "csv"], log
    )
    numbers = re.findall(r"^\s*(\d+)\s*$", output, re.MULTILINE)
    if not numbers:
        raise BenchError(f"no row count in the output of cdc sql:\n{output[-1000:]}")
    return int(numbers[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="bench.snapshot_bench", description=__doc__.split("\n")[0]
    )
    common_arguments(parser)
    parser.add_argument("--rows", type=int, default=2_000_000, help="rows of big (2,000,000)")
    parser.add_argument("--busy-rate", type=float, default=50, help="busy's changes/s (50)")
    parser.add_argument("--busy-keys", type=int, default=100, help="busy's rows before (100)")
    parser.add_argument("--seconds", type=float, default=60, help="baseline writing time (60)")
    parser.add_argument("--driver-memory", default="2g", help="each command's Spark driver (2g)")
    parser.add_argument("--snapshot-args", default="", help="more options for cdc snapshot")
    parser.add_argument("--timeout", type=float, default=3600, help="longest wait, seconds")
    parser.add_argument("--socket", action="store_true", help="the commands use the unix socket")
    parser.add_argument("--keep", type=Path, help="keep the work folder (logs, Delta) here")
    args = parser.parse_args(argv)
    check_args(parser, args)
    if args.quick:
        args.rows, args.busy_rate, args.seconds, args.reps = 50_000, 10, 15, 1
    if min(args.rows, args.busy_rate, args.seconds, args.busy_keys) <= 0:
        parser.error("--rows, --busy-rate, --seconds and --busy-keys must be positive")
    args.snapshot_args = args.snapshot_args.split()
    facts: dict[str, Any] = {
        "machine": machine_info(),
        "git": git_state(),
        "note": follow.free_cpu_note(),
    }
    try:
        with (
            follow.tcp_cluster(args.pgbin, {}, args.socket) as admin,
            follow.work_folder(args.keep, "bench-snapshot-") as work,
        ):
            with psycopg.connect(admin) as conn:
                facts["server"], facts["settings"] = server_info(conn)
            facts["snapshot"] = result = run(args, admin, work)
    except BenchError as exc:
        print(f"bench.snapshot_bench: {exc}", file=sys.stderr)
        return 2
    report(result)
    if args.json:
        write_json(args.json, facts)
    return 0


def report(r: dict[str, Any]) -> None:
    def line(name: str, f: dict) -> str:
        return (
            f"  busy {name}: p50 {f['p50']:.2f} s, p99 {f['p99']:.2f} s, max {f['max']:.2f} s"
            f" ({f['n']} changes at {f['rate_written']:.0f}/s)"
        )

    print(f"big: {r['rows']:,} rows; busy: {r['busy_rate']:.0f} changes/s")
    print(line("without a snapshot", r["without"]))
    print(line("during the snapshot", r["during"]))
    ratio = r["p99_ratio"]
    print(f"  p99 during / without: {ratio:.2f} (goal: at most 2)" if ratio else "  p99: n/a")
    s, c = r["snapshot"], r["copy"]
    print(
        f"  snapshot {s['rows_per_s']:,.0f} rows/s ({s['seconds']:.1f} s; wall {s['wall']:.1f} s)"
        f" vs COPY {c['rows_per_s']:,.0f} rows/s ({c['seconds']:.1f} s):"
        f" {r['copy_ratio']:.2f} (goal: at least 0.5)"
    )


if __name__ == "__main__":
    sys.exit(main())
