"""A benchmark's figures for two git revisions, side by side on this machine.

Run from the repository root::

    .venv/bin/python -m bench.compare_revisions 49e28ad HEAD --events 20000
    .venv/bin/python -m bench.compare_revisions HEAD . --rounds 3   # HEAD against the checkout
    .venv/bin/python -m bench.compare_revisions 28f62a1 HEAD --events 1000000 \\
        --drain memory_budget=8GiB                                  # the batch held on the driver
    .venv/bin/python -m bench.compare_revisions 28f62a1 HEAD --bench many_tables --reps 5

Each revision is checked out in its own temporary git worktree (``git worktree add
--detach``; removed at the end) and measured by its own benchmark (``bench.drain_bench
--measures throughput``, or ``bench.many_tables``) with this interpreter and ``PYTHONPATH``
set to that worktree, so each side runs its own code, SQL and benchmark whatever its layout
(folders an install maps into the package, such as ``triggers/`` into ``cdc.triggers``, are
linked into place). ``.`` names the current checkout as it is (uncommitted changes
included). Runs alternate A, B, A, B, ... so that both sides see the same machine load.

``--drain KEY=VALUE`` sets a ``[drain]`` setting of every pipeline either benchmark builds,
on both sides alike, without either revision's benchmark having to know the option: each run
goes through a small launcher (``LAUNCHER``) that wraps ``cdc.config.parse``. The launcher
also records, per batch, how it was read (``copy``, ``spilled``), which route each table
took (``BatchStats.routes``, or the targets written on the driver where a revision has no
routes), so a comparison says which engine it measured, and the batch's seconds and phases
(``BatchStats.seconds``: read, each table's wall time, finish; ``BatchStats.phases``).

Shown: seconds of each run per scenario (drain: cold, the first drain in a fresh Spark
session, and warm, the second; many_tables: the median batch per count of tables touched),
the medians, the ratio B / A of the medians (above 1: B is slower) and the spread, the
largest (max - min) / median of either side's runs, to judge the ratio against.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import DEFAULT_PGBIN, BenchError, progress

ROOT = Path(__file__).resolve().parent.parent
CURRENT = "."
BENCHES = ("drain", "many_tables")
PHASES = ("cold", "warm")  # the drain bench's two drains of one backlog

# Runs a revision's benchmark with [drain] settings added to every pipeline it parses, and
# writes what each batch's BatchStats says of its route. Only names that every revision since
# the drain's memory budget has: cdc.config.parse, Drain.run(on_batch=...), BatchStats.
LAUNCHER = """
import importlib, json, sys
from pathlib import Path
import cdc.config
from cdc.pipeline import drain

routes_file, settings, module, *argv = sys.argv[1:]
settings = json.loads(settings)
parse = cdc.config.parse

def parse_with_settings(raw, *args, **kwargs):
    if settings:
        raw = {**raw, "drain": {**raw.get("drain", {}), **settings}}
    return parse(raw, *args, **kwargs)

cdc.config.parse = parse_with_settings
batches = []
run = drain.Drain.run

def run_recording(self, *args, on_batch=None, **kwargs):
    def seen(stats):
        routes = dict(getattr(stats, "routes", {}) or {})
        if not routes:  # before the planner: the targets written on the driver
            driver = getattr(stats, "on_driver", set())
            touched = [t for t, n in stats.per_table.items() if n]
            routes = {t: "driver" if t in driver else "spark" for t in touched}
        if stats.events:
            batches.append({
                "consumer": self.pipeline.source.consumer,
                "events": stats.events,
                "read": getattr(stats, "read", ""),
                "routes": routes,
                "seconds": dict(stats.seconds),
                "phases": dict(stats.phases),
            })
        if on_batch is not None:
            on_batch(stats)
    return run(self, *args, on_batch=seen, **kwargs)

