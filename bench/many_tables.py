"""Many-tables benchmark: what one batch costs when it touches 1, 20 or 100 tables.

Run from the repository root::

    .venv/bin/python -m bench.many_tables                  # 1, 20, 100 tables (minutes)
    .venv/bin/python -m bench.many_tables --quick          # 1 and 5 tables: a smoke run
    .venv/bin/python -m bench.many_tables --json out.json

One run starts a throwaway PostgreSQL cluster from ``--pgbin``, one local Spark session
(``local[2]``) and writes Delta tables in a temporary folder. ``--tables`` tables of six
columns are captured in json into one queue; each size N gets its own consumer and pipeline
(listing the N tables it touches, as a pipeline of N tables would). Per size: a first batch
creates the N targets (not measured), then each of ``--reps`` measured batches holds 10
changed rows per table (5 updates, 5 inserts), in the warm session. Last, the pipeline of the
largest size takes a batch touching one of its tables: what the tables a batch does not
touch cost.

Shown per size: seconds per batch (median over the reps), the ratio to one table, the Spark
jobs the batch ran, and where the seconds went, summed over the tables (with tables applied
concurrently, these sums exceed the batch's seconds). The breakdown comes from timing
wrappers this benchmark sets around the drain's functions (``Probe``): catalog look-ups
(keyed columns, fills, renamed names, incarnation), schema reconcile (its own Delta look-ups;
its fill query counts under catalog too), decode (the facts job, which fills the decode
cache), fold+merge (the MERGE or append, its Delta commit included), commit look-ups under
earlier appIds, failing marks read, quarantine. A function a revision lacks is not timed.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
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
from cdc.pg import capture, install
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Queue
from cdc.pipeline.drain import Drain

TABLE_DDL = (
    "create table {} (id bigint primary key, a text, b int, c numeric(12,2), d timestamptz, e bool)"
)
ROW = (
    "g, 'row ' || g, (g %% 1000)::int, g * 1.25, timestamptz '2024-01-01 00:00+00'"
    " + g * interval '1 s', g %% 2 = 0"
)
ROWS_PER_TABLE = 10  # changed rows per table per batch: 5 updates, 5 inserts

# phase -> (module, attribute) pairs timed by the Probe; an attribute a revision lacks is skipped
PHASES: dict[str, list[tuple[str, str]]] = {
    "catalog": [
        ("cdc.pg.pgtypes", "keyed_columns"),
        ("cdc.pg.pgtypes", "fingerprints"),
        ("cdc.targets.schema_drift", "fill_of"),
        ("cdc.pg.source", "table_names"),
        ("cdc.pg.source", "incarnation"),
    ],
    "reconcile": [("cdc.targets.schema_drift", "reconcile")],
    "decode": [("cdc.engines.spark.decode", "Decoded.facts")],
    "fold+merge": [
        ("cdc.targets.delta_table", "merge"),
        ("cdc.targets.delta_table", "overwrite"),
        ("cdc.targets.delta_table", "append"),
    ],
    "earlier appIds": [("cdc.pipeline.apply", "BatchApplier._done_before")],
    "failing marks": [("cdc.targets.failing", "read"), ("cdc.targets.failing", "Cache.current")],
    "quarantine": [("cdc.pipeline.apply", "BatchApplier._quarantine")],
}


class Probe:
    """Timing wrappers around the drain's functions (see PHASES), summed per phase over
    every thread; only calls made while no other call of the same phase is open in the same
    thread count (nested calls are not counted twice)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._lock = threading.Lock()
        self._depth = threading.local()
        self._undo: list[Callable[[], None]] = []

    def install(self) -> None:
        import importlib

        for phase, targets in PHASES.items():
            for module_name, attr in targets:
                owner: Any = importlib.import_module(module_name)
                *path, name = attr.split(".")
                for part in path:
                    owner = getattr(owner, part, None)
                if owner is None or not hasattr(owner, name):
                    continue
                original = owner.__dict__.get(name, getattr(owner, name))
                setattr(owner, name, self._wrap(phase, original))
                self._undo.append(functools.partial(setattr, owner, name, original))

    def uninstall(self) -> None:
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()

    def reset(self) -> None:
        with self._lock:
            self.seconds.clear()
            self.calls.clear()

    def _wrap(self, phase: str, func: Any) -> Any:
        if isinstance(func, staticmethod | classmethod):
            raise BenchError(f"cannot time {func!r}")

        @functools.wraps(func)
        def timed(*args: Any, **kwargs: Any) -> Any:
            depth = getattr(self._depth, phase, 0)
            setattr(self._depth, phase, depth + 1)
            started = time.monotonic()
            try:
                return func(*args, **kwargs)
            finally:
                setattr(self._depth, phase, depth)
                if depth == 0:
                    with self._lock:
                        elapsed = time.monotonic() - started
                        self.seconds[phase] = self.seconds.get(phase, 0.0) + elapsed
                        self.calls[phase] = self.calls.get(phase, 0) + 1

        return timed


