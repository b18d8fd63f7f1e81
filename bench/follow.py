"""What the freshness benchmarks (bench.freshness, bench.snapshot_bench) share: a cluster on
local TCP, captured tables, the pipeline file, the ``cdc`` commands run as processes, a writer
process at a steady rate, and when each change became visible in Delta.

How visibility is measured (sound, and without touching the drain): every table has a column
``seq``, a number the writer gives each change, rising in commit order (one writer, one
transaction after the other). A batch holds every transaction up to its end tick, so once a
target's Delta version holds a row with ``seq >= s``, every change of that table up to ``s``
is in it (itself, or folded into a later change of the same row). The Delta log says, per
version, the highest ``seq`` in the files it adds (the file statistics, or the files
themselves when a writer kept no statistics) and the moment it became readable: the
modification time of its ``_delta_log/<version>.json``. The freshness of a change is that
moment, for the first version holding it, minus the time its commit returned to the writer.
Both clocks are this machine's wall clock. Changes are inserts and updates only (a delete
leaves no ``seq`` behind).

``BENCH_CDC_VERBOSE=1`` runs every ``cdc`` command with ``-v`` (full traces in its log).
"""

from __future__ import annotations

import bisect
import json
import math
import multiprocessing
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from bench.common import BenchError, cluster, progress
from cdc.pg import capture, install
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Queue

QUEUE = "bench"
TABLE_DDL = "create table {} (id bigint primary key, seq bigint not null, v int not null, pad text)"
PAD = "x" * 40
BATCH_LINE = re.compile(r"batch \d+ \(tick \d+\): \d+ events")


@contextmanager
def work_folder(keep: Path | None, prefix: str) -> Iterator[Path]:
    """The folder of a run's files (pipeline, logs, Delta tables): ``keep``, or a temporary one
    removed at the end."""
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield keep
        return
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        yield Path(tmp)


