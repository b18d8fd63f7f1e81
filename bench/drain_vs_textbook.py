"""Ours against the textbook Spark drain (bench/textbook_drain.py), side by side on the same
queue contents: throughput cold and warm, the ratio ours / textbook, and freshness.

Run from the repository root::

    .venv/bin/python -m bench.drain_vs_textbook --json out.json   # 1,000,000 events, 2 rounds
    .venv/bin/python -m bench.drain_vs_textbook --quick           # smoke run: 30,000 events
    .venv/bin/python -m bench.drain_vs_textbook --cluster --events 360000 --freshness-seconds 0
    .venv/bin/python -m bench.drain_vs_textbook --cluster --workload big --freshness-seconds 0

One run starts a throwaway PostgreSQL cluster from ``--pgbin`` listening on 127.0.0.1 (the
textbook drain reads with JDBC), one database with three tables captured in json into one
queue, and a backlog of ``--events`` events made before anything drains (as in
bench/drain_bench.py: 25% inserts, 60% updates, 15% deletes). Every drain has its own
consumer of that queue, registered before the backlog, so each drains exactly the same
events. The queue is ticked once after the backlog: every system takes the same batches.

Each round runs each system in a fresh process (its own local Spark session, the same
settings for both): a first consumer drains the backlog with the JVM cold, then a second one
in the same session, warm. Rounds alternate the order of the systems; the medians over the
rounds count. Last, one process reads every target with Spark and the run fails unless each
table is the same in every drain (ours and the textbook's, every round).

Workloads: ``three`` (the default) is the backlog above over three empty tables; ``big`` is
``--events`` events on one table already holding ``--rows`` rows (25% inserts of new keys,
60% updates and 15% deletes of rows spread over the table): a first drain of our own
replicates the rows once, and every drain starts from a copy of that target.

``--cluster`` runs every drain on a Spark standalone master with one worker on this machine
(tests.support.standalone), with the same executor settings for both systems; ours then
takes the Spark engine for a table's part above the planner's small-part size
(cdc.engines.planner). The report says which engines decoded and wrote each part.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import psycopg

from bench import drain_bench, follow, freshness, textbook_drain
from bench.common import (
    BenchError,
    check_args,
    common_arguments,
    git_state,
    machine_info,
    progress,
    publish,
)
from cdc.pg.queue import Consumer
from cdc.pipeline.apply import WORKERS

SYSTEMS = ("ours", "textbook")
WORKLOADS = {"three": ("t1", "t2", "t3"), "big": ("t1",)}  # the tables of each workload
SEED = "seed"  # the consumer whose drain replicates the big workload's rows once
# the tables' columns as both drains type them (bench.drain_bench.TABLE_DDL), the key first
COLUMNS = [
    ("id", "bigint"),
    ("a", "string"),
    ("b", "int"),
    ("c", "decimal(12,2)"),
    ("d", "timestamp"),
    ("e", "boolean"),
]


def _consumer(system: str, round_: int, temper: str) -> str:
    return f"{system}_{round_}_{temper}"


def backlog(dsn: str, events: int, consumers: list[str]) -> int:
    """The tables, the consumers and the backlog (bench.drain_bench's), ticked once; returns
    its events."""
    tables = list(WORKLOADS["three"])
    drain_bench._setup(dsn, tables, tuple(consumers))
    total = drain_bench.backlog(dsn, tables, events)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("select cdc.ticker('bench')")
    return total


def big_table(dsn: str, rows: int) -> None:
    """The big workload's table with ``rows`` rows, captured for the seed consumer alone."""
    drain_bench._setup(dsn, ["t1"], (SEED,))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            f"insert into t1 select {drain_bench.ROW} from generate_series(1, {int(rows)}) g"
        )
        conn.execute("select cdc.ticker('bench')")


