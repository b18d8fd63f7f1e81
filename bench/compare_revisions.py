"""The drain bench's throughput measure for two git revisions, side by side on this machine.

Run from the repository root::

    .venv/bin/python -m bench.compare_revisions 49e28ad HEAD --events 20000
    .venv/bin/python -m bench.compare_revisions HEAD . --rounds 3   # HEAD against the checkout

Each revision is checked out in its own temporary git worktree (``git worktree add
--detach``; removed at the end) and measured by its own ``python -m bench.drain_bench
--measures throughput`` with this interpreter and ``PYTHONPATH`` set to that worktree, so
each side runs its own code, SQL and benchmark whatever its layout. ``.`` names the current
checkout as it is (uncommitted changes included). Runs alternate A, B, A, B, ... so that
both sides see the same machine load; shown: events/s of each run (cold: the first drain in a
fresh Spark session, warm: the second), the medians and the ratio B / A of the medians.
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

from bench.common import DEFAULT_PGBIN, BenchError, progress

ROOT = Path(__file__).resolve().parent.parent
CURRENT = "."
PHASES = ("cold", "warm")


@dataclass
class Side:
    """One revision: where its tree is, and events/s per run and phase."""

    label: str
    rev: str
    tree: Path
    runs: dict[str, list[float]] = field(default_factory=lambda: {p: [] for p in PHASES})

    def median(self, phase: str) -> float:
        return statistics.median(self.runs[phase])


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
    e.g. ``cdc.triggers = "triggers"`` in older revisions) linked into place, so that
    PYTHONPATH alone imports them."""
    project = tomllib.loads((tree / "pyproject.toml").read_text(encoding="utf-8"))
    mapping = project.get("tool", {}).get("setuptools", {}).get("package-dir", {})
    for package, folder in mapping.items():
        if not package:
            continue
        link = tree.joinpath(*package.split("."))
        if not link.exists():
            link.symlink_to(tree / folder, target_is_directory=True)


def check_tree(tree: Path) -> None:
    """The tree's own cdc and bench are the ones its runs import."""
    code = "import cdc, bench.drain_bench; print(cdc.__file__)"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tree, env=_env(tree), capture_output=True, text=True
    )
    if out.returncode != 0:
        raise BenchError(f"{tree}: the drain bench does not import:\n{out.stderr.strip()}")
    if not Path(out.stdout.strip()).resolve().is_relative_to(tree.resolve()):
        raise BenchError(f"{tree}: cdc comes from {out.stdout.strip()}, not from the tree")


def _env(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree)}


def run_once(side: Side, args: argparse.Namespace, out: Path) -> None:
    """One drain bench run (throughput only) of the side; its events/s per phase."""
    cmd = [
        sys.executable,
        "-m",
        "bench.drain_bench",
        "--measures",
        "throughput",
        "--events",
        str(args.events),
        "--max-events",
        str(args.max_events),
        "--pgbin",
        str(args.pgbin),
        "--json",
        str(out),
    ]
    done = subprocess.run(cmd, cwd=side.tree, env=_env(side.tree), capture_output=True, text=True)
    if done.returncode != 0:
        raise BenchError(f"{side.label} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    facts = json.loads(out.read_text(encoding="utf-8"))["throughput"]
    for phase in PHASES:
        side.runs[phase].append(facts[phase]["events_per_s"])
    progress(
        f"{side.label}: "
        + ", ".join(f"{p} {side.runs[p][-1]:,.0f} ev/s" for p in PHASES)
        + f" ({facts['events']:,} events)"
    )


def report(a: Side, b: Side) -> str:
    lines = [f"A = {a.rev}, B = {b.rev}; events/s per run, in the order they ran"]
    for phase in PHASES:
        pairs = zip(a.runs[phase], b.runs[phase], strict=True)
        runs = [f"A {x:,.0f}  B {y:,.0f}" for x, y in pairs]
        lines.append(f"  {phase}: " + " | ".join(runs))
    lines.append("medians:")
    for phase in PHASES:
        ma, mb = a.median(phase), b.median(phase)
        lines.append(f"  {phase}: A {ma:,.0f}  B {mb:,.0f}  B/A {mb / ma:.3f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.compare_revisions", description=__doc__.splitlines()[0]
    )
    parser.add_argument("rev_a", help="the revision before (a git revision, or . )")
    parser.add_argument("rev_b", nargs="?", default=CURRENT, help="the revision after (default .)")
    parser.add_argument("--events", type=int, default=20_000, help="backlog size (default 20000)")
    parser.add_argument("--max-events", type=int, default=2_000_000, help="events per batch")
    parser.add_argument("--rounds", type=int, default=2, help="runs per revision (default 2)")
    parser.add_argument("--pgbin", type=Path, default=DEFAULT_PGBIN)
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the runs here")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be 1 or more")
    base = Path(tempfile.mkdtemp(prefix="cdc-compare-"))
    try:
        with worktree(args.rev_a, base) as tree_a, worktree(args.rev_b, base) as tree_b:
            a, b = Side("A", args.rev_a, tree_a), Side("B", args.rev_b, tree_b)
            for side in (a, b):
                check_tree(side.tree)
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
        runs = {s.label: {"rev": s.rev, "events_per_s": s.runs} for s in (a, b)}
        args.json.write_text(json.dumps(runs, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
