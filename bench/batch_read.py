"""Reading a batch: COPY into the driver against JDBC on the executors, by batch size, on a
local master and on a cluster; the crossover size of the read alone (the default
``jdbc_min_events``, cdc.pipeline.reader, weighs the whole drain: docs/benchmarks.md).

Run from the repository root::

    .venv/bin/python -m bench.batch_read --json out.json --plot docs/img/batch_read.png
    .venv/bin/python -m bench.batch_read --quick           # smoke run: 20,000 and 60,000 events

One run starts a throwaway PostgreSQL cluster listening on 127.0.0.1 (JDBC needs TCP) and,
per batch size (``--sizes``, default 100,000, 300,000 and 1,000,000 events), a database
holding one batch of about that many events: bench.drain_bench's backlog (json, three
tables: 25% inserts, 60% updates, 15% deletes), ticked once. The batch is never finished, so
every read reads the same events.

Then, in a process of its own per master (its own Spark session): a local master (local[2])
and a Spark standalone master with one worker of 2 cores on this machine
(tests.support.standalone, with bench.drain_vs_textbook's executor settings), each batch is
read by the product's reader (cdc.pipeline.reader.BatchReader) by both routes, the route
forced by ``source.jdbc_min_events`` (1: JDBC; a huge value: COPY) and the memory budget
large enough that nothing is spilled:

- copy: COPY into Arrow on the driver, split by table in Arrow, then each table's frame made
  (``createDataFrame``) and counted, which ships its rows to the executors;
- jdbc: Spark's JDBC source in ``source.jdbc_partitions`` (8) ev_id slices read by the
  executors, cached, split by table in Spark, then each table's frame counted.

Measured: the seconds from the read's start to the last count, i.e. until the batch's events
are in Spark, ready for the per-table work; the median of ``--reps`` reads, after one
unmeasured read per route (the JVM's compiling, the executors' start). Shown: seconds, seconds
per million events, and on each master the crossover, where the straight lines fitted to
(events, seconds) of the two routes cross: from that size on JDBC is the faster. Every read
must find the batch's events, by table, as PostgreSQL counts them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from bench import drain_bench, follow
from bench.common import BenchError, check_args, common_arguments, progress, publish, run_facts
from cdc.pg.queue import Consumer

SIZES = (100_000, 300_000, 1_000_000)
QUICK_SIZES = (20_000, 60_000)
TABLES = ["t1", "t2", "t3"]
QUEUE = "bench"  # bench.drain_bench's queue
CONSUMER = "reader"
MASTERS = ("local", "cluster")
# the route forced through the reader's own rule (cdc.pipeline.reader.jdbc_threshold)
ROUTES = {"copy": 1 << 62, "jdbc": 1}
NO_SPILL = 1 << 40  # a memory budget that keeps any of these batches on the driver


def batches(admin: str, sizes: list[int]) -> dict[int, dict[str, Any]]:
    """Per size, a database holding one open batch of about that many events: its DSN and
    its events per table."""
    made = {}
    for size in sizes:
        dsn = drain_bench._database(admin, f"bench_read_{size}")
        drain_bench._setup(dsn, TABLES, (CONSUMER,))
        progress(f"backlog of {size:,} events")
        drain_bench.backlog(dsn, TABLES, size)
        with psycopg.connect(dsn, autocommit=True) as conn:
            Consumer(conn, QUEUE, CONSUMER).tick()
            rows = conn.execute(
                "select ev_extra1, count(*) from cdc.event where ev_extra1 = any(%s) group by 1",
                ([f"public.{t}" for t in TABLES],),
            ).fetchall()
        made[size] = {"dsn": dsn, "per_table": {name: int(n) for name, n in rows}}
    return made


def read_once(spark: Any, dsn: str, route: str, expected: dict[str, int]) -> float:
    """One read of the open batch by the route: seconds until every table's frame is
    counted (the counts checked against ``expected``)."""
    from cdc.config import DrainSettings, Source
    from cdc.pg.source import TableNames
    from cdc.pipeline.reader import BatchReader

    source = Source(dsn, QUEUE, CONSUMER, jdbc_min_events=ROUTES[route])
    names = TableNames({name: name for name in expected}, {})
    with psycopg.connect(dsn, autocommit=True) as conn:
        batch = Consumer(conn, QUEUE, CONSUMER).next_batch()
        if batch is None:
            raise BenchError(f"no open batch in {dsn}")
        started = time.monotonic()
        events = BatchReader(spark, source, DrainSettings(memory_budget=NO_SPILL)).read(
            batch, names
        )
        try:
            counts = {name: events.tables[name].count() for name in events.tables}
            seconds = time.monotonic() - started
        finally:
            events.release()
    if events.route != route or counts != expected:
        raise BenchError(f"{route}: read by {events.route}, {counts} events, not {expected}")
    return seconds


def worker(args: argparse.Namespace) -> dict[str, Any]:
    """Every batch read by both routes in this process's Spark session (on the master --conf
    names): per size and route, the seconds of each read."""
    from cdc import spark as cdc_spark

    spark = cdc_spark.session(f"bench-read-{args.worker}", json.loads(args.conf))
    made = json.loads(args.batches)
    smallest = made[min(made, key=int)]
    for route in ROUTES:  # the JVM's compiling, the executors' start: not measured
        read_once(spark, smallest["dsn"], route, smallest["per_table"])
    out: dict[str, Any] = {}
    for size, found in sorted(made.items(), key=lambda item: int(item[0])):
        for route in ROUTES:
            seconds = [
                read_once(spark, found["dsn"], route, found["per_table"]) for _ in range(args.reps)
            ]
            out.setdefault(size, {})[route] = seconds
            progress(f"  {args.worker}, {int(size):,} events, {route}: {seconds}")
    return out


def _in_process(what: str, *args: str) -> Any:
    """This module run in a process of its own (its own Spark session): the JSON its last
    line prints."""
    command = [sys.executable, "-m", "bench.batch_read", *args]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise BenchError(f"{what} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def line(points: list[tuple[int, float]]) -> tuple[float, float]:
    """The least-squares line through (events, seconds): (seconds at 0, seconds per event)."""
    xs, ys = [x for x, _ in points], [y for _, y in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    spread = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in points) / spread if spread else 0.0
    return my - slope * mx, slope


def crossover(copy: tuple[float, float], jdbc: tuple[float, float]) -> float | None:
    """The batch size from which JDBC is the faster (the lines' crossing); 0 when it is
    faster at any size, None when never."""
    (a_copy, b_copy), (a_jdbc, b_jdbc) = copy, jdbc
    if b_copy <= b_jdbc:
        return 0.0 if a_jdbc < a_copy else None
    return max(0.0, (a_jdbc - a_copy) / (b_copy - b_jdbc))


def summary(measured: dict[str, Any], made: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Per size and route: events, median seconds, seconds per million events; per route
    the fitted line, and the crossover."""
    rows: dict[str, Any] = {}
    points: dict[str, list[tuple[int, float]]] = {route: [] for route in ROUTES}
    for size, routes in sorted(measured.items(), key=lambda item: int(item[0])):
        events = sum(made[int(size)]["per_table"].values())
        rows[size] = {"events": events}
        for route, seconds in routes.items():
            median = statistics.median(seconds)
            rows[size][route] = {
                "seconds": median,
                "s_per_million": median / events * 1e6,
                "runs": seconds,
            }
            points[route].append((events, median))
    lines = {route: line(found) for route, found in points.items()}
    return {
        "sizes": rows,
        "lines": {
            route: {"fixed_s": a, "s_per_million": b * 1e6} for route, (a, b) in lines.items()
        },
        "crossover_events": crossover(lines["copy"], lines["jdbc"]),
    }


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from bench.drain_vs_textbook import cluster_conf

    facts: dict[str, Any] = {}
    with follow.tcp_cluster(args.pgbin, {}) as admin:
        made = batches(admin, args.sizes)
        facts["batches"] = {size: found["per_table"] for size, found in made.items()}
        for master in args.masters:
            with contextlib.ExitStack() as stack:
                conf: dict[str, str] = {}
                if master == "cluster":
                    from tests.support import standalone

                    folder = work / "standalone"
                    folder.mkdir()
                    running = stack.enter_context(
                        standalone.standalone(folder, cores=2, memory="5g")
                    )
                    conf = cluster_conf(running.url)
                progress(f"{master}: every batch read by both routes, {args.reps} time(s) each")
                measured = _in_process(
                    f"the {master} reads", "--worker", master, "--batches", json.dumps(made),
                    "--conf", json.dumps(conf), "--reps", str(args.reps),
                )  # fmt: skip
            facts[master] = summary(measured, made)
            facts[master]["load_after"] = os.getloadavg()  # 1, 5, 15 minutes
            facts[master]["master"] = "standalone, 1 worker of 2 cores" if conf else "local[2]"
    return facts


def report(facts: dict[str, Any]) -> None:
    for master in MASTERS:
        if master not in facts:
            continue
        found = facts[master]
        print(f"{master} ({found['master']}): seconds (s per million events), median")
        print(f"  {'events':>10}  {'copy':>16}  {'jdbc':>16}  jdbc / copy")
        for row in found["sizes"].values():
            c, j = row["copy"], row["jdbc"]
            print(
                f"  {row['events']:>10,}  {c['seconds']:>6.2f} ({c['s_per_million']:>6.2f})"
                f"  {j['seconds']:>6.2f} ({j['s_per_million']:>6.2f})"
                f"  {j['seconds'] / c['seconds']:>11.2f}"
            )
        for route, fitted in found["lines"].items():
            print(
                f"  {route}: {fitted['fixed_s']:.2f} s + {fitted['s_per_million']:.2f} s"
                " per million events"
            )
        cross = found["crossover_events"]
        where = "never" if cross is None else f"from about {cross:,.0f} events"
        print(f"  JDBC faster: {where}; load average after: {found['load_after'][1]:.1f}")


def plot(facts: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    masters = [m for m in MASTERS if m in facts]
    fig, axes = plt.subplots(1, len(masters), figsize=(5 * len(masters), 4), squeeze=False)
    for ax, master in zip(axes[0], masters, strict=True):
        rows = list(facts[master]["sizes"].values())
        for route, color in (("copy", "#4C72B0"), ("jdbc", "#DD8452")):
            ax.plot(
                [r["events"] for r in rows], [r[route]["seconds"] for r in rows],
                "o-", color=color, label=route,
            )  # fmt: skip
        ax.set_xlabel("events in the batch")
        ax.set_ylabel("seconds to the events in Spark")
        ax.set_title(f"{master} ({facts[master]['master']})")
        ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common_arguments(parser)
    parser.add_argument(
        "--sizes", type=lambda text: [int(x) for x in text.split(",")],
        default=list(SIZES), help="batch sizes in events, comma-separated",
    )  # fmt: skip
    parser.add_argument(
        "--masters", type=lambda text: text.split(","), default=list(MASTERS),
        help="local, cluster or both (default)",
    )  # fmt: skip
    parser.add_argument("--worker", choices=MASTERS, help=argparse.SUPPRESS)
    parser.add_argument("--batches", help=argparse.SUPPRESS)
    parser.add_argument("--conf", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args)))
        return 0
    check_args(parser, args)
    if set(args.masters) - set(MASTERS):
        parser.error(f"--masters takes {', '.join(MASTERS)}")
    if args.quick:
        args.sizes, args.reps = list(QUICK_SIZES), 1
    facts = run_facts(args)
    with tempfile.TemporaryDirectory(prefix="cdc-batch-read-") as tmp:
        try:
            facts.update(run(args, Path(tmp)))
        except BenchError as exc:
            print(f"batch_read: {exc}", file=sys.stderr)
            return 1
    return publish(facts, args, report, plot)


if __name__ == "__main__":
    sys.exit(main())
