"""Drain benchmark: throughput, freshness and scale of the Spark drain into Delta.

Run from the repository root::

    .venv/bin/python -m bench.drain_bench                 # full size (about 15 minutes)
    .venv/bin/python -m bench.drain_bench --quick         # smoke run: small sizes
    .venv/bin/python -m bench.drain_bench --json out.json --plot docs/img/drain_bench.png

One run starts a throwaway PostgreSQL cluster from ``--pgbin`` (Debian's PostgreSQL 15, stock
settings), one local Spark session (``local[2]``) and writes Delta tables in a temporary
folder. Three measures:

1. **Throughput.** A backlog of ``--events`` events over three tables, json format: 25%
   inserts, 60% updates, 15% deletes (rows inserted, updated twice and partly a third time,
   then partly deleted), captured before the consumers drain anything. Two consumers drain
   it, each as batches of up to ``--max-events``: the first in the fresh Spark session
   (cold), the second after it (warm); shown: events/s from the first read to the last
   finish_batch, and seconds per phase: read (COPY into Arrow, split by table), decode (into
   the per-table cache), fold+merge (the fold runs inside the MERGE), quarantine,
   finish_batch.
2. **Freshness.** A ``--follow`` drain (in this process, its own thread) while a writer
   commits ``--rate`` events/s (one transaction every 0.1 s) for ``--freshness-seconds``. A
   poller reads the Delta table with delta-rs every 0.1 s; the latency of a row is the time
   it first appears minus the time its commit returned. Shown: p50, p99, max.
3. **Scale.** Delta targets of ``--scale-rows`` rows (written by Spark in key order: a file
   per million keys, each holding a range of them, as a drain's appends of new keys or
   ``cdc maintain``'s ordering leave a table), and
   one batch of ``--scale-batch`` updates of keys in a recent range: the apply time of that
   batch per target size, and the ratio largest/smallest (1 means the cost follows the batch,
   not the table).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
from psycopg.conninfo import make_conninfo

from bench.common import (
    BenchError,
    check_args,
    cluster,
    common_arguments,
    progress,
    publish,
    run_facts,
    server_info,
)
from cdc import config
from cdc.pg import capture, install, pgtypes
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Queue
from cdc.pipeline.drain import Drain
from cdc.targets import delta_table
from cdc.targets.table import TableRef

TABLE_DDL = (
    "create table {t} (id bigint primary key, a text, b int, c numeric(12,2), d timestamptz,"
    " e bool)"
)
ROW = (
    "g, 'row ' || g, (g % 1000)::int, g * 1.25, timestamptz '2024-01-01 00:00+00'"
    " + g * interval '1 s', g % 2 = 0"
)


def _database(admin_dsn: str, name: str) -> str:
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(f"drop database if exists {name}")
        conn.execute(f"create database {name}")
    dsn = make_conninfo(admin_dsn, dbname=name)
    install.install(dsn)
    return dsn


def below(root: Path | str, *parts: str) -> str:
    """A path below root, a folder or an object store's URL (joined as a URL: a Path would
    make s3a://b of it s3a:/b)."""
    return "/".join([str(root).rstrip("/"), *parts])


def _pipeline(
    dsn: str, root: Path | str, tables: list[str], max_events: int, consumer: str = "delta"
) -> config.Pipeline:
    return config.parse(
        {
            "source": {
                "dsn": dsn,
                "queue": "bench",
                "consumer": consumer,
                "max_events": max_events,
            },
            "target": {"path": str(root)},
            "tables": [{"source": f"public.{t}", "target": t} for t in tables],
        }
    )


def _setup(dsn: str, tables: list[str], consumers: tuple[str, ...] = ("delta",)) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        Queue(conn, "bench").create()
        for consumer in consumers:
            Consumer(conn, "bench", consumer).register()
        for t in tables:
            conn.execute(TABLE_DDL.format(t=t))
            # statement mode makes the backlog faster; the events are row mode's
            capture.attach(conn, f"public.{t}", CaptureOptions(queue="bench", mode="statement"))


PHASES = ("read", "decode", "fold+merge", "quarantine", "finish")


