"""The apply modes side by side: mirror, mirror with ``deletes = "soft"``, ``scd2`` and
``scd2`` with ``tombstones = true``, each drained by the Arrow engine and by Spark from the
same queue contents; events/s per mode and engine, cold and warm, and the ratio to mirror's
on the same engine.

Run from the repository root::

    .venv/bin/python -m bench.apply_modes --json out.json --plot docs/img/apply_modes.png
    .venv/bin/python -m bench.apply_modes --quick            # smoke run: 6,000 events
    .venv/bin/python -m bench.apply_modes --profile          # where each drain's time went

One run starts a throwaway PostgreSQL cluster from ``--pgbin`` and one database with
``--tables`` tables (bench.drain_bench's columns: a bigint key and five columns) captured in
json into one queue. Every drain has its own consumer, registered first, so each drains
exactly the same events. The backlog is made once, in rounds, the queue ticked after each:

- round 0 inserts each table's rows (one transaction per table);
- rounds 1 to ``--updates`` each update 80% of the rows (``id % 5`` not the round's residue;
  odd rounds ``b``, even rounds ``a`` and ``c``): every update changes a tracked column, so
  each is a new SCD2 version;
- the last round deletes 40% of the rows (``id % 5 < 2``).

The rows per table follow from ``--events``. A key has up to 1 + ``--updates`` versions,
and each round is a batch of its own (``source.max_events`` of 1 joins no ticks; a larger
``--max-events`` joins rounds into batches).

Each (mode, engine) runs in a fresh process (its own local Spark session, ``local[2]``), as
in bench.drain_vs_textbook: a first consumer drains the backlog with the JVM cold, then a
second one in the same session, warm; ``drain.engine`` forces the engine (``arrow``: the
Arrow engine decodes, folds or versions and writes with delta-rs; ``spark``: Spark does
it all). ``--rounds`` repeats it, the order of the processes reversed every other round;
the medians count. Events/s: the backlog's events over the seconds from the first read to
the last finish_batch.

After each drain the process checks its targets against the source and fails the run
otherwise: every event applied, none quarantined, no table failing; a mirror holds the
source's rows (count, sum of b, sum of c); a soft mirror those unmarked and every deleted key
marked; an scd2 target one current version per key, its current versions (not the
tombstones) the source's rows, and exactly the versions the backlog makes.

Timers around the engines' steps (looked up at call time, so a wrapper sees every call;
seconds summed over the tables, which are applied concurrently) say where a drain's time
went: on Arrow the read of the current versions (delta_rs.current_versions), the versions
step (cdc.engines.arrow.versions.versions), the fold, delta-rs' MERGE and append; on Spark
Delta's MERGE (which runs the lazy fold or versions inside it) and the append. ``--profile``
also materialises Spark's versions before the MERGE (a cached count of the current versions
read, then of the versioned rows) to tell the three apart: it changes the totals, so its
figures are not the throughput's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
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
from cdc import config
from cdc.pg.queue import Queue

# the modes: a [[tables]] entry's mode and options
MODES: dict[str, dict[str, Any]] = {
    "mirror": {"mode": "mirror"},
    "soft": {"mode": "mirror", "deletes": "soft"},
    "scd2": {"mode": "scd2"},
    "scd2_tomb": {"mode": "scd2", "tombstones": True},
}
LABELS = {
    "mirror": "mirror",
    "soft": 'mirror, deletes = "soft"',
    "scd2": "scd2",
    "scd2_tomb": "scd2, tombstones",
}
ENGINES = ("arrow", "spark")
TEMPERS = ("cold", "warm")
# what the summary shows: each drain's events/s, and the warm drain's after its first batch
# (which creates the targets, with Spark, in every mode): the update and delete rounds
MEASURES = ("cold", "warm", "later")
MEASURE_LABELS = {"cold": "cold", "warm": "warm", "later": "warm, later batches"}
DELETED = "id % 5 < 2"  # the last round's deletes: 40% of the keys
# what delta-rs says each MERGE did (the metrics its execute() returns), summed
MERGE_METRICS = (
    "num_target_rows_copied",
    "num_target_rows_updated",
    "num_target_rows_inserted",
    "num_target_files_added",
    "num_target_files_removed",
)


def updated(round_: int) -> str:
    """The rows an update round (1, 2, ...) changes: 80% of them."""
    return f"id % 5 <> {(round_ - 1) % 5}"


def setter(round_: int) -> str:
    return "b = b + 1" if round_ % 2 else "a = a || 'x', c = c + 1"


def rows_per_table(events: int, tables: int, updates: int) -> int:
    """The rows each table gets for about ``events`` events: 1 insert, 0.8 updates per round
    and 0.4 deletes per row."""
    return max(10, round(events / tables / (1.4 + 0.8 * updates)))


def expected(rows: int, updates: int) -> dict[str, int]:
    """What one table holds after the backlog (keys 1..rows): the source's rows, the keys
    deleted, and the SCD2 versions (one per insert and per update of a key)."""
    ids = range(1, rows + 1)
    touched = sum(1 for k in range(1, updates + 1) for i in ids if i % 5 != (k - 1) % 5)
    deleted = sum(1 for i in ids if i % 5 < 2)
    return {"rows": rows - deleted, "deleted": deleted, "versions": rows + touched}


def backlog(dsn: str, tables: list[str], rows: int, updates: int) -> list[int]:
    """The rounds, the queue ticked after each; returns each round's events."""
    count = "select count(*) from cdc.event where ev_extra1 = any(%s)"
    names = [f"public.{t}" for t in tables]
    out: list[int] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        queue = Queue(conn, "bench")
        before = 0

        def tick() -> None:
            nonlocal before
            queue.force_tick()
            if queue.tick() is None:
                raise BenchError("the queue did not tick after a round")
            now = int(conn.execute(count, (names,)).fetchone()[0])
            out.append(now - before)
            before = now

        for t in tables:
            conn.execute(
                f"insert into {t} select {drain_bench.ROW} from generate_series(1, {rows}) g"
            )
        tick()
        for k in range(1, updates + 1):
            for t in tables:
                conn.execute(f"update {t} set {setter(k)} where {updated(k)}")
            tick()
        for t in tables:
            conn.execute(f"delete from {t} where {DELETED}")
        tick()
    return out


