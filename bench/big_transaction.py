"""One huge transaction: the drain's peak memory and time against the memory budget.

Run from the repository root::

    .venv/bin/python -m bench.big_transaction                # 1,000,000 and 3,000,000 events
    .venv/bin/python -m bench.big_transaction --quick        # smoke run: small sizes
    .venv/bin/python -m bench.big_transaction --json out.json --plot docs/img/big_transaction.png

A throwaway PostgreSQL cluster from ``--pgbin`` holds a table ``big (id bigint primary key,
payload text)`` captured in json; one transaction inserts rows whose events are about 1 KB
each (``--baseline-events`` rows, then, for a second queue, ``--events`` rows). One
transaction is one tick, so one batch whatever ``max_events`` says. Each drain is ``cdc drain
--until-caught-up`` in a process of its own (a fresh JVM, ``local[2]``, Spark's default 2g of
driver heap), and reports the kernel's peak resident memory of its Python process and of its
JVM (``VmHWM``, cdc.memory); the time is the process's, JVM start included.

Side by side, on the same ``--baseline-events`` transaction: the drain with the default
budget (2 GiB: the batch is spilled and applied by Spark) against the drain with a budget so
large that the batch stays on the driver (the route before the budget existed: decode, fold
and MERGE in Arrow and delta-rs). Then the bounded drain alone on ``--events``, a size the
driver route would not survive on this machine.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
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
from cdc.pg import capture, install
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Queue

UNBOUNDED = "1TiB"  # a budget no batch here reaches: the driver route, as before the budget
BOUNDED = "2GiB"  # the default
MB_PER_GIB = (1 << 30) / 1e6
PEAK = re.compile(r"peak memory: python (\d+) MB, jvm (\d+|unknown)")
# 31 md5 texts: 992 characters, an event of about 1 KB
PAYLOAD = " || ".join(f"md5((g + {i})::text)" for i in range(31))


def _transaction(admin: str, queue: str, events: int, consumers: list[str]) -> str:
    """A database with one queue whose consumers each face one transaction of events."""
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"drop database if exists {queue}")
        conn.execute(f"create database {queue}")
    dsn = make_conninfo(admin, dbname=queue)
    install.install(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        Queue(conn, queue).create()
        for consumer in consumers:
            Consumer(conn, queue, consumer).register()
        conn.execute("create table big (id bigint primary key, payload text)")
        capture.attach(conn, "public.big", CaptureOptions(queue=queue, mode="statement"))
        started = time.monotonic()
        conn.execute(
            f"insert into big select g, {PAYLOAD} from generate_series(1, %s) g", (events,)
        )
        size = conn.execute("select pg_size_pretty(sum(length(ev_data))) from cdc.event").fetchone()
        progress(f"{queue}: {events:,} events ({size[0]}) in {time.monotonic() - started:.0f} s")
    return dsn


def _drain(dsn: str, queue: str, consumer: str, budget: str, root: Path) -> dict[str, Any]:
    """One `cdc drain` process: its seconds and peak memory (MB)."""
    config = root / f"{queue}-{consumer}.toml"
    config.write_text(
        f"[source]\ndsn = {dsn!r}\nqueue = {queue!r}\nconsumer = {consumer!r}\n"
        f"[target]\npath = {str(root / queue / consumer)!r}\n"
        "[[tables]]\nsource = 'public.big'\ntarget = 'big'\n"
        f"[drain]\nmemory_budget = {budget!r}\nspill_dir = {str(root / 'spill')!r}\n"
    )
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "cdc.cli", "drain", "--config", str(config)],
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.monotonic() - started
    found = PEAK.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise BenchError(f"the drain failed ({done.returncode}): {done.stderr[-2000:]}")
    python = int(found[1])
    jvm = None if found[2] == "unknown" else int(found[2])
    return {
        "budget": budget,
        "seconds": round(seconds, 1),
        "python_mb": python,
        "jvm_mb": jvm,
        "total_mb": python + (jvm or 0),
        "spilled": "spilled to" in done.stderr,
    }


def run(admin: str, root: Path, baseline_events: int, events: int) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    dsn = _transaction(admin, "side_by_side", baseline_events, ["driver", "bounded"])
    for consumer, budget in (("driver", UNBOUNDED), ("bounded", BOUNDED)):
        facts[consumer] = {
            "events": baseline_events,
            **_drain(dsn, "side_by_side", consumer, budget, root),
        }
        progress(f"{consumer}: {facts[consumer]}")
    dsn = _transaction(admin, "huge", events, ["bounded"])
    facts["huge"] = {"events": events, **_drain(dsn, "huge", "bounded", BOUNDED, root)}
    progress(f"huge: {facts['huge']}")
    return facts


def report(facts: dict[str, Any]) -> None:
    print(
        f"{'run':<10} {'events':>10} {'budget':>7} {'route':>8} {'s':>7} {'python MB':>10}"
        f" {'jvm MB':>8} {'total MB':>9}"
    )
    for name in ("driver", "bounded", "huge"):
        row = facts["runs"][name]
        route = "spilled" if row["spilled"] else "driver"
        print(
            f"{name:<10} {row['events']:>10,} {row['budget']:>7} {route:>8} {row['seconds']:>7.1f}"
            f" {row['python_mb']:>10,} {row['jvm_mb'] or 0:>8,} {row['total_mb']:>9,}"
        )
    driver, bounded = facts["runs"]["driver"], facts["runs"]["bounded"]
    time_ratio = bounded["seconds"] / driver["seconds"]
    print(
        f"bounded / driver at {driver['events']:,} events: time {time_ratio:.2f}x,"
        f" python peak {bounded['python_mb'] / driver['python_mb']:.2f}x,"
        f" total peak {bounded['total_mb'] / driver['total_mb']:.2f}x"
    )


def plot(facts: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = facts["runs"]
    names = ["driver", "bounded", "huge"]
    labels = [
        f"{runs[n]['events'] / 1e6:g}M events\n"
        + ("no budget (driver)" if n == "driver" else "2 GiB budget")
        for n in names
    ]
    python = [runs[n]["python_mb"] / MB_PER_GIB for n in names]
    jvm = [(runs[n]["jvm_mb"] or 0) / MB_PER_GIB for n in names]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.bar(labels, python, label="Python")
    ax.bar(labels, jvm, bottom=python, label="JVM")
    for i, n in enumerate(names):
        ax.text(i, python[i] + jvm[i] + 0.05, f"{runs[n]['seconds']:.0f} s", ha="center")
    ax.set_ylabel("peak resident memory (GiB)")
    ax.set_ylim(0, max(p + j for p, j in zip(python, jvm, strict=True)) * 1.12)
    ax.set_title("One transaction of 1 KB events: the drain's peak memory")
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_arguments(parser, reps=False)
    parser.add_argument("--baseline-events", type=int, default=1_000_000)
    parser.add_argument("--events", type=int, default=3_000_000)
    args = parser.parse_args(argv)
    check_args(parser, args)
    if args.quick:
        args.baseline_events, args.events = 50_000, 100_000
    facts: dict[str, Any] = run_facts(args)
    try:
        settings = {"max_wal_size": "8GB", "checkpoint_timeout": "30min"}
        with cluster(args.pgbin, settings) as admin, tempfile.TemporaryDirectory() as tmp:
            with psycopg.connect(admin) as conn:
                facts["server"] = server_info(conn)
            facts["runs"] = run(admin, Path(tmp), args.baseline_events, args.events)
    except BenchError as exc:
        print(f"big_transaction: {exc}", file=sys.stderr)
        return 1
    return publish(facts, args, report, plot)


if __name__ == "__main__":
    sys.exit(main())
