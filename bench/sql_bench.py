"""`cdc sql` on its two engines: the wall time of the whole command (process start to exit) for
``select count(*) from t`` on a table of a million rows, on DataFusion through delta-rs
(``--engine datafusion``, no JVM) and on Spark SQL (``--engine spark``), at the latest
version, at the last consistent tick (``--consistent``) and at an older tick
(``--at-tick N``, which reads the table's history). Goal: under 1 s on DataFusion.

Run from the repository root::

    .venv/bin/python -m bench.sql_bench                         # 1,000,000 rows
    .venv/bin/python -m bench.sql_bench --quick                 # smoke run: 20,000 rows
    .venv/bin/python -m bench.sql_bench --reps 7 --markdown /tmp/sql-bench.md --json out.json

One run starts a throwaway PostgreSQL cluster from ``--pgbin`` (bench.follow.tcp_cluster),
creates ``t`` (id, seq, v, pad) captured in json with ``--rows`` rows inserted after the
capture, and drains them with the real ``cdc drain`` (one batch, at tick A); then ten more rows
and a second drain (tick B), so that ``--at-tick A`` pins the first version and reads the
table's history, and ``--consistent`` pins B (the latest). Each ``cdc`` command is its own
process, ``python -m cdc.cli``, timed from its start to its exit; the count it prints is
checked. Shown: the median and the best of ``--reps`` runs (``--spark-reps`` on Spark, whose
JVM start dominates), and the floors: an interpreter that does nothing, and one that imports
the ``cdc`` command.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

from bench import follow
from bench.common import BenchError, check_args, common_arguments, progress, run_facts
from bench.common import write_json as write_json_file

TABLE = "t"
QUERY = f"select count(*) as n from {TABLE}"
ENGINES = ("datafusion", "spark")
GOAL = 1.0  # seconds, DataFusion


def timed(command: list[str]) -> tuple[float, str]:
    """Runs command to its end: (wall seconds from start to exit, stdout); BenchError when it
    fails."""
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise BenchError(f"{' '.join(command[2:])} failed:\n{(done.stdout + done.stderr)[-3000:]}")
    return seconds, done.stdout


def count_of(output: str) -> int:
    found = re.findall(r'"n": (\d+)', output)
    if not found:
        raise BenchError(f"no count in the output of cdc sql:\n{output[-1000:]}")
    return int(found[-1])


def drain(config: Path, work: Path, name: str) -> float:
    seconds, _ = follow.run_cdc(["drain", "--config", str(config)], work / f"{name}.log")
    return seconds


def tick_of(config: Path) -> int:
    """The pipeline's last consistent tick (cdc.ops.at_tick)."""
    from cdc import config as config_module
    from cdc.ops import at_tick

    found = at_tick.last_consistent_tick(config_module.load(config))
    if found is None:
        raise BenchError("the consumer has no finished batch after the drain")
    return found[0]


def measure(config: Path, engine: str, extra: list[str], reps: int, rows: int) -> dict[str, Any]:
    """reps runs of ``cdc sql QUERY --engine engine extra``: each wall time; the count checked."""
    command = follow.cdc_command(
        "sql", QUERY, "--config", str(config), "--format", "json", "--engine", engine, *extra,
        verbose=False,
    )  # fmt: skip
    samples = []
    for _ in range(reps):
        seconds, out = timed(command)
        if count_of(out) != rows:
            raise BenchError(f"cdc sql --engine {engine} {' '.join(extra)}: {out.strip()}")
        samples.append(seconds)
    return {"samples": samples, "median": statistics.median(samples), "best": min(samples)}


def floors(reps: int) -> dict[str, Any]:
    """An interpreter's start, and with the ``cdc`` command imported."""
    found = {}
    for name, code in (("python", "pass"), ("import cdc.cli", "import cdc.cli")):
        samples = [timed([sys.executable, "-c", code])[0] for _ in range(reps)]
        found[name] = {"samples": samples, "median": statistics.median(samples)}
    return found