drain.Drain.run = run_recording
code = importlib.import_module(module).main(argv)
Path(routes_file).write_text(json.dumps(batches, indent=1), encoding="utf-8")
sys.exit(code)
"""


@dataclass
class Side:
    """One revision: where its tree is, seconds per run and scenario, and each run's
    phases and routes."""

    label: str
    rev: str
    tree: Path
    seconds: dict[str, list[float]] = field(default_factory=dict)
    details: list[dict[str, Any]] = field(default_factory=list)

    def median(self, scenario: str) -> float:
        return statistics.median(self.seconds[scenario])

    def spread(self, scenario: str) -> float:
        runs = self.seconds[scenario]
        return (max(runs) - min(runs)) / self.median(scenario)


def _git(*args: str) -> str:
    out = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise BenchError(f"git {' '.join(args)}: {out.stderr.strip()}")
    return out.stdout.strip()


@contextmanager
def worktree(rev: str, base: Path) -> Iterator[Path]:
    """The revision checked out in a detached worktree under base, removed on exit."""
    if rev == CURRENT:
        yield ROOT
        return
    commit = _git("rev-parse", "--verify", f"{rev}^{{commit}}")
    path = base / commit[:12]
    _git("worktree", "add", "--detach", str(path), commit)
    try:
        link_package_dirs(path)
        yield path
    finally:
        _git("worktree", "remove", "--force", str(path))


def link_package_dirs(tree: Path) -> None:
    """Subpackages that an install maps from elsewhere (``[tool.setuptools.package-dir]``,
    e.g. ``cdc.triggers = "triggers"``) linked into place, so that PYTHONPATH alone imports
    them."""
    project = tomllib.loads((tree / "pyproject.toml").read_text(encoding="utf-8"))
    mapping = project.get("tool", {}).get("setuptools", {}).get("package-dir", {})
    for package, folder in mapping.items():
        if not package:
            continue
        link = tree.joinpath(*package.split("."))
        if not link.exists():
            link.symlink_to(tree / folder, target_is_directory=True)


def check_tree(tree: Path, module: str) -> None:
    """The tree's own cdc and benchmark are the ones its runs import."""
    code = f"import cdc, {module}; print(cdc.__file__)"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tree, env=_env(tree), capture_output=True, text=True
    )
    if out.returncode != 0:
        raise BenchError(f"{tree}: {module} does not import:\n{out.stderr.strip()}")
    if not Path(out.stdout.strip()).resolve().is_relative_to(tree.resolve()):
        raise BenchError(f"{tree}: cdc comes from {out.stdout.strip()}, not from the tree")


def _env(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree)}


def bench_command(args: argparse.Namespace, out: Path) -> tuple[str, list[str]]:
    """The benchmark's module and its arguments."""
    common = ["--pgbin", str(args.pgbin), "--json", str(out)]
    if args.bench == "drain":
        sizes = ["--events", str(args.events), "--max-events", str(args.max_events)]
        return "bench.drain_bench", ["--measures", "throughput", *sizes, *common]
    sizes = ["--sizes", args.sizes, "--reps", str(args.reps)]
    return "bench.many_tables", [*sizes, *common]


