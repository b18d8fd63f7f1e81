"""The drain into object storage against the drain into a local folder, side by side in one
run: throughput (cold and warm) and freshness, the ratio s3a:// / local.

Run from the repository root::

    .venv/bin/python -m bench.object_storage --json out.json   # 200,000 events, 60 s freshness
    .venv/bin/python -m bench.object_storage --quick           # smoke run

One run starts a throwaway PostgreSQL cluster from ``--pgbin``, the tests' S3 API server
(tests/support/objectstore.py: moto on 127.0.0.1, conditional writes atomic) and one local
Spark session reaching it through S3A, and takes bench.drain_bench's throughput and
freshness measures twice, into a temporary folder and into a bucket, after a drain that
warms the JVM up (so "cold" and "warm" are the first and second consumer of a side's
backlog, both in a warm JVM: the targets are new for the first). Each side has its own
database, queue and backlog of the same size. The store answers on the loopback with no
network between: the ratio is the cost of going through the S3 API (and the commit protocol
of each writer over it), not the latency of a real store, which adds its round trips.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from bench import drain_bench
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

SIDES = ("local", "s3a")


def report(facts: dict[str, Any]) -> None:
    print("side    cold ev/s  warm ev/s  freshness p50  p99")
    for side in SIDES:
        t, f = facts[side]["throughput"], facts[side]["freshness"]
        print(
            f"{side:<6} {t['cold']['events_per_s']:>10,.0f} {t['warm']['events_per_s']:>10,.0f}"
            f" {f['p50']:>13.2f} {f['p99']:>5.2f}"
        )
    for name, value in facts["ratios"].items():
        print(f"s3a / local, {name}: {value:.2f}")


def plot(facts: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5))
    for i, side in enumerate(SIDES):
        t = facts[side]["throughput"]
        left.bar([i - 0.2, i + 0.2], [t["cold"]["events_per_s"], t["warm"]["events_per_s"]],
                 width=0.4, color=["#8fb3d9", "#2b6cb0"])  # fmt: skip
        f = facts[side]["freshness"]
        right.bar([i - 0.2, i + 0.2], [f["p50"], f["p99"]], width=0.4, color=["#9ae6b4", "#2f855a"])
    for axis, title in ((left, "events/s (cold, warm)"), (right, "freshness s (p50, p99)")):
        axis.set_xticks(range(len(SIDES)), SIDES)
        axis.set_title(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_arguments(parser, reps=False)
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--max-events", type=int, default=2_000_000)
    parser.add_argument("--rate", type=int, default=500)
    parser.add_argument("--freshness-seconds", type=float, default=60.0)
    args = parser.parse_args(argv)
    check_args(parser, args)
    if args.quick:
        args.events, args.freshness_seconds = 20_000, 15.0
    from cdc import spark as spark_module
    from tests.support import objectstore

    facts: dict[str, Any] = run_facts(args)
    try:
        with (
            cluster(args.pgbin, {}) as admin,
            tempfile.TemporaryDirectory() as tmp,
            objectstore.object_store() as store,
        ):
            with psycopg.connect(admin) as conn:
                facts["server"] = server_info(conn)
            started = time.monotonic()
            spark = spark_module.session("cdc-bench", store.spark_settings())
            facts["spark_start_s"] = time.monotonic() - started
            # the JVM warmed up first, so that neither side pays for its compiling
            drain_bench.throughput(admin, spark, tmp + "/warmup", 20_000, args.max_events, "_w")
            roots = {"local": tmp, "s3a": store.bucket()}
            for side in SIDES:
                root = roots[side]
                facts[side] = {
                    "throughput": drain_bench.throughput(
                        admin, spark, root, args.events, args.max_events, db=f"_{side}"
                    ),
                    "freshness": drain_bench.freshness(
                        admin, spark, root, args.rate, args.freshness_seconds, db=f"_{side}"
                    ),
                }
                progress(f"{side}: {facts[side]}")
    except BenchError as exc:
        print(f"object_storage: {exc}", file=sys.stderr)
        return 1
    local, s3a = facts["local"], facts["s3a"]
    facts["ratios"] = {
        "cold events/s": s3a["throughput"]["cold"]["events_per_s"]
        / local["throughput"]["cold"]["events_per_s"],
        "warm events/s": s3a["throughput"]["warm"]["events_per_s"]
        / local["throughput"]["warm"]["events_per_s"],
        "freshness p50": s3a["freshness"]["p50"] / local["freshness"]["p50"],
        "freshness p99": s3a["freshness"]["p99"] / local["freshness"]["p99"],
    }
    return publish(facts, args, report, plot)


if __name__ == "__main__":
    sys.exit(main())
