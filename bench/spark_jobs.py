"""Where a Spark application spent its jobs, from its event log (``spark.eventLog.enabled``;
bench/drain_vs_textbook.py ``--event-log DIR`` writes one per drain process).

Run from the repository root::

    .venv/bin/python -m bench.spark_jobs DIR/eventlog_v2_app-...   # one application's jobs
    .venv/bin/python -m bench.spark_jobs DIR/*             # each application in turn

Per application: the seconds of its jobs summed per what started them (the job's
description, as Delta sets it: "MERGE operation - scanning files for matches"; else the call
site, for a Python job the PySpark call), and with ``--jobs`` every job in order with its wall
seconds and tasks. Jobs of concurrent threads overlap: the sums are
job-seconds, not wall time.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Job:
    job_id: int
    started_ms: int
    site: str
    tasks: int
    ended_ms: int | None = None

    @property
    def seconds(self) -> float:
        return 0.0 if self.ended_ms is None else (self.ended_ms - self.started_ms) / 1000


def lines(path: Path) -> Iterator[str]:
    """The lines of an event log: a file, or a folder of rolled files (``events_<n>_...``,
    Spark's default), uncompressed (``spark.eventLog.compress = false``)."""
    files = [path]
    if path.is_dir():
        files = sorted(path.glob("events_*"), key=lambda p: int(p.name.split("_")[1]))
    for file in files:
        if file.suffix in (".zstd", ".lz4", ".snappy", ".lzf"):
            raise SystemExit(f"{file}: compressed; set spark.eventLog.compress = false")
        with file.open(encoding="utf-8") as log:
            yield from log


def read(path: Path) -> tuple[str, list[Job]]:
    """An event log's application name and its jobs."""
    name, jobs = path.name, {}
    for line in lines(path):
        event = json.loads(line)
        kind = event.get("Event")
        if kind == "SparkListenerApplicationStart":
            name = event.get("App Name", name)
        elif kind == "SparkListenerJobStart":
            stages = event.get("Stage Infos") or [{}]
            first = min(stages, key=lambda s: s.get("Stage ID", 0))
            props = event.get("Properties") or {}
            site = (
                props.get("spark.job.description")
                or props.get("callSite.short")
                or first.get("Stage Name", "?")
            )
            jobs[event["Job ID"]] = Job(
                event["Job ID"],
                event["Submission Time"],
                site,
                sum(s.get("Number of Tasks", 0) for s in stages),
            )
        elif kind == "SparkListenerJobEnd" and event["Job ID"] in jobs:
            jobs[event["Job ID"]].ended_ms = event["Completion Time"]
    return name, sorted(jobs.values(), key=lambda j: j.job_id)


def report(path: Path, top: int) -> None:
    name, jobs = read(path)
    total = sum(j.seconds for j in jobs)
    print(f"{name} ({path.name}): {len(jobs)} jobs, {total:.1f} job-seconds")
    by_site: dict[str, list[float]] = defaultdict(list)
    for job in jobs:
        by_site[job.site].append(job.seconds)
    ranked = sorted(by_site.items(), key=lambda kv: -sum(kv[1]))
    for site, seconds in ranked[:top]:
        print(f"  {sum(seconds):7.2f} s  {len(seconds):4d} jobs  {site}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logs", nargs="+", type=Path, help="event logs (files or folders)")
    parser.add_argument("--top", type=int, default=15, help="call sites listed (15)")
    parser.add_argument("--jobs", action="store_true", help="also every job in order")
    args = parser.parse_args(argv)
    for path in args.logs:
        report(path, args.top)
        if args.jobs:
            for job in read(path)[1]:
                print(
                    f"    job {job.job_id:4d} {job.seconds:7.2f} s {job.tasks:4d} tasks {job.site}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