def _pipeline(
    dsn: str, root: Path, tables: list[str], mode: str, engine: str, consumer: str, max_events: int
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
            "drain": {"engine": engine},
            "tables": [{"source": f"public.{t}", "target": t, **MODES[mode]} for t in tables],
        }
    )


# -- timers around the engines' steps (the worker process only)


class Timers:
    """Seconds and calls per step, summed over the threads that apply the tables, and counts
    (delta-rs' MERGE metrics)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def add(self, name: str, seconds: float) -> None:
        with self._lock:
            self.seconds[name] = self.seconds.get(name, 0.0) + seconds
            self.calls[name] = self.calls.get(name, 0) + 1

    def count(self, name: str, n: int) -> None:
        with self._lock:
            self.counts[name] = self.counts.get(name, 0) + n

    def take(self) -> dict[str, dict[str, Any]]:
        """What was timed and counted since the last take."""
        with self._lock:
            out = {"seconds": self.seconds, "calls": self.calls, "counts": self.counts}
            self.seconds, self.calls, self.counts = {}, {}, {}
        return out

    def wrap(self, owner: Any, attribute: str, name: str) -> None:
        """owner.attribute, timed under name (owner: a module or a class)."""
        inner = getattr(owner, attribute)

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.monotonic()
            try:
                return inner(*args, **kwargs)
            finally:
                self.add(name, time.monotonic() - started)

        setattr(owner, attribute, timed)


def install_timers(timers: Timers, profile: bool) -> None:
    """Timers around the steps of both engines; profile: Spark's versions materialised."""
    from deltalake.table import TableMerger

    from cdc.engines.arrow import engine as arrow_engine
    from cdc.engines.arrow import fold as arrow_fold
    from cdc.engines.arrow import versions as arrow_versions
    from cdc.engines.spark import engine as spark_engine
    from cdc.targets import delta_table
    from cdc.targets.delta import delta_rs

    timers.wrap(delta_rs, "current_versions", "arrow: read current versions")
    timers.wrap(arrow_versions, "versions", "arrow: versions step")
    timers.wrap(arrow_fold, "fold_rows", "arrow: fold")
    timers.wrap(arrow_engine.ArrowEngine, "merge", "arrow: MERGE (delta-rs)")
    timers.wrap(arrow_engine.ArrowEngine, "append", "arrow: append (delta-rs)")
    timers.wrap(TableMerger, "execute", "arrow: delta-rs MERGE execute")
    execute = TableMerger.execute

    def counted(self: Any) -> Any:
        metrics = execute(self)
        for name in MERGE_METRICS:
            timers.count(name, int(metrics.get(name) or 0))
        return metrics

    TableMerger.execute = counted
    timers.wrap(delta_table, "merge", "spark: MERGE (Delta)")
    timers.wrap(delta_table, "append", "spark: append (Delta)")
    if profile:
        versions = spark_engine.SparkEngine.versions

        def materialised(self: Any, rows: Any, columns: Any, rules: Any, bounds: Any) -> Any:
            from pyspark.sql import functions as F

            from cdc import rows as contract
            from cdc.targets.delta import spark_sql

            started = time.monotonic()
            current = delta_table.read(self.spark, self.ref).where(F.col(contract.CURRENT))
            if bounds is not None:
                current = current.alias("t").where(F.expr(spark_sql.between(bounds)))
            current.count()
            timers.add("spark: read current versions (a count)", time.monotonic() - started)
            started = time.monotonic()
            frame = versions(self, rows, columns, rules, bounds).cache()
            frame.count()
            timers.add("spark: versions step (cached, a count)", time.monotonic() - started)
            return frame

        spark_engine.SparkEngine.versions = materialised