def run(args: argparse.Namespace, admin: str, work: Path) -> dict[str, Any]:
    dsn = follow.database(admin, "bench_sql")
    progress(f"sql_bench: {args.rows:,} rows into {TABLE}, captured in json")
    follow.create_tables(dsn, [TABLE], args.rows)
    config = follow.write_pipeline(
        work / "pipeline.toml", dsn, work / "delta", [TABLE], {"spark.driver.memory": "2g"}
    )
    progress("sql_bench: cdc drain (the first batch)")
    first_drain = drain(config, work, "drain-1")
    first = tick_of(config)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "insert into t select g, 1, 0, 'late' from generate_series(%s::bigint, %s::bigint) g",
            (args.rows + 1, args.rows + 10),
        )
    progress("sql_bench: cdc drain (ten more rows)")
    drain(config, work, "drain-2")
    last = tick_of(config)
    modes = {
        "latest": ([], args.rows + 10),
        "--consistent": (["--consistent"], args.rows + 10),
        f"--at-tick {first}": (["--at-tick", str(first)], args.rows),
    }
    results: dict[str, dict[str, Any]] = {}
    for engine in ENGINES:
        reps = args.reps if engine == "datafusion" else args.spark_reps
        for mode, (extra, rows) in modes.items():
            progress(f"sql_bench: {engine}, {mode}: {reps} runs")
            results.setdefault(engine, {})[mode] = measure(config, engine, extra, reps, rows)
    return {
        "rows": args.rows,
        "drain_seconds": first_drain,
        "ticks": {"first": first, "last": last},
        "floors": floors(args.reps),
        "results": results,
    }


def markdown(facts: dict[str, Any]) -> str:
    r = facts["sql"]
    modes = list(next(iter(r["results"].values())))
    lines = [
        f'`cdc sql "{QUERY}"` on a table of {r["rows"]:,} rows (+10), wall time of the whole'
        " command (process start to exit), median (best) of the runs, seconds:",
        "",
        "| engine | " + " | ".join(modes) + " |",
        "|---|" + "---:|" * len(modes),
    ]
    for engine, found in r["results"].items():
        cells = [f"{found[m]['median']:.2f} ({found[m]['best']:.2f})" for m in modes]
        lines.append(f"| {engine} | " + " | ".join(cells) + " |")
    runs = {e: len(next(iter(f.values()))["samples"]) for e, f in r["results"].items()}
    fl = r["floors"]
    lines += [
        "",
        f"Runs: {', '.join(f'{n} on {e}' for e, n in runs.items())}. Floors: `python -c pass`"
        f" {fl['python']['median']:.2f} s, `python -c 'import cdc.cli'`"
        f" {fl['import cdc.cli']['median']:.2f} s. Goal: under {GOAL:.0f} s on datafusion.",
        f"Machine: {facts['machine'].get('cpus', '?')} CPUs; {facts.get('note', '')};"
        f" commit {str(facts['git'].get('commit'))[:10]}"
        f"{' (cdc/ modified)' if facts['git'].get('dirty') else ''}.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.sql_bench", description=__doc__.split("\n")[0])
    common_arguments(parser)
    parser.set_defaults(reps=5)
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of t (1,000,000)")
    parser.add_argument("--spark-reps", type=int, default=2, help="runs on Spark (2)")
    parser.add_argument("--markdown", type=Path, metavar="FILE", help="the table, in Markdown")
    parser.add_argument("--keep", type=Path, help="keep the work folder (logs, Delta) here")
    args = parser.parse_args(argv)
    check_args(parser, args)
    if args.quick:
        args.rows, args.reps, args.spark_reps = 20_000, 2, 1
    if args.rows <= 0 or args.spark_reps < 1:
        parser.error("--rows and --spark-reps must be positive")
    facts = run_facts(args)
    facts["note"] = follow.free_cpu_note()
    try:
        with (
            follow.tcp_cluster(args.pgbin, {}) as admin,
            follow.work_folder(args.keep, "bench-sql-") as work,
        ):
            facts["sql"] = run(args, admin, work)
    except BenchError as exc:
        print(f"bench.sql_bench: {exc}", file=sys.stderr)
        return 2
    text = markdown(facts)
    print(text, end="")
    if args.markdown:
        args.markdown.write_text(text, encoding="utf-8")
    if args.json:
        write_json_file(args.json, facts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