def scenarios(bench: str, facts: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each scenario's seconds and phases from one run's JSON."""
    if bench == "drain":
        thr = facts["throughput"]
        return {p: {"seconds": thr[p]["seconds"], "phases": thr[p]["phases"]} for p in PHASES}
    found = {f"{s['tables']} tables": s for s in facts["sizes"]}
    if "untouched" in facts:
        found[f"1 of {facts['untouched']['configured']}"] = facts["untouched"]
    out = {}
    for name, size in found.items():
        median = min(size["samples"], key=lambda s: abs(s["seconds"] - size["seconds"]))
        phases = {"read": median["read"], **median["phases"], "finish": median["finish"]}
        out[name] = {"seconds": size["seconds"], "phases": phases}
    return out


def run_once(side: Side, args: argparse.Namespace, out: Path) -> None:
    """One benchmark run of the side; its seconds per scenario, phases and routes."""
    routes = out.with_suffix(".routes.json")
    module, argv = bench_command(args, out)
    settings = json.dumps(dict(args.drain))
    cmd = [sys.executable, "-c", LAUNCHER, str(routes), settings, module, *argv]
    done = subprocess.run(cmd, cwd=side.tree, env=_env(side.tree), capture_output=True, text=True)
    if done.returncode != 0:
        raise BenchError(f"{side.label} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    found = scenarios(args.bench, json.loads(out.read_text(encoding="utf-8")))
    for name, facts in found.items():
        side.seconds.setdefault(name, []).append(facts["seconds"])
    batches = json.loads(routes.read_text(encoding="utf-8"))
    side.details.append({"scenarios": found, "batches": batches})
    shown = ", ".join(f"{n} {f['seconds']:.2f} s" for n, f in found.items())
    progress(f"{side.label}: {shown}; routes: {route_summary(batches)}")


def route_summary(batches: list[dict[str, Any]]) -> str:
    """The reads and routes of a run's batches, counted per consumer (drain: cold, warm)."""
    counts: dict[str, dict[str, int]] = {}
    for batch in batches:
        of_consumer = counts.setdefault(batch["consumer"], {})
        for route in batch["routes"].values():
            key = f"{batch['read'] or '?'} {route}"
            of_consumer[key] = of_consumer.get(key, 0) + 1
    return "; ".join(
        f"{consumer}: " + ", ".join(f"{k} x{n}" for k, n in sorted(found.items()))
        for consumer, found in counts.items()
    )


def report(a: Side, b: Side) -> str:
    lines = [f"A = {a.rev}, B = {b.rev}; seconds per run, in the order they ran"]
    for name in a.seconds:
        pairs = zip(a.seconds[name], b.seconds[name], strict=True)
        runs = [f"A {x:.2f}  B {y:.2f}" for x, y in pairs]
        lines.append(f"  {name}: " + " | ".join(runs))
    lines.append("medians (s), B / A, spread (largest (max - min) / median of either side):")
    for name in a.seconds:
        ma, mb = a.median(name), b.median(name)
        spread = max(a.spread(name), b.spread(name))
        lines.append(f"  {name}: A {ma:.2f}  B {mb:.2f}  B/A {mb / ma:.3f}  spread {spread:.0%}")
    for side in (a, b):
        for n, run in enumerate(side.details):
            phases = "; ".join(
                f"{name}: " + ", ".join(f"{p} {s:.2f}" for p, s in facts["phases"].items())
                for name, facts in run["scenarios"].items()
            )
            lines.append(f"  {side.label}{n} phases (s) {phases}")
            lines.append(f"  {side.label}{n} routes {route_summary(run['batches'])}")
    return "\n".join(lines)


def drain_setting(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r}: KEY=VALUE, e.g. memory_budget=8GiB")
    return key, value


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.compare_revisions", description=__doc__.splitlines()[0]
    )
    parser.add_argument("rev_a", help="the revision before (a git revision, or . )")
    parser.add_argument("rev_b", nargs="?", default=CURRENT, help="the revision after (default .)")
    parser.add_argument("--bench", choices=BENCHES, default="drain", help="default drain")
    parser.add_argument("--events", type=int, default=20_000, help="drain: backlog size")
    parser.add_argument("--max-events", type=int, default=2_000_000, help="drain: per batch")
    parser.add_argument("--sizes", default="1,20,100", help="many_tables: tables per batch")
    parser.add_argument("--reps", type=int, default=3, help="many_tables: batches per size")
    parser.add_argument("--rounds", type=int, default=2, help="runs per revision (default 2)")
    parser.add_argument(
        "--drain",
        type=drain_setting,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a [drain] setting for both sides, e.g. memory_budget=8GiB (repeatable)",
    )
    parser.add_argument("--pgbin", type=Path, default=DEFAULT_PGBIN)
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the runs here")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.reps < 1:
        parser.error("--rounds and --reps must be 1 or more")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    module = bench_command(args, Path("-"))[0]
    base = Path(tempfile.mkdtemp(prefix="cdc-compare-"))
    try:
        with worktree(args.rev_a, base) as tree_a, worktree(args.rev_b, base) as tree_b:
            a, b = Side("A", args.rev_a, tree_a), Side("B", args.rev_b, tree_b)
            for side in (a, b):
                check_tree(side.tree, module)
            for i in range(args.rounds):
                for side in (a, b):
                    run_once(side, args, base / f"{side.label}{i}.json")
    except BenchError as exc:
        print(f"compare_revisions: {exc}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(base, ignore_errors=True)
        subprocess.run(["git", "-C", str(ROOT), "worktree", "prune"], check=False)
    print(report(a, b))
    if args.json:
        runs = {s.label: {"rev": s.rev, "seconds": s.seconds, "runs": s.details} for s in (a, b)}
        facts = {"bench": args.bench, "drain": dict(args.drain), "sides": runs}
        args.json.write_text(json.dumps(facts, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