# -- the worker: one (mode, engine), its consumers one after the other


def check(spark: Any, dsn: str, pipeline: config.Pipeline, mode: str, want: dict) -> dict:
    """The targets against the source (see the module docstring); their counts."""
    from pyspark.sql import functions as F

    from cdc.targets import delta_table

    found: dict[str, Any] = {}
    for table in pipeline.tables:
        with psycopg.connect(dsn) as conn:
            rows, b, c = conn.execute(
                f"select count(*), sum(b), sum(c) from {table.source}"
            ).fetchone()
        frame = delta_table.read(spark, pipeline.table(table.target))
        if mode.startswith("scd2"):
            live = frame.where(
                "__current and not __deleted" if mode == "scd2_tomb" else "__current"
            )
        elif mode == "soft":
            live = frame.where("not __deleted")
        else:
            live = frame
        got = live.agg(F.count("*"), F.sum("b"), F.sum("c")).first()
        counts = {"rows": got[0]}
        problems = []
        if tuple(got) != (rows, b, c):
            problems.append(
                f"(count, sum b, sum c) {tuple(got)} against the source's {(rows, b, c)}"
            )
        if mode == "soft":
            counts["marked"] = frame.where("__deleted").count()
            if counts["marked"] != want["deleted"]:
                problems.append(f"{counts['marked']} rows marked deleted, not {want['deleted']}")
        if mode.startswith("scd2"):
            tombs = want["deleted"] if mode == "scd2_tomb" else 0
            current = frame.where("__current").agg(F.count("*"), F.count_distinct("id")).first()
            counts.update(versions=frame.count(), current=current[0])
            if current[0] != current[1]:
                problems.append(f"{current[0]} current versions of {current[1]} keys")
            if current[0] != rows + tombs:
                problems.append(f"{current[0]} current versions, not {rows + tombs}")
            if counts["versions"] != want["versions"] + tombs:
                problems.append(f"{counts['versions']} versions, not {want['versions'] + tombs}")
        if problems:
            raise BenchError(f"{mode} target {table.target}: " + "; ".join(problems))
        found[table.target] = counts
    return found