def _recorder(batches: list[dict[str, float]]) -> Any:
    """An on_batch callback that keeps each batch's events and seconds per phase."""

    def record(stats: Any) -> None:
        batches.append({"events": stats.events, **stats.seconds, **stats.phases})

    return record


def backlog(dsn: str, tables: list[str], events: int, first: int = 0) -> int:
    """About ``events`` events over the tables: 25% inserts, 60% updates, 15% deletes (rows
    inserted, updated twice and partly a third time, then partly deleted), of keys after
    ``first`` (a second backlog leaves the first one's rows alone); returns the queue's
    events of the tables."""
    rows = events // 4 // len(tables)  # 25% inserts
    new = f"id > {first}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        for t in tables:
            conn.execute(
                f"insert into {t} select {ROW} from generate_series({first + 1}, {first + rows}) g"
            )
            conn.execute(f"update {t} set b = b + 1 where {new}")  # 25%
            conn.execute(f"update {t} set a = a || 'x', c = c + 1 where {new}")  # 25%
            conn.execute(f"update {t} set e = not e where id % 5 < 2 and {new}")  # 10%
            conn.execute(f"delete from {t} where id % 5 < 3 and {new}")  # 15%
        return int(
            conn.execute(
                "select count(*) from cdc.event where ev_extra1 = any(%s)",
                ([f"public.{t}" for t in tables],),
            ).fetchone()[0]
        )


def throughput(
    admin_dsn: str, spark: Any, root: Path | str, events: int, max_events: int, db: str = ""
) -> dict:
    """The backlog drained twice, by two consumers of the same queue: first in a fresh Spark
    session (what a scheduled spark-submit sees: the JVM compiles as it goes), then warm.
    root: a folder or an object store's URL; db: a suffix of the database's name."""
    dsn = _database(admin_dsn, "bench_throughput" + db)
    tables = ["t1", "t2", "t3"]
    _setup(dsn, tables, ("cold", "warm"))
    progress(f"throughput: backlog of {events:,} events")
    out: dict[str, Any] = {"events": backlog(dsn, tables, events)}
    total = out["events"]
    for consumer in ("cold", "warm"):
        pipeline = _pipeline(dsn, below(root, "throughput", consumer), tables, max_events, consumer)
        batches: list[dict] = []
        with Drain(pipeline, spark) as drain:
            started = time.monotonic()
            drain.run(on_batch=_recorder(batches))
            elapsed = time.monotonic() - started
        applied = sum(b["events"] for b in batches)
        if applied != total:
            raise BenchError(f"{consumer}: drained {applied} events of {total}")
        out[consumer] = {
            "batches": len(batches),
            "seconds": elapsed,
            "events_per_s": total / elapsed,
            "phases": {p: sum(b.get(p, 0.0) for b in batches) for p in PHASES},
        }
        progress(f"throughput, {consumer}: {out[consumer]}")
    return out