@contextmanager
def tcp_cluster(pgbin: Path, settings: dict[str, str], use_socket: bool = False) -> Iterator[str]:
    """A throwaway cluster (bench.common.cluster) that also listens on 127.0.0.1, as a source
    reached over the network is (JDBC needs it); yields the superuser DSN over TCP, or over
    the socket when ``use_socket``."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tcp = {"listen_addresses": "127.0.0.1", "port": str(port), **settings}
    with cluster(pgbin, tcp) as socket_dsn:
        if use_socket:
            yield make_conninfo(socket_dsn, port=port)
        else:
            yield make_conninfo(socket_dsn, host="127.0.0.1", port=port)


def database(admin_dsn: str, name: str) -> str:
    """A new database with cdc installed, its queue and the drain's consumer."""
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("create database {}").format(sql.Identifier(name)))
    dsn = make_conninfo(admin_dsn, dbname=name)
    install.install(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        Queue(conn, QUEUE).create()
        Consumer(conn, QUEUE, "delta").register()
    return dsn


def create_tables(dsn: str, tables: Sequence[str], keys: int, attach: bool = True) -> None:
    """Tables of (id, seq, v, pad), captured in json, with rows 1..keys (seq 0) inserted after
    the capture: their events create the targets."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for t in tables:
            conn.execute(sql.SQL(TABLE_DDL).format(sql.Identifier(t)))
            if attach:
                capture.attach(conn, f"public.{t}", CaptureOptions(queue=QUEUE))
            conn.execute(
                sql.SQL(
                    "insert into {} select g, 0, 0, %s from generate_series(1, %s::int) g"
                ).format(sql.Identifier(t)),
                (PAD, keys),
            )


def write_pipeline(path: Path, dsn: str, root: Path, tables: Sequence[str], spark: dict) -> Path:
    """The pipeline file: each table mirrored to the target of its name under ``root``."""

    def toml(value: object) -> str:
        return json.dumps(value)  # a JSON string or number is a TOML one

    lines = [
        "[source]",
        f"dsn = {toml(dsn)}",
        f"queue = {toml(QUEUE)}",
        'consumer = "delta"',
        "",
        "[target]",
        f"path = {toml(str(root))}",
        "",
    ]
    for t in tables:
        lines += ["[[tables]]", f"source = {toml('public.' + t)}", f"target = {toml(t)}", ""]
    if spark:
        lines += ["[spark]", *(f"{toml(k)} = {toml(v)}" for k, v in spark.items()), ""]
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


VERBOSE = os.environ.get("BENCH_CDC_VERBOSE") == "1"  # -v for every cdc command (full traces)


def cdc_command(*args: str, verbose: bool = VERBOSE) -> list[str]:
    return [sys.executable, "-m", "cdc.cli", *(["-v"] if verbose else []), *args]


class CdcProcess:
    """A ``cdc`` command running in its own process (its own Spark session), output to a log
    file; ``stop`` sends SIGTERM (the drain stops between batches) and waits."""

    def __init__(self, args: Sequence[str], log: Path, command: list[str] | None = None) -> None:
        self.log = log
        self._out = log.open("wb")
        # -v: the drain logs each batch (BATCH_LINE) at DEBUG; command: another program that
        # logs its batches alike (bench.textbook_drain)
        command = command or cdc_command(*args, verbose=True)
        self.proc = subprocess.Popen(command, stdout=self._out, stderr=subprocess.STDOUT)

    def check_running(self) -> None:
        if self.proc.poll() is not None:
            raise BenchError(f"{self.log.name} exited ({self.proc.returncode}):\n{self.tail()}")

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:]

    def stop(self, timeout: float = 300) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._out.close()

    def batches(self) -> int:
        """Batches the drain has logged so far."""
        return len(BATCH_LINE.findall(self.log.read_text(errors="replace")))


def run_cdc(args: Sequence[str], log: Path) -> tuple[float, str]:
    """Runs a ``cdc`` command to its end: (wall seconds, its output); BenchError if it fails."""
    started = time.monotonic()
    proc = subprocess.run(cdc_command(*args), capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    log.write_text(proc.stdout + proc.stderr, encoding="utf-8")
    if proc.returncode != 0:
        raise BenchError(f"cdc {' '.join(args)} failed:\n{(proc.stdout + proc.stderr)[-3000:]}")
    return seconds, proc.stdout


# --- the writer -------------------------------------------------------------------------------


def _write(
    dsn: str,
    tables: list[str],
    keys: int,
    rate: float,
    seconds: float | None,
    first_seq: int,
    out: str,
    stop: Any,
) -> None:
    """The writer process: ``rate`` changes/s over ``tables`` (half updates of rows 1..keys,
    half inserts of new rows), one transaction every 50 ms, until ``seconds`` pass or ``stop``
    is set; writes [(table index, seq, commit time)] and its pace to ``out`` (JSON)."""
    rng = random.Random(first_seq)
    period = 0.05
    per_tx = rate * period
    owed = 0.0
    seq = first_seq
    changes: list[tuple[int, int, float]] = []
    inserts = [
        sql.SQL("insert into {} values (%s, %s, 0, %s)").format(sql.Identifier(t)) for t in tables
    ]
    updates = [
        sql.SQL("update {} set seq = %s, v = v + 1 where id = %s").format(sql.Identifier(t))
        for t in tables
    ]
    late = 0
    with psycopg.connect(dsn, autocommit=True) as conn:
        started = time.monotonic()
        deadline = started + seconds if seconds is not None else math.inf
        slot = started
        while time.monotonic() < deadline and not stop.is_set():
            owed += per_tx
            count, owed = int(owed), owed - int(owed)
            if count:
                done = []
                with conn.transaction():
                    for _ in range(count):
                        i = rng.randrange(len(tables))
                        if rng.random() < 0.5:
                            conn.execute(updates[i], (seq, rng.randint(1, keys)))
                        else:
                            conn.execute(inserts[i], (keys + seq, seq, PAD))
                        done.append((i, seq))
                        seq += 1
                committed = time.time()
                changes.extend((i, s, committed) for i, s in done)
            slot += period
            pause = slot - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            else:
                late += 1
        elapsed = time.monotonic() - started
    Path(out).write_text(
        json.dumps({"changes": changes, "seconds": elapsed, "late_slots": late}), encoding="utf-8"
    )


class Writer:
    """The writer in its own process (``_write``); ``result()`` waits for it."""

    def __init__(
        self,
        dsn: str,
        tables: Sequence[str],
        keys: int,
        rate: float,
        seconds: float | None,
        first_seq: int,
        out: Path,
    ) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.stop_event = ctx.Event()
        self.out = out
        self.proc = ctx.Process(
            target=_write,
            args=(dsn, list(tables), keys, rate, seconds, first_seq, str(out), self.stop_event),
        )
        self.proc.start()

    def stop(self) -> None:
        self.stop_event.set()

    def result(self) -> dict[str, Any]:
        self.proc.join()
        if self.proc.exitcode != 0:
            raise BenchError(f"the writer failed (exit code {self.proc.exitcode})")
        found = json.loads(self.out.read_text(encoding="utf-8"))
        found["rate"] = len(found["changes"]) / found["seconds"] if found["seconds"] else 0.0
        found["last_seq"] = max((s for _, s, _ in found["changes"]), default=0)
        return found


# --- visibility in Delta ---------------------------------------------------------------------


class DeltaLog:
    """One target's Delta log, read as it grows: per version, when it became readable and the
    highest ``seq`` the table holds from then on (see the module's docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.times: list[float] = []  # wall clock, per version
        self.top: list[int] = []  # highest seq so far, per version
        self.column = "seq"

    def refresh(self) -> None:
        log = self.path / "_delta_log"
        while True:
            entry = log / f"{len(self.times):020d}.json"
            try:
                stat = entry.stat()
                lines = entry.read_text(encoding="utf-8").splitlines()
            except FileNotFoundError:
                return
            actions = [json.loads(line) for line in lines if line.strip()]
            for action in actions:
                if "metaData" in action:
                    self._column_of(action["metaData"])
            top = self.top[-1] if self.top else -1
            for action in actions:
                if "add" in action:
                    top = max(top, self._max_seq(action["add"]))
            self.times.append(stat.st_mtime_ns / 1e9)
            self.top.append(top)

    def _column_of(self, meta: dict[str, Any]) -> None:
        """The name ``seq`` has in the files: its physical name under column mapping."""
        for field in json.loads(meta["schemaString"])["fields"]:
            if field["name"] == "seq":
                self.column = field.get("metadata", {}).get(
                    "delta.columnMapping.physicalName", "seq"
                )

    def _max_seq(self, add: dict[str, Any]) -> int:
        stats = json.loads(add.get("stats") or "{}")
        if self.column in stats.get("maxValues", {}):
            return int(stats["maxValues"][self.column])
        if stats.get("numRecords") == 0:
            return -1
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        file = unquote(add["path"]).removeprefix("file:")
        path = file if file.startswith("/") else self.path / file
        column = pq.read_table(path, columns=[self.column]).column(self.column)
        top = pc.max(column).as_py()
        return -1 if top is None else int(top)

    @property
    def exists(self) -> bool:
        """The table holds rows (a target created empty does not count)."""
        return bool(self.top) and self.top[-1] >= 0

    def seen_at(self, seq: int) -> float | None:
        """When the change numbered ``seq`` became readable; None while it is not."""
        i = bisect.bisect_left(self.top, seq)
        return self.times[i] if i < len(self.times) else None


def wait_for(what: str, done: Any, timeout: float, watch: Sequence[CdcProcess] = ()) -> None:
    """Polls ``done()`` every 0.5 s, with a progress line every 15 s; BenchError on timeout or
    when a watched process has exited."""
    started = time.monotonic()
    said = started
    while not done():
        for proc in watch:
            proc.check_running()
        now = time.monotonic()
        if now - started > timeout:
            raise BenchError(f"timed out after {timeout:.0f} s waiting for {what}")
        if now - said >= 15:
            progress(f"  ... still waiting for {what} ({now - started:.0f} s)")
            said = now
        time.sleep(0.5)


def latencies(
    changes: list, logs: Sequence[DeltaLog], since: float = -math.inf, until: float = math.inf
) -> tuple[list[float], int]:
    """The freshness of each change committed in [since, until] (wall clock), and how many of
    them are not visible yet."""
    found: list[float] = []
    missing = 0
    for table, seq, committed in changes:
        if not since <= committed <= until:
            continue
        seen = logs[table].seen_at(seq)
        if seen is None:
            missing += 1
        else:
            found.append(max(0.0, seen - committed))
    return found, missing


def all_visible(changes: list, logs: Sequence[DeltaLog]) -> bool:
    for log in logs:
        log.refresh()
    return latencies(changes, logs)[1] == 0


def summary(values: list[float]) -> dict[str, float | int | None]:
    """Count, p50, p99 (nearest rank) and max, in seconds."""
    ordered = sorted(values)

    def rank(p: float) -> float | None:
        return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)] if ordered else None

    return {"n": len(ordered), "p50": rank(50), "p99": rank(99), "max": rank(100)}


def free_cpu_note() -> str:
    load = os.getloadavg()[0]
    return f"load average {load:.2f} on {os.cpu_count()} CPUs before the run"