def big_backlog(dsn: str, rows: int, events: int, consumers: list[str]) -> int:
    """The consumers, then ``events`` events on the big table (``events`` <= ``rows``),
    ticked once; returns its events."""
    inserts, touched = events // 4, min(events, rows)
    count = "select count(*) from cdc.event where ev_extra1 = 'public.t1'"
    with psycopg.connect(dsn, autocommit=True) as conn:
        for consumer in consumers:
            Consumer(conn, "bench", consumer).register()
        before = int(conn.execute(count).fetchone()[0])
        conn.execute(
            f"insert into t1 select {drain_bench.ROW}"
            f" from generate_series({rows + 1}, {rows + inserts}) g"
        )
        conn.execute(f"update t1 set b = b + 1 where id % 10 < 6 and id <= {touched}")
        conn.execute(f"delete from t1 where id % 10 >= 8 and id <= {touched * 3 // 4}")
        conn.execute("select cdc.ticker('bench')")
        return int(conn.execute(count).fetchone()[0]) - before


def worker(args: argparse.Namespace) -> dict[str, Any]:
    """One system's drains, cold then warm, in this process's fresh Spark session (on the
    master --conf names); a drain of ours also tells the route of each table's part."""
    from cdc import spark as cdc_spark

    session = cdc_spark.session(f"bench-{args.system}", json.loads(args.conf))
    tables = args.tables.split(",")
    out = {}
    for consumer in args.consumers.split(","):
        root = Path(args.root) / consumer
        if args.system == "ours":
            from cdc.pipeline.drain import Drain

            pipeline = drain_bench._pipeline(args.dsn, root, tables, args.max_events, consumer)
            if args.memory_budget is not None:  # else the default (cdc.config.DrainSettings)
                drain = replace(pipeline.drain, memory_budget=args.memory_budget)
                pipeline = replace(pipeline, drain=drain)
            if args.jdbc_min_events is not None:  # else the default by master (cdc.pipeline.reader)
                source = replace(pipeline.source, jdbc_min_events=args.jdbc_min_events)
                pipeline = replace(pipeline, source=source)
            batches: list[dict] = []
            routes: dict[str, int] = {}
            reads: dict[str, int] = {}  # how each batch was read, and why: its events

            def record(
                stats: Any,
                batches: list[dict] = batches,
                routes: dict = routes,
                reads: dict = reads,
            ) -> None:
                batches.append({"events": stats.events, **stats.seconds, **stats.phases})
                reads[f"{stats.read}: {stats.read_rule}"] = stats.events
                for route in stats.routes.values():
                    routes[route] = routes.get(route, 0) + 1

            with Drain(pipeline, session, workers=args.workers) as drain:
                started = time.monotonic()
                drain.run(on_batch=record)
                seconds = time.monotonic() - started
            out[consumer] = {
                "events": sum(b["events"] for b in batches),
                "batches": len(batches),
                "seconds": seconds,
                "phases": {p: sum(b.get(p, 0.0) for b in batches) for p in drain_bench.PHASES},
                "routes": routes,
                "reads": reads,
            }
        else:
            from cdc.pg import jdbc

            found = jdbc.jdbc_url(args.dsn)
            if found is None:
                raise BenchError("the textbook drain reads with JDBC: a TCP DSN is needed")
            targets = {f"public.{t}": (str(root / t), COLUMNS) for t in tables}
            feed = textbook_drain.Feed(args.dsn, found, "bench", consumer, targets)
            out[consumer] = textbook_drain.drain(session, feed)
    return out


