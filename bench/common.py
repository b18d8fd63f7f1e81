"""What the three benchmarks share: the throwaway cluster, the facts every run records
(machine, server settings, git commit), progress lines, the common options and the JSON file.

Each benchmark (queue_bench, trigger_bench, drain_bench) imports from here and from nowhere
else in bench/; nothing here measures anything.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

from tests.support import servers

__all__ = [
    "DEFAULT_PGBIN",
    "INSTALL_HINT",
    "BenchError",
    "backend_cpu_ns",
    "check_args",
    "cluster",
    "common_arguments",
    "debian_pgq_control",
    "git_state",
    "machine_info",
    "progress",
    "run_facts",
    "server",
    "server_info",
    "write_json",
]

DEFAULT_PGBIN = Path("/usr/lib/postgresql/15/bin")
INSTALL_HINT = "apt-get install postgresql-15 postgresql-15-pgq3"
REPORTED_SETTINGS = (
    "fsync",
    "synchronous_commit",
    "full_page_writes",
    "wal_level",
    "shared_buffers",
    "work_mem",
    "max_wal_size",
    "checkpoint_timeout",
    "jit",
    "autovacuum",
)


class BenchError(Exception):
    """A precondition failed; the message says what to do."""


@contextmanager
def cluster(pgbin: Path, settings: dict[str, str]) -> Iterator[str]:
    """A throwaway cluster (tests/support/servers.py), with its errors as BenchError."""
    try:
        with servers.cluster(pgbin, settings) as dsn:
            yield dsn
    except servers.ClusterError as exc:
        raise BenchError(f"{exc}: {INSTALL_HINT}") from exc


@contextmanager
def server(pgbin: Path, settings: dict[str, str], facts: dict[str, Any]) -> Iterator[str]:
    """cluster(), with its version and settings recorded in facts["server"]."""
    with cluster(pgbin, settings) as dsn:
        with psycopg.connect(dsn) as conn:
            facts["server"] = server_info(conn)
        yield dsn


def debian_pgq_control(pgbin: Path) -> Path | None:
    """Where Debian's postgresql-NN-pgq3 puts pgq.control for this bin dir, if Debian-laid-out."""
    if pgbin.name == "bin" and pgbin.parent.parent == Path("/usr/lib/postgresql"):
        return Path("/usr/share/postgresql") / pgbin.parent.name / "extension" / "pgq.control"
    return None


def backend_cpu_ns(pid: int) -> int | None:
    """CPU time a server process has used so far (Linux schedstat), None if unreadable."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def server_info(conn: psycopg.Connection) -> tuple[str, dict[str, str]]:
    version = conn.execute("select version()").fetchone()
    rows = conn.execute(
        "select name, setting, unit from pg_settings where name = any(%s) order by name",
        (list(REPORTED_SETTINGS),),
    ).fetchall()
    settings = {name: _with_unit(setting, unit) for name, setting, unit in rows}
    return (version[0] if version else "?"), settings


def _with_unit(setting: str, unit: str | None) -> str:
    if unit == "8kB":
        return f"{int(setting) * 8 // 1024}MB"
    if unit in ("kB", "MB", "s", "ms", "min"):
        return f"{setting}{unit}"
    return setting


def machine_info() -> dict[str, Any]:
    model = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = None
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        mem_gb = round(pages * size / 2**30, 1)
    except (ValueError, OSError):
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "memory_gb": mem_gb,
        "os": platform.platform(),
        "python": platform.python_version(),
        "psycopg": psycopg.__version__,
    }


def run_facts(args: argparse.Namespace) -> dict[str, Any]:
    """What a run records before it measures: its options, the machine, the commit."""
    return {
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "machine": machine_info(),
        "git": git_state(),
    }


def git_state() -> dict[str, Any]:
    """The commit the engine's SQL comes from, and whether cdc/ differs from it."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True
        )
        diff = subprocess.run(
            ["git", "-C", str(root), "diff", "--quiet", "HEAD", "--", "cdc"],
            capture_output=True,
        )
    except OSError:
        return {"commit": None, "dirty": None}
    commit = head.stdout.strip() if head.returncode == 0 else None
    return {"commit": commit, "dirty": diff.returncode == 1 if commit else None}


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def common_arguments(parser: argparse.ArgumentParser, reps: bool = True) -> None:
    """The options every benchmark takes: --quick, --reps, --pgbin, --json, --plot."""
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    if reps:
        parser.add_argument("--reps", type=int, default=3, help="samples per measure (default 3)")
    parser.add_argument(
        "--pgbin",
        type=Path,
        default=DEFAULT_PGBIN,
        help=f"PostgreSQL server binaries (default {DEFAULT_PGBIN})",
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the results here")
    parser.add_argument("--plot", type=Path, metavar="FILE", help="write a PNG chart here")


def check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Checks shared by the benchmarks, before anything runs."""
    if getattr(args, "reps", 1) < 1:
        parser.error("--reps must be 1 or more")
    # The installer logs the server's notices (e.g. "already exists, skipping") as warnings.
    logging.getLogger("cdc.install").setLevel(logging.ERROR)
    if args.plot:
        try:
            import matplotlib  # noqa: F401  (checked before the run, used after it)
        except ImportError:
            parser.error('--plot needs matplotlib: .venv/bin/pip install -e ".[bench]"')


def write_json(path: Path, facts: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(facts, indent=2) + "\n", encoding="utf-8")


def publish(
    facts: dict[str, Any],
    args: argparse.Namespace,
    report: Callable[[dict[str, Any]], None],
    plot: Callable[[dict[str, Any], Path], None],
) -> int:
    """A finished run's end: its report printed, its facts to --json and its chart to --plot
    when asked; returns the exit code (0)."""
    report(facts)
    if args.json:
        write_json(args.json, facts)
    if args.plot:
        plot(facts, args.plot)
    return 0