def _database(admin_dsn: str, name: str) -> str:
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("drop database if exists {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("create database {}").format(sql.Identifier(name)))
    dsn = make_conninfo(admin_dsn, dbname=name)
    install.install(dsn)
    return dsn


def table_name(i: int) -> str:
    return f"t{i:03d}"


def _setup(dsn: str, tables: int, consumers: list[str]) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        Queue(conn, "bench").create()
        for consumer in consumers:
            Consumer(conn, "bench", consumer).register()
        for i in range(1, tables + 1):
            name = table_name(i)
            conn.execute(sql.SQL(TABLE_DDL).format(sql.Identifier(name)))
            capture.attach(conn, f"public.{name}", CaptureOptions(queue="bench", format="json"))


def _pipeline(dsn: str, root: Path, consumer: str, tables: int) -> config.Pipeline:
    return config.parse(
        {
            "source": {"dsn": dsn, "queue": "bench", "consumer": consumer},
            "target": {"path": str(root / consumer)},
            "tables": [
                {"source": f"public.{table_name(i)}", "target": table_name(i)}
                for i in range(1, tables + 1)
            ],
        }
    )


class Writer:
    """Writes 10 changed rows into each of the first n tables, in one transaction: 5 updates
    of rows written before, 5 inserts of new keys."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.next_id: dict[str, int] = {}

    def write(self, n: int) -> None:
        with psycopg.connect(self.dsn) as conn:
            for i in range(1, n + 1):
                name = sql.Identifier(table_name(i))
                low = self.next_id.get(table_name(i), 1)
                high = low + ROWS_PER_TABLE // 2 - 1
                if low > 1:
                    conn.execute(
                        sql.SQL("update {} set b = b + 1, a = a || 'u' where id >= %s").format(
                            name
                        ),
                        (max(1, low - ROWS_PER_TABLE // 2),),
                    )
                else:  # the first write: 10 inserts
                    high = low + ROWS_PER_TABLE - 1
                insert = (
                    "insert into {} select " + ROW + " from generate_series(%s::int8, %s::int8) g"
                )
                conn.execute(sql.SQL(insert).format(name), (low, high))
                self.next_id[table_name(i)] = high + 1


def _one_batch(drain: Drain, spark: Any, probe: Probe, expected_events: int) -> dict[str, Any]:
    """Runs the drain until caught up (one batch expected) and returns its figures."""
    tracker = spark.sparkContext.statusTracker()
    # job ids are sequential (the tracker keeps only the last thousand jobs: count by id)
    jobs_before = max(tracker.getJobIdsForGroup(None), default=-1)
    probe.reset()
    stats: list[Any] = []
    started = time.monotonic()
    drain.run(on_batch=stats.append)
    elapsed = time.monotonic() - started
    if len(stats) != 1:
        raise BenchError(f"expected one batch, the drain applied {len(stats)}")
    if stats[0].events != expected_events:
        raise BenchError(f"expected {expected_events} events, the batch held {stats[0].events}")
    if stats[0].quarantined:
        raise BenchError(f"{stats[0].quarantined} event(s) quarantined: {stats[0].failing}")
    return {
        "seconds": elapsed,
        "spark_jobs": max(tracker.getJobIdsForGroup(None), default=-1) - jobs_before,
        "read": stats[0].seconds.get("read", 0.0),
        "finish": stats[0].seconds.get("finish", 0.0),
        "phases": {p: round(s, 3) for p, s in probe.seconds.items()},
        "calls": dict(probe.calls),
    }


def run_size(
    spark: Any, dsn: str, root: Path, writer: Writer, probe: Probe, n: int, reps: int
) -> dict[str, Any]:
    pipeline = _pipeline(dsn, root, f"c{n}", n)
    out: dict[str, Any] = {"tables": n}
    with Drain(pipeline, spark) as drain:
        # the first batch creates the targets (and takes what earlier sizes wrote)
        writer.write(n)
        drain.run()
        samples = []
        for rep in range(reps):
            writer.write(n)
            sample = _one_batch(drain, spark, probe, n * ROWS_PER_TABLE)
            progress(f"{n} table(s), batch {rep + 1}/{reps}: {sample}")
            samples.append(sample)
        out["samples"] = samples
        out["seconds"] = statistics.median(s["seconds"] for s in samples)
    return out


def run_untouched(
    spark: Any, dsn: str, root: Path, writer: Writer, probe: Probe, n: int, reps: int
) -> dict[str, Any]:
    """The pipeline of n tables (targets already made), batches touching its first table."""
    pipeline = _pipeline(dsn, root, f"c{n}", n)
    samples = []
    with Drain(pipeline, spark) as drain:
        for _ in range(reps):
            writer.write(1)
            samples.append(_one_batch(drain, spark, probe, ROWS_PER_TABLE))
    progress(f"1 of {n} tables touched: {samples}")
    return {
        "configured": n,
        "samples": samples,
        "seconds": statistics.median(s["seconds"] for s in samples),
    }


def report(facts: dict[str, Any]) -> None:
    print(f"\nSpark session start: {facts['spark_start_s']:.1f} s")
    sizes = facts["sizes"]
    one = sizes[0]["seconds"]
    phases = sorted({p for size in sizes for s in size["samples"] for p in s["phases"]})
    header = f"{'tables':>6} {'s/batch':>8} {'ratio':>6} {'jobs':>5} {'read':>6} {'finish':>6}"
    print(header + "".join(f" {p[:14]:>14}" for p in phases))
    rows = [(str(size["tables"]), size) for size in sizes]
    if "untouched" in facts:
        rows.append((f"1/{facts['untouched']['configured']}", facts["untouched"]))
    for label, size in rows:
        med = min(size["samples"], key=lambda s: abs(s["seconds"] - size["seconds"]))
        line = (
            f"{label:>6} {size['seconds']:8.1f} {size['seconds'] / one:6.1f}"
            f" {med['spark_jobs']:5d} {med['read']:6.2f} {med['finish']:6.2f}"
        )
        print(line + "".join(f" {med['phases'].get(p, 0.0):14.2f}" for p in phases))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_arguments(parser, reps=True)
    parser.add_argument("--sizes", default="1,20,100", help="tables per batch (default 1,20,100)")
    parser.add_argument(
        "--no-untouched",
        action="store_true",
        help="skip the batch touching one table of the largest pipeline",
    )
    parser.set_defaults(reps=2)
    args = parser.parse_args(argv)
    check_args(parser, args)
    if args.quick:
        args.sizes, args.reps = "1,5", 1
    try:
        sizes = sorted({int(s) for s in args.sizes.split(",")})
    except ValueError:
        parser.error("--sizes: a comma-separated list of table counts")
    if not sizes or sizes[0] < 1:
        parser.error("--sizes: table counts of 1 or more")
    from cdc import spark as spark_module

    facts: dict[str, Any] = run_facts(args)
    probe = Probe()
    try:
        with cluster(args.pgbin, {}) as admin, tempfile.TemporaryDirectory() as tmp:
            with psycopg.connect(admin) as conn:
                facts["server"] = server_info(conn)
            dsn = _database(admin, "bench_many")
            _setup(dsn, sizes[-1], [f"c{n}" for n in sizes])
            started = time.monotonic()
            spark = spark_module.session("cdc-bench")
            facts["spark_start_s"] = time.monotonic() - started
            probe.install()
            writer = Writer(dsn)
            root = Path(tmp)
            facts["sizes"] = [
                run_size(spark, dsn, root, writer, probe, n, args.reps) for n in sizes
            ]
            if not args.no_untouched and sizes[-1] > 1:
                facts["untouched"] = run_untouched(
                    spark, dsn, root, writer, probe, sizes[-1], args.reps
                )
    except BenchError as exc:
        print(f"many_tables: {exc}", file=sys.stderr)
        return 1
    finally:
        probe.uninstall()
    return publish(facts, args, report, plot)


def plot(facts: dict[str, Any], path: Path) -> None:
    """Seconds per batch against the tables it touches, beside the goals (3x one table at
    20 tables, 10x at 100) and the line of tables applied one after the other."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = facts["sizes"]
    tables = [s["tables"] for s in sizes]
    seconds = [s["seconds"] for s in sizes]
    one = seconds[0] / tables[0]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.plot(tables, seconds, "o-", color="#4C72B0", label="measured")
    ax.plot(
        tables, [one * n for n in tables], ":", color="#8C8C8C", label="one table after the other"
    )
    goals = [(n, one * g) for n, g in ((1, 1), (20, 3), (100, 10)) if n <= tables[-1]]
    ax.plot(*zip(*goals, strict=True), "s--", color="#55A868", label="goal (20: 3x, 100: 10x)")
    for n, sec in zip(tables, seconds, strict=True):
        ax.annotate(
            f"{sec:.1f} s ({sec / seconds[0]:.1f}x)",
            (n, sec),
            textcoords="offset points",
            xytext=(6, -4),
            fontsize=8,
        )
    ax.set_xlabel("tables the batch touches (10 changed rows each)")
    ax.set_ylabel("seconds per batch")
    ax.set_title("One batch across many tables")
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