def worker(args: argparse.Namespace) -> dict[str, Any]:
    """This process's drains, cold then warm, in its fresh Spark session."""
    from cdc import spark as cdc_spark
    from cdc.pipeline.drain import Drain

    timers = Timers()
    install_timers(timers, args.profile)
    session = cdc_spark.session(f"bench-{args.mode}-{args.engine}")
    tables = args.names.split(",")
    want = expected(args.rows, args.updates)
    out = {}
    for consumer in args.consumers.split(","):
        root = Path(args.root) / consumer
        pipeline = _pipeline(
            args.dsn, root, tables, args.mode, args.engine, consumer, args.max_events
        )
        batches: list[dict[str, Any]] = []
        routes: dict[str, int] = {}
        last = [0.0]

        def record(stats: Any, batches: list = batches, routes: dict = routes, last=last) -> None:
            now = time.monotonic()
            if stats.failing or stats.quarantined:
                raise BenchError(
                    f"batch {stats.batch_id}: failing {stats.failing},"
                    f" {stats.quarantined} event(s) quarantined"
                )
            batches.append(
                {
                    "events": stats.events,
                    "seconds": now - last[0],
                    **{p: stats.phases.get(p, 0.0) for p in drain_bench.PHASES},
                    "steps": timers.take(),
                }
            )
            last[0] = now
            for route in stats.routes.values():
                routes[route] = routes.get(route, 0) + 1

        timers.take()
        load = os.getloadavg()[0]
        # tick=False: the backlog ticked after its last round (a tick at each drain's start
        # would give the later consumers empty batches the earlier ones did not have)
        with Drain(pipeline, session, tick=False) as drain:
            started = last[0] = time.monotonic()
            drain.run(on_batch=record)
            seconds = time.monotonic() - started
        if args.max_events == 1 and len(batches) != args.updates + 2:
            raise BenchError(f"{consumer}: {len(batches)} batches, not one per round")
        out[consumer] = {
            "events": sum(b["events"] for b in batches),
            "seconds": seconds,
            "batches": batches,
            "phases": {p: sum(b[p] for b in batches) for p in drain_bench.PHASES},
            "steps": summed([b["steps"] for b in batches]),
            "routes": routes,
            "load": [load, os.getloadavg()[0]],
            "targets": check(session, args.dsn, pipeline, args.mode, want),
        }
    return out


