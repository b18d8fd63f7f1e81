"""Ours against the textbook Spark drain (bench/textbook_drain.py), side by side on the same
queue contents: throughput cold and warm, the ratio ours / textbook, and freshness.

Run from the repository root::

    .venv/bin/python -m bench.drain_vs_textbook --json out.json   # 1,000,000 events, 2 rounds
    .venv/bin/python -m bench.drain_vs_textbook --quick           # smoke run: 30,000 events

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
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
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

SYSTEMS = ("ours", "textbook")
TABLES = ("t1", "t2", "t3")
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
    drain_bench._setup(dsn, list(TABLES), tuple(consumers))
    total = drain_bench.backlog(dsn, list(TABLES), events)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("select cdc.ticker('bench')")
    return total


def worker(args: argparse.Namespace) -> dict[str, Any]:
    """One system's drains, cold then warm, in this process's fresh Spark session."""
    from cdc import spark as cdc_spark

    session = cdc_spark.session(f"bench-{args.system}")
    out = {}
    for consumer in args.consumers.split(","):
        root = Path(args.root) / consumer
        if args.system == "ours":
            from cdc.pipeline.drain import Drain

            pipeline = drain_bench._pipeline(
                args.dsn, root, list(TABLES), args.max_events, consumer
            )
            batches: list[dict] = []
            with Drain(pipeline, session) as drain:
                started = time.monotonic()
                drain.run(on_batch=drain_bench._recorder(batches))
                seconds = time.monotonic() - started
            out[consumer] = {
                "events": sum(b["events"] for b in batches),
                "batches": len(batches),
                "seconds": seconds,
            }
        else:
            from cdc.pg import jdbc

            found = jdbc.jdbc_url(args.dsn)
            if found is None:
                raise BenchError("the textbook drain reads with JDBC: a TCP DSN is needed")
            targets = {f"public.{t}": (str(root / t), COLUMNS) for t in TABLES}
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


def compare(root: Path, consumers: list[str]) -> dict[str, int]:
    """Every table's rows in every drain's targets must be the same: rows per table."""
    from pyspark.sql import functions as F

    from cdc import spark as cdc_spark

    session = cdc_spark.session("bench-compare")
    names = [c for c, _ in COLUMNS]
    counts = {}
    for t in TABLES:
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


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    consumers = [
        _consumer(s, r, temper)
        for r in range(1, args.rounds + 1)
        for s in SYSTEMS
        for temper in ("cold", "warm")
    ]
    with follow.tcp_cluster(args.pgbin, {}) as admin:
        dsn = follow.database(admin, "bench_textbook")
        progress(f"backlog of {args.events:,} events, {len(consumers)} consumers")
        total = backlog(dsn, args.events, consumers)
        out: dict[str, Any] = {"events": total, "rounds": []}
        for r in range(1, args.rounds + 1):
            order = SYSTEMS if r % 2 else tuple(reversed(SYSTEMS))
            this: dict[str, Any] = {}
            for system in order:
                names = [_consumer(system, r, "cold"), _consumer(system, r, "warm")]
                progress(f"round {r}: {system}")
                got = _in_process(
                    f"the {system} drain", "--worker", system, "--dsn", dsn, "--root", str(work),
                    "--consumers", ",".join(names), "--max-events", str(args.max_events),
                )  # fmt: skip
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
            out["rounds"].append(this)
        if args.freshness_seconds > 0:
            out["freshness"] = {s: fresh(args, admin, work, s) for s in SYSTEMS}
    progress("comparing every drain's targets")
    out["rows"] = _in_process(
        "the comparison", "--compare", "--root", str(work), "--consumers", ",".join(consumers)
    )
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
        tables=len(TABLES), keys=100, rate=args.rate, seconds=args.freshness_seconds,
        driver_memory="2g", timeout=1800, system=system,
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
    ax.set_title(f"{facts['events']:,} events, three tables")
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


def report(facts: dict[str, Any]) -> None:
    print(f"{facts['events']:,} events over {len(TABLES)} tables, {len(facts['rounds'])} round(s)")
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
    print(f"  every target the same in every drain: rows {facts['rows']}")


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
    parser.add_argument("--worker", choices=SYSTEMS, dest="system", help=argparse.SUPPRESS)
    parser.add_argument("--compare", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--dsn", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    parser.add_argument("--consumers", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.system:
        print(json.dumps(worker(args)))
        return 0
    if args.compare:
        print(json.dumps(compare(Path(args.root), args.consumers.split(","))))
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