def _in_process(what: str, *args: str) -> Any:
    """This module run in a process of its own (its own Spark session) with these options:
    the JSON its last line prints."""
    command = [sys.executable, "-m", "bench.drain_vs_textbook", *args]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise BenchError(f"{what} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def compare(root: Path, consumers: list[str], tables: list[str]) -> dict[str, int]:
    """Every table's rows in every drain's targets must be the same: rows per table."""
    from pyspark.sql import functions as F

    from cdc import spark as cdc_spark

    session = cdc_spark.session("bench-compare")
    names = [c for c, _ in COLUMNS]
    counts = {}
    for t in tables:
        frames = {
            c: session.read.format("delta")
            .load(str(root / c / t))
            .select(*[F.col(n) for n in names])
            .cache()
            for c in consumers
        }
        first = consumers[0]
        counts[t] = frames[first].count()
        for other in consumers[1:]:
            a, b = frames[first], frames[other]
            if a.count() != b.count() or a.exceptAll(b).count() or b.exceptAll(a).count():
                raise BenchError(f"{t}: the targets of {first} and {other} differ")
    return counts


def cluster_conf(url: str) -> dict[str, str]:
    """The Spark settings of both systems' sessions on the standalone cluster: the worker's
    two cores and most of its memory for one executor."""
    return {
        "spark.master": url,
        "spark.cores.max": "2",
        "spark.executor.cores": "2",
        "spark.executor.memory": "4g",
    }


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    consumers = [
        _consumer(s, r, temper)
        for r in range(1, args.rounds + 1)
        for s in SYSTEMS
        for temper in ("cold", "warm")
    ]
    tables = list(WORKLOADS[args.workload])
    with contextlib.ExitStack() as stack:
        admin = stack.enter_context(follow.tcp_cluster(args.pgbin, {}))
        conf: dict[str, str] = {}
        if args.cluster:
            from tests.support import standalone

            folder = work / "standalone"
            folder.mkdir()
            running = stack.enter_context(standalone.standalone(folder, cores=2, memory="5g"))
            conf = cluster_conf(running.url)
            progress(f"standalone cluster at {running.url}: one worker, 2 cores")
        if args.event_log:  # each session's Spark jobs, for bench.spark_jobs
            args.event_log.mkdir(parents=True, exist_ok=True)
            conf.update(
                {
                    "spark.eventLog.enabled": "true",
                    "spark.eventLog.dir": str(args.event_log),
                    "spark.eventLog.compress": "false",
                }
            )
        dsn = follow.database(admin, "bench_textbook")

        def drains(system: str, names: list[str], what: str) -> dict[str, Any]:
            return _in_process(
                what, "--worker", system, "--dsn", dsn, "--root", str(work),
                "--consumers", ",".join(names), "--max-events", str(args.max_events),
                "--tables", ",".join(tables), "--conf", json.dumps(conf),
                *(["--jdbc-min-events", str(args.jdbc_min_events)] if args.jdbc_min_events else []),
                *(["--memory-budget", str(args.memory_budget)] if args.memory_budget else []),
                "--workers", str(args.workers),
            )  # fmt: skip

        if args.workload == "big":
            progress(f"a table of {args.rows:,} rows, replicated once")
            big_table(dsn, args.rows)
            drains("ours", [SEED], "the seed drain")
            progress(f"backlog of {args.events:,} events on it, {len(consumers)} consumers")
            total = big_backlog(dsn, args.rows, args.events, consumers)
            for consumer in consumers:  # every drain starts from the same rows
                shutil.copytree(work / SEED / "t1", work / consumer / "t1")
        else:
            progress(f"backlog of {args.events:,} events, {len(consumers)} consumers")
            total = backlog(dsn, args.events, consumers)
        out: dict[str, Any] = {"events": total, "rounds": [], "workload": args.workload}
        out.update(tables=tables, rows=args.rows if args.workload == "big" else 0)
        out["master"] = "standalone, one worker of 2 cores" if args.cluster else "local[2]"
        for r in range(1, args.rounds + 1):
            order = SYSTEMS if r % 2 else tuple(reversed(SYSTEMS))
            this: dict[str, Any] = {}
            for system in order:
                names = [_consumer(system, r, "cold"), _consumer(system, r, "warm")]
                progress(f"round {r}: {system}")
                got = drains(system, names, f"the {system} drain")
                for name, facts in got.items():
                    if facts["events"] != total:
                        raise BenchError(f"{name}: drained {facts['events']} events of {total}")
                this[system] = {
                    "cold": got[names[0]],
                    "warm": got[names[1]],
                }
                progress(
                    f"  cold {total / got[names[0]]['seconds']:,.0f} ev/s,"
                    f" warm {total / got[names[1]]['seconds']:,.0f} ev/s"
                )
                for name in names:
                    if "routes" in got[name]:
                        progress(f"  {name}: {got[name]['routes']}, {got[name]['reads']}")
                        progress(f"    {got[name]['phases']}")
            out["rounds"].append(this)
        if args.freshness_seconds > 0:
            out["freshness"] = {s: fresh(args, admin, work, s) for s in SYSTEMS}
    progress("comparing every drain's targets")
    out["compared_rows"] = _in_process(
        "the comparison", "--compare", "--root", str(work), "--consumers", ",".join(consumers),
        "--tables", ",".join(tables),
    )  # fmt: skip
    for system in SYSTEMS:
        for temper in ("cold", "warm"):
            seconds = statistics.median(r[system][temper]["seconds"] for r in out["rounds"])
            out.setdefault(system, {})[temper] = {
                "seconds": seconds,
                "events_per_s": total / seconds,
            }
    out["ratio"] = {
        temper: out["ours"][temper]["events_per_s"] / out["textbook"][temper]["events_per_s"]
        for temper in ("cold", "warm")
    }
    return out


def fresh(args: argparse.Namespace, admin: str, work: Path, system: str) -> dict[str, Any]:
    """bench.freshness with this system's drain: ``--rate`` changes/s over three tables."""
    progress(f"freshness of {system} at {args.rate:g} changes/s")
    options = argparse.Namespace(
        tables=len(WORKLOADS[args.workload]), keys=100, rate=args.rate,
        seconds=args.freshness_seconds, driver_memory="2g", timeout=1800, system=system,
    )  # fmt: skip
    folder = work / f"freshness-{system}"
    folder.mkdir()
    found = freshness.run(options, admin, folder, database=f"bench_freshness_{system}")
    f = found["freshness_s"]
    progress(f"  p50 {f['p50']:.2f} s, p99 {f['p99']:.2f} s over {found['batches']} batches")
    return found


def plot(facts: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = 2 if "freshness" in facts else 1
    fig, axes = plt.subplots(1, panels, figsize=(5 * panels, 4), squeeze=False)
    colors = {"ours": "#4C72B0", "textbook": "#DD8452"}
    width = 0.38
    ax = axes[0][0]
    for n, system in enumerate(SYSTEMS):
        xs = [i + (n - 0.5) * width for i in range(2)]
        values = [facts[system][t]["events_per_s"] for t in ("cold", "warm")]
        ax.bar(xs, values, width, color=colors[system], label=system)
    ax.set_xticks(range(2), ["cold", "warm"])
    ax.set_ylabel("events/s")
    ax.set_title(f"{facts['events']:,} events, {len(facts['tables'])} table(s), {facts['master']}")
    ax.legend()
    if panels == 2:
        ax = axes[0][1]
        for n, system in enumerate(SYSTEMS):
            f = facts["freshness"][system]["freshness_s"]
            xs = [i + (n - 0.5) * width for i in range(2)]
            ax.bar(xs, [f["p50"], f["p99"]], width, color=colors[system], label=system)
        ax.set_xticks(range(2), ["p50", "p99"])
        ax.set_ylabel("seconds from commit to visible")
        ax.set_title(f"freshness at {facts['rate']:g} changes/s")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot_runs(runs: list[str], path: Path) -> None:
    """Ours / textbook, cold and warm, of several runs' JSON (``LABEL=FILE``) side by side,
    against the goal of 1.5."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels, ratios = [], []
    for run_ in runs:
        label, _, file = run_.partition("=")
        facts = json.loads(Path(file).read_text())
        labels.append(label)
        ratios.append([facts["ratio"][t] for t in ("cold", "warm")])
    fig, ax = plt.subplots(figsize=(2.2 * len(runs) + 2, 4))
    width = 0.38
    for n, (temper, color) in enumerate((("cold", "#4C72B0"), ("warm", "#DD8452"))):
        xs = [i + (n - 0.5) * width for i in range(len(runs))]
        bars = ax.bar(xs, [r[n] for r in ratios], width, color=color, label=temper)
        ax.bar_label(bars, fmt="%.2f")
    ax.axhline(1.5, color="gray", linestyle="--", linewidth=1, label="goal 1.5")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(runs)), labels)
    ax.set_ylabel("ours / textbook (events/s)")
    ax.set_title("ours against the textbook drain")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def report(facts: dict[str, Any]) -> None:
    print(
        f"{facts['events']:,} events over {len(facts['tables'])} table(s)"
        f" ({facts['workload']}, {facts['rows']:,} rows before), on {facts['master']},"
        f" {len(facts['rounds'])} round(s)"
    )
    for system in SYSTEMS:
        s = facts[system]
        print(
            f"  {system:9s} cold {s['cold']['events_per_s']:>9,.0f} ev/s"
            f"  warm {s['warm']['events_per_s']:>9,.0f} ev/s"
        )
    ratio = facts["ratio"]
    print(f"  ours / textbook: cold {ratio['cold']:.2f}, warm {ratio['warm']:.2f}")
    for system, found in facts.get("freshness", {}).items():
        f = found["freshness_s"]
        print(
            f"  {system:9s} freshness at {facts['rate']:g} changes/s: p50 {f['p50']:.2f} s,"
            f" p99 {f['p99']:.2f} s, max {f['max']:.2f} s ({found['batches']} batches)"
        )
    for n, round_ in enumerate(facts["rounds"], 1):
        for temper in ("cold", "warm"):
            print(f"  round {n} ours {temper}: routes {round_['ours'][temper].get('routes')}")
    print(f"  every target the same in every drain: rows {facts['compared_rows']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common_arguments(parser, reps=False)
    parser.add_argument("--events", type=int, default=1_000_000, help="backlog events")
    parser.add_argument("--max-events", type=int, default=1_000_000, help="ours: batch size")
    parser.add_argument("--rounds", type=int, default=2, help="rounds (medians count)")
    parser.add_argument("--rate", type=float, default=500, help="freshness: changes/s (500)")
    parser.add_argument(
        "--freshness-seconds", type=float, default=120, help="freshness: writing time; 0: none"
    )
    parser.add_argument(
        "--workload", choices=sorted(WORKLOADS), default="three", help="three tables, or big"
    )
    parser.add_argument("--rows", type=int, default=1_000_000, help="big: the table's rows")
    parser.add_argument(
        "--cluster", action="store_true", help="on a standalone master and worker (2 cores)"
    )
    parser.add_argument(
        "--jdbc-min-events", type=int, help="ours: source.jdbc_min_events (default: by master)"
    )
    parser.add_argument(
        "--workers", type=int, default=WORKERS, help=f"ours: tables at once ({WORKERS})"
    )
    parser.add_argument(
        "--memory-budget", type=int, help="ours: drain.memory_budget in bytes (default 2 GiB)"
    )
    parser.add_argument(
        "--event-log", type=Path, metavar="DIR", help="Spark event logs here (bench.spark_jobs)"
    )
    parser.add_argument(
        "--plot-runs",
        nargs="+",
        metavar="LABEL=FILE",
        help="no run: plot these runs' --json ratios side by side into --plot",
    )
    parser.add_argument("--worker", choices=SYSTEMS, dest="system", help=argparse.SUPPRESS)
    parser.add_argument("--tables", help=argparse.SUPPRESS)
    parser.add_argument("--conf", default="{}", help=argparse.SUPPRESS)
    parser.add_argument("--compare", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--dsn", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    parser.add_argument("--consumers", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.plot_runs:
        if not args.plot:
            parser.error("--plot-runs needs --plot FILE")
        plot_runs(args.plot_runs, args.plot)
        return 0
    if args.system:
        print(json.dumps(worker(args)))
        return 0
    if args.compare:
        print(
            json.dumps(compare(Path(args.root), args.consumers.split(","), args.tables.split(",")))
        )
        return 0
    check_args(parser, args)
    if args.quick:
        args.events, args.rounds, args.rate, args.freshness_seconds = 30_000, 1, 20, 20
    with tempfile.TemporaryDirectory(prefix="cdc-textbook-") as tmp:
        try:
            facts = run(args, Path(tmp))
        except BenchError as exc:
            print(f"bench: {exc}", file=sys.stderr)
            return 1
    facts.update(machine=machine_info(), git=git_state(), rate=args.rate)
    return publish(facts, args, report, plot)


if __name__ == "__main__":
    sys.exit(main())