def summed(steps: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Timers.take()'s of several batches, added."""
    out: dict[str, dict[str, Any]] = {"seconds": {}, "calls": {}, "counts": {}}
    for one in steps:
        for kind, values in one.items():
            for name, n in values.items():
                out[kind][name] = out[kind].get(name, 0) + n
    return out


def _in_process(what: str, *args: str) -> Any:
    """This module run in a process of its own with these options: the JSON its last line
    prints."""
    command = [sys.executable, "-m", "bench.apply_modes", *args]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise BenchError(f"{what} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- the run


def run(args: argparse.Namespace, work: Path, facts: dict[str, Any]) -> dict[str, Any]:
    tables = [f"t{i}" for i in range(1, args.tables + 1)]
    modes, engines = args.modes.split(","), args.engines.split(",")
    rows = rows_per_table(args.events, len(tables), args.updates)
    pairs = [(m, e) for e in engines for m in modes]

    def consumer(mode: str, engine: str, round_: int, temper: str) -> str:
        return f"{mode}_{engine}_{round_}_{temper}"

    names = [
        consumer(m, e, r, t) for r in range(1, args.rounds + 1) for m, e in pairs for t in TEMPERS
    ]
    with cluster(args.pgbin, {}) as admin:
        with psycopg.connect(admin) as conn:
            facts["server"] = server_info(conn)
        dsn = drain_bench._database(admin, "bench_apply_modes")
        drain_bench._setup(dsn, tables, tuple(names))
        progress(f"backlog: {len(tables)} table(s) of {rows:,} rows, {args.updates} update rounds")
        rounds = backlog(dsn, tables, rows, args.updates)
        total = sum(rounds)
        progress(f"  {total:,} events, by round {rounds}; {len(names)} consumers")
        out: dict[str, Any] = {"events": total, "rounds_events": rounds, "tables": tables}
        out.update(rows_per_table=rows, expected=expected(rows, args.updates), runs=[])
        for r in range(1, args.rounds + 1):
            order = pairs if r % 2 else list(reversed(pairs))
            this: dict[str, Any] = {}
            for mode, engine in order:
                pair = [consumer(mode, engine, r, t) for t in TEMPERS]
                progress(f"round {r}: {mode} on {engine} (load {os.getloadavg()[0]:.1f})")
                got = _in_process(
                    f"{mode} on {engine}", "--worker", mode, "--engine", engine, "--dsn", dsn,
                    "--root", str(work), "--consumers", ",".join(pair), "--names",
                    ",".join(tables), "--rows", str(rows), "--updates", str(args.updates),
                    "--max-events", str(args.max_events),
                    *(["--profile"] if args.profile else []),
                )  # fmt: skip
                for name, found in got.items():
                    if found["events"] != total:
                        raise BenchError(f"{name}: drained {found['events']} events of {total}")
                this[f"{mode}/{engine}"] = dict(zip(TEMPERS, (got[n] for n in pair), strict=True))
                for temper, name in zip(TEMPERS, pair, strict=True):
                    g = got[name]
                    progress(
                        f"  {temper}: {total / g['seconds']:,.0f} ev/s, {len(g['batches'])}"
                        f" batches, routes {g['routes']}, targets {g['targets']}"
                    )
                    progress(f"    steps {_steps(g['steps'])}")
            out["runs"].append(this)
    out["summary"] = summarise(out["runs"], pairs)
    out.update(modes=modes, engines=engines, master="local[2]")
    return out


def summarise(runs: list[dict[str, Any]], pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """Per (mode, engine) and measure: the median events/s over the runs, and its ratio to
    mirror's on the same engine."""
    summary: dict[str, Any] = {}
    for mode, engine in pairs:
        key = f"{mode}/{engine}"
        for measure in MEASURES:
            rates = [rate(run[key], measure) for run in runs]
            summary.setdefault(key, {})[measure] = {
                "events_per_s": statistics.median(rates),
                "runs": rates,
            }
    for mode, engine in pairs:
        base = summary[f"mirror/{engine}"]
        for measure in MEASURES:
            entry = summary[f"{mode}/{engine}"][measure]
            entry["ratio"] = entry["events_per_s"] / base[measure]["events_per_s"]
    return summary


def rate(drains: dict[str, Any], measure: str) -> float:
    """A (mode, engine)'s events/s in one run: its cold or warm drain's, or (later) its warm
    drain's after the first batch."""
    if measure == "later":
        later = drains["warm"]["batches"][1:]
        return sum(b["events"] for b in later) / sum(b["seconds"] for b in later)
    found = drains[measure]
    return found["events"] / found["seconds"]


def _steps(steps: dict[str, dict[str, Any]]) -> str:
    timed = ", ".join(f"{n} {s:.2f} s" for n, s in sorted(steps["seconds"].items()))
    counted = ", ".join(
        f"{n.removeprefix('num_target_')} {c:,}" for n, c in steps["counts"].items()
    )
    return (timed or "-") + (f"; delta-rs: {counted}" if counted else "")


# -- the report


def plot(facts: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    engines, modes = facts["engines"], facts["modes"]
    fig, axes = plt.subplots(1, len(engines), figsize=(5.2 * len(engines), 4.2), squeeze=False)
    colors = {"mirror": "#4C72B0", "soft": "#55A868", "scd2": "#DD8452", "scd2_tomb": "#C44E52"}
    width = 0.8 / len(modes)
    for ax, engine in zip(axes[0], engines, strict=True):
        top = max(
            facts["summary"][f"{m}/{engine}"][t]["events_per_s"] for m in modes for t in MEASURES
        )
        for n, mode in enumerate(modes):
            entry = facts["summary"][f"{mode}/{engine}"]
            xs = [i + (n - (len(modes) - 1) / 2) * width for i in range(len(MEASURES))]
            values = [entry[t]["events_per_s"] for t in MEASURES]
            ax.bar(xs, values, width, color=colors.get(mode), label=LABELS[mode])
            for x, t in zip(xs, MEASURES, strict=True):
                if mode != "mirror":
                    ax.text(
                        x, entry[t]["events_per_s"], f"{entry[t]['ratio']:.2f}",
                        ha="center", va="bottom", fontsize=8,
                    )  # fmt: skip
        base = facts["summary"].get(f"mirror/{engine}")
        if base is not None:
            for i, t in enumerate(MEASURES):
                half = base[t]["events_per_s"] / 2
                ax.hlines(half, i - 0.45, i + 0.45, colors="grey", linestyles="dashed")
        ax.set_xticks(range(len(MEASURES)), [MEASURE_LABELS[m] for m in MEASURES])
        ax.set_ylim(0, top * 1.12)
        ax.set_ylabel("events/s")
        ax.set_title(f"{engine} engine: {facts['events']:,} events")
        ax.legend(fontsize=8, loc="upper left")
    fig.suptitle("apply modes (ratio to mirror above each bar; dashed: half of mirror)", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def report(facts: dict[str, Any]) -> None:
    print(
        f"\n{facts['events']:,} events over {len(facts['tables'])} table(s) of"
        f" {facts['rows_per_table']:,} rows, rounds {facts['rounds_events']},"
        f" {len(facts['runs'])} run(s), {facts['master']}; load {facts['load']}"
    )
    head = "".join(f" {t + ' ev/s':>10s} {'ratio':>6s}" for t in MEASURES)
    print(f"{'mode':26s} {'engine':6s}{head}")
    for engine in facts["engines"]:
        for mode in facts["modes"]:
            s = facts["summary"][f"{mode}/{engine}"]
            cells = "".join(
                f" {s[t]['events_per_s']:>10,.0f} {s[t]['ratio']:>6.2f}" for t in MEASURES
            )
            print(f"{LABELS[mode]:26s} {engine:6s}{cells}")
    for n, run in enumerate(facts["runs"], 1):
        for key, tempers in run.items():
            for temper, found in tempers.items():
                per_batch = ", ".join(f"{b['seconds']:.1f}" for b in found["batches"])
                print(f"  run {n} {key} {temper}: batches (s) {per_batch}")
                print(f"    routes {found['routes']}")
                print(f"    steps: {_steps(found['steps'])}")
                later = summed([b["steps"] for b in found["batches"][1:]])
                print(f"    steps after the first batch: {_steps(later)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common_arguments(parser, reps=False)
    parser.add_argument("--events", type=int, default=300_000, help="backlog events (300,000)")
    parser.add_argument("--tables", type=int, choices=(1, 3), default=3, help="tables (3)")
    parser.add_argument("--updates", type=int, default=3, help="update rounds (3)")
    parser.add_argument(
        "--max-events", type=int, default=1, help="source.max_events (1: a batch per round)"
    )
    parser.add_argument("--rounds", type=int, default=1, help="runs of every drain (medians)")
    parser.add_argument("--modes", default=",".join(MODES), help=f"among {', '.join(MODES)}")
    parser.add_argument("--engines", default=",".join(ENGINES), help="arrow, spark or both")
    parser.add_argument(
        "--profile", action="store_true", help="materialise Spark's versions to time its steps"
    )
    parser.add_argument("--worker", choices=sorted(MODES), dest="mode", help=argparse.SUPPRESS)
    parser.add_argument("--engine", choices=ENGINES, help=argparse.SUPPRESS)
    parser.add_argument("--dsn", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    parser.add_argument("--consumers", help=argparse.SUPPRESS)
    parser.add_argument("--rows", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--names", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.mode:
        print(json.dumps(worker(args)))
        return 0
    check_args(parser, args)
    if not set(args.modes.split(",")) <= set(MODES) or "mirror" not in args.modes.split(","):
        parser.error(f"--modes: mirror and any of {', '.join(MODES)}")
    if not set(args.engines.split(",")) <= set(ENGINES):
        parser.error(f"--engines: among {', '.join(ENGINES)}")
    if args.events < 100 or args.updates < 1 or args.rounds < 1 or args.max_events < 1:
        parser.error("--events >= 100, --updates, --rounds and --max-events >= 1")
    if args.quick:
        args.events = 6_000
    facts: dict[str, Any] = run_facts(args)
    facts["load"] = [round(x, 1) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory(prefix="cdc-modes-") as tmp:
        try:
            facts.update(run(args, Path(tmp), facts))
        except BenchError as exc:
            print(f"apply_modes: {exc}", file=sys.stderr)
            return 1
    facts["load_after"] = [round(x, 1) for x in os.getloadavg()]
    return publish(facts, args, report, plot)


if __name__ == "__main__":
    sys.exit(main())