def freshness(
    admin_dsn: str, spark: Any, root: Path | str, rate: int, seconds: float, db: str = ""
) -> dict:
    """Row latencies of a follow drain while a writer commits rate events/s (root: a folder
    or an object store's URL, read by delta-rs with the session's S3A settings)."""
    from deltalake import DeltaTable, QueryBuilder

    from cdc.targets.delta import object_store

    dsn = _database(admin_dsn, "bench_freshness" + db)
    _setup(dsn, ["f"])
    path = below(root, "freshness", "f")
    options = object_store.storage_options(path)
    drain = Drain(_pipeline(dsn, below(root, "freshness"), ["f"], 1_000_000), spark)
    committed: dict[int, float] = {}
    seen: dict[int, float] = {}
    stop = threading.Event()
    per_tx = max(1, rate // 10)

    def write() -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            next_id = 1
            deadline = time.monotonic() + seconds
            tick = time.monotonic()
            while time.monotonic() < deadline:
                conn.execute(
                    f"insert into f select {ROW.replace('%', '%%')}"
                    " from generate_series(%s::bigint, %s::bigint) g",
                    (next_id, next_id + per_tx - 1),
                )
                now = time.monotonic()
                for i in range(next_id, next_id + per_tx):
                    committed[i] = now
                next_id += per_tx
                tick += 0.1
                time.sleep(max(0.0, tick - time.monotonic()))

    def poll() -> None:
        table = None
        while not stop.is_set():
            try:
                if table is None:
                    table = DeltaTable(path, storage_options=options)
                else:
                    table.update_incremental()
                result = QueryBuilder().register("f", table).execute("select max(id) from f")
                top = pa.table(result.read_all()).to_pylist()[0]
                high = next(iter(top.values())) or 0
                now = time.monotonic()
                for i in range(len(seen) + 1, high + 1):
                    seen.setdefault(i, now)
            except Exception:
                table = None
            time.sleep(0.1)

    batches: list[dict[str, float]] = []
    follower = threading.Thread(target=lambda: drain.run("follow", on_batch=_recorder(batches)))
    poller = threading.Thread(target=poll)
    follower.start()
    time.sleep(8)  # the first batch creates the table; the measure starts after it
    poller.start()
    progress(f"freshness: {rate} events/s for {seconds:.0f} s")
    write()
    time.sleep(10)
    drain.stopping.set()
    stop.set()
    follower.join(120)
    poller.join(10)
    drain.close()
    latencies = sorted(seen[i] - committed[i] for i in committed if i in seen)
    if len(latencies) < len(committed):
        raise BenchError(f"only {len(latencies)} of {len(committed)} rows became visible")
    q = statistics.quantiles(latencies, n=100)
    return {
        "rate": rate,
        "seconds": seconds,
        "rows": len(latencies),
        "p50": q[49],
        "p99": q[98],
        "max": latencies[-1],
        "batches": len(batches),
        "batch_phases": {
            p: round(statistics.median(b.get(p, 0.0) for b in batches), 3)
            for p in ("events", *PHASES, "f")
        },
    }


def scale(admin_dsn: str, spark: Any, root: Path, sizes: list[int], batch: int) -> dict:
    out: dict[str, float] = {}
    for size in sizes:
        name = f"s{size}"
        dsn = _database(admin_dsn, f"bench_scale_{size}")
        _setup(dsn, [name])
        target = root / "scale" / name
        with psycopg.connect(dsn, autocommit=True) as conn:
            columns = pgtypes.columns(conn, "public", name)
        progress(f"scale: a {size:,}-row Delta target")
        schema = [(c.name, c.spark_type) for c in columns]
        delta_table.ensure(spark, TableRef(str(target)), schema, ["id"])
        spark.range(1, size + 1).selectExpr(
            "id",
            "concat('row ', id) as a",
            "cast(id % 1000 as int) as b",
            "cast(id * 1.25 as decimal(12,2)) as c",
            "timestamp'2024-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id) as d",
            "id % 2 = 0 as e",
        ).repartitionByRange(max(1, size // 1_000_000), "id").sortWithinPartitions(
            "id"
        ).write.format("delta").mode("append").save(str(target))
        low = size - batch + 1
        with psycopg.connect(dsn, autocommit=True) as conn:
            # the source holds the recent rows; inserting them is a first, unmeasured batch
            conn.execute(f"insert into {name} select {ROW} from generate_series({low}, {size}) g")
        with Drain(_pipeline(dsn, root / "scale", [name], 10_000_000), spark) as drain:
            drain.run()
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(f"update {name} set b = b + 1, a = a || 'u'")
            stats: list[Any] = []
            drain.run(on_batch=stats.append)
        out[str(size)] = sum(s.seconds.get(name, 0.0) for s in stats)
    keys = list(out)
    out["ratio"] = out[keys[-1]] / out[keys[0]]
    return out


def plot(facts: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [m for m in MEASURES if m in facts]
    fig, axes = plt.subplots(1, len(shown), figsize=(4.4 * len(shown), 4), squeeze=False)
    for ax, measure in zip(axes[0], shown, strict=True):
        if measure == "throughput":
            thr = facts["throughput"]
            width = 0.4
            for n, (run, color) in enumerate((("cold", "#8DA0CB"), ("warm", "#4C72B0"))):
                xs = [i + (n - 0.5) * width for i in range(len(PHASES))]
                label = f"{run}: {thr[run]['events_per_s']:,.0f} events/s"
                ax.bar(xs, [thr[run]["phases"][p] for p in PHASES], width, color=color, label=label)
            ax.set_xticks(range(len(PHASES)), PHASES, rotation=30)
            ax.legend()
            ax.set_title(f"{thr['events']:,} events, seconds per phase")
        elif measure == "freshness":
            fr = facts["freshness"]
            ax.bar(["p50", "p99", "max"], [fr["p50"], fr["p99"], fr["max"]], color="#55A868")
            ax.set_title(f"commit to visible, {fr['rate']} events/s")
        else:
            sc = {k: v for k, v in facts["scale"].items() if k != "ratio"}
            ax.bar([f"{int(k):,} rows" for k in sc], list(sc.values()), color="#C44E52")
            ax.set_title(
                f"{facts['args']['scale_batch']:,}-event batch: ratio {facts['scale']['ratio']:.2f}"
            )
        ax.set_ylabel("seconds")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def report(facts: dict[str, Any]) -> None:
    print(f"\nSpark session start: {facts['spark_start_s']:.1f} s")
    if "throughput" in facts:
        thr = facts["throughput"]
        for run in ("cold", "warm"):
            r = thr[run]
            print(
                f"throughput ({run}): {thr['events']:,} events in {r['batches']} batch(es), "
                f"{r['seconds']:.1f} s = {r['events_per_s']:,.0f} events/s"
            )
            for phase, secs in r["phases"].items():
                print(f"  {phase:12s} {secs:7.2f} s")
    if "freshness" in facts:
        fr = facts["freshness"]
        print(
            f"freshness at {fr['rate']} events/s for {fr['seconds']:.0f} s ({fr['rows']:,} rows):"
            f" p50 {fr['p50']:.2f} s, p99 {fr['p99']:.2f} s, max {fr['max']:.2f} s"
        )
        print(f"  seconds per batch, median: {fr['batch_phases']}")
    if "scale" in facts:
        sc = facts["scale"]
        batch = facts["args"]["scale_batch"]
        for size in (k for k in sc if k != "ratio"):
            print(f"scale: {batch:,}-event batch into {int(size):,} rows: {sc[size]:.2f} s")
        print(f"scale ratio (largest / smallest target): {sc['ratio']:.2f}")


MEASURES = ("throughput", "freshness", "scale")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_arguments(parser, reps=False)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--max-events", type=int, default=2_000_000)
    parser.add_argument("--rate", type=int, default=500)
    parser.add_argument("--freshness-seconds", type=float, default=120.0)
    parser.add_argument("--scale-rows", default="1000000,10000000")
    parser.add_argument("--scale-batch", type=int, default=10_000)
    parser.add_argument(
        "--measures",
        default=",".join(MEASURES),
        help="which measures to take, comma-separated (default: all three)",
    )
    args = parser.parse_args(argv)
    check_args(parser, args)
    measures = args.measures.split(",")
    if not set(measures) <= set(MEASURES):
        parser.error(f"--measures: choose among {', '.join(MEASURES)}")
    if args.quick:
        args.events, args.freshness_seconds = 20_000, 15.0
        args.scale_rows, args.scale_batch = "100000,1000000", 1_000
    sizes = [int(s) for s in args.scale_rows.split(",")]
    from cdc import spark as spark_module

    facts: dict[str, Any] = run_facts(args)
    try:
        with cluster(args.pgbin, {}) as admin, tempfile.TemporaryDirectory() as tmp:
            with psycopg.connect(admin) as conn:
                facts["server"] = server_info(conn)
            started = time.monotonic()
            spark = spark_module.session("cdc-bench")
            facts["spark_start_s"] = time.monotonic() - started
            root = Path(tmp)
            if "throughput" in measures:
                facts["throughput"] = throughput(admin, spark, root, args.events, args.max_events)
            if "freshness" in measures:
                facts["freshness"] = freshness(
                    admin, spark, root, args.rate, args.freshness_seconds
                )
                progress(f"freshness: {facts['freshness']}")
            if "scale" in measures:
                facts["scale"] = scale(admin, spark, root, sizes, args.scale_batch)
    except BenchError as exc:
        print(f"drain_bench: {exc}", file=sys.stderr)
        return 1
    return publish(facts, args, report, plot)


if __name__ == "__main__":
    sys.exit(main())
