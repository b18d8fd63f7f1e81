"""Queue engine benchmark: our pure SQL/PL/pgSQL engine (schema ``cdc``) against PgQ 3.5.

Run from the repository root::

    .venv/bin/python -m bench.queue_bench                 # full size, stock server settings
    .venv/bin/python -m bench.queue_bench --quick         # smoke run: small sizes
    .venv/bin/python -m bench.queue_bench --fast --json bench.json --plot docs/img/queue_bench.png

One run initialises and starts one throwaway PostgreSQL cluster from ``--pgbin`` (Debian's
``/usr/lib/postgresql/15/bin``) with two databases, ``bench_cdc`` (our engine, installed with
``cdc.pg.install``) and ``bench_pgq`` (``create extension pgq``, the Debian package
postgresql-15-pgq3), and stops and removes it at the end. Server settings are the ones initdb
writes; ``--fast`` adds fsync=off, synchronous_commit=off and full_page_writes=off, so that
commits cost no disk flush. The settings used are printed and stored with the results.

Measures, all in events per second, each taken ``--reps`` times with the engines alternating
which goes first; the table shows the median of the samples, the ratio ours / PgQ, and the
same ratio in server CPU time (the backend's on-CPU time from /proc/<pid>/schedstat), which
stays meaningful when other work shares the machine:

1. insert, one event per transaction: ``select X.insert_event(q, type, data)`` in autocommit
   over one connection from Python, and the same with the 7-argument form;
2. insert, many events in one transaction:
   ``select count(X.insert_event(q, 'I', data)) from generate_series(1, n)``, and the same
   with the 7-argument form (``data, null, null, null, null``);
3. read of one large batch (events inserted in transactions of 100,000, then a tick and
   ``next_batch``) through the chunked reader: ours ``cdc.open_batch_cursor`` then
   ``FETCH 5000`` until empty, PgQ ``pgq.get_batch_cursor(batch, name, 5000)`` then the same
   FETCH loop;
4. for reference, the same batch through ``get_batch_events``: rows brought to the client
   5000 at a time (a server-side cursor over the function), and ``count(*)`` on the server.

Events carry a 100-byte payload. A checkpoint runs before each sample, untimed. The batch is
read once, untimed, before the timed reads (the first read of fresh rows also sets their hint
bits). ``--explain`` adds EXPLAIN ANALYZE of both engines' batch queries; ``--plot`` needs
matplotlib (``.venv/bin/pip install matplotlib``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from bench.common import (
    INSTALL_HINT,
    BenchError,
    backend_cpu_ns,
    check_args,
    cluster,
    common_arguments,
    debian_pgq_control,
    git_state,
    machine_info,
    progress,
    server_info,
    write_json,
)
from cdc.pg import install
from tests.support import servers

# 100 bytes, JSON-like, as a row change would carry
PAYLOAD = (
    '{"op":"U","table":"public.orders","id":1234567,"status":"shipped","note":"'.ljust(98, "x")
    + '"}'
)
INSERT_QUEUE = "bench_insert"
READ_QUEUE = "bench_read"
CONSUMER = "bench"
CHUNK = 5000
LOAD_TX = 100_000  # events per transaction when filling the read batch


@dataclass(frozen=True)
class Sizes:
    single: int  # measure 1: transactions of one event
    bulk: int  # measure 2: events in one transaction
    batch: int  # measures 3 and 4: events in the batch


FULL = Sizes(single=5_000, bulk=100_000, batch=1_000_000)
QUICK = Sizes(single=500, bulk=10_000, batch=50_000)


# ---------------------------------------------------------------------------------------
# The engines


@dataclass
class Engine:
    """One queue engine in its own database, on one autocommit connection."""

    key: str  # "cdc" or "pgq": also its schema
    label: str
    conn: psycopg.Connection

    def call(self, func: str, nargs: int, star: bool = False) -> sql.Composed:
        """``select [* from] schema.func(%s, ...)``."""
        args = sql.SQL(", ").join([sql.Placeholder()] * nargs)
        head = sql.SQL("select * from ") if star else sql.SQL("select ")
        return head + sql.SQL("{}({})").format(sql.Identifier(self.key, func), args)

    def scalar(self, func: str, *args: object) -> Any:
        row = self.conn.execute(self.call(func, len(args)), args).fetchone()
        return None if row is None else row[0]

    def checkpoint(self) -> None:
        self.conn.execute("checkpoint")


def create_engines(admin_dsn: str) -> tuple[Engine, Engine]:
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        found = conn.execute("select 1 from pg_available_extensions where name = 'pgq'")
        if found.fetchone() is None:
            raise BenchError(f"the pgq extension is not available to this server: {INSTALL_HINT}")
        for db in ("bench_cdc", "bench_pgq"):
            conn.execute(sql.SQL("create database {}").format(sql.Identifier(db)))
    cdc_dsn = make_conninfo(admin_dsn, dbname="bench_cdc")
    pgq_dsn = make_conninfo(admin_dsn, dbname="bench_pgq")
    install.install(cdc_dsn)
    ours = Engine("cdc", "ours (cdc)", psycopg.connect(cdc_dsn, autocommit=True))
    pgq = Engine("pgq", "PgQ 3.5", psycopg.connect(pgq_dsn, autocommit=True))
    pgq.conn.execute("create extension pgq")
    for eng in (ours, pgq):
        eng.scalar("create_queue", INSERT_QUEUE)
        eng.scalar("create_queue", READ_QUEUE)
        eng.scalar("register_consumer", READ_QUEUE, CONSUMER)
    return ours, pgq


# ---------------------------------------------------------------------------------------
# What is timed. Each function returns the number of events it inserted or read; measure()
# takes the wall-clock time and the server backend's CPU time around it.


def insert_single(eng: Engine, n: int, extras: bool = False) -> int:
    """n transactions of one event; the 7-argument form with ``extras``."""
    query = eng.call("insert_event", 7 if extras else 3)
    params: tuple[str | None, ...] = (INSERT_QUEUE, "I", PAYLOAD)
    if extras:
        params += (None, None, None, None)
    execute = eng.conn.execute
    for _ in range(n):
        execute(query, params)
    return n


def insert_bulk(eng: Engine, n: int, queue: str = INSERT_QUEUE, extras: bool = False) -> int:
    """n events in one statement (so one transaction); the 7-argument form with ``extras``."""
    args = "%s, 'I', %s, null, null, null, null" if extras else "%s, 'I', %s"
    query = sql.SQL("select count({}({})) from generate_series(1, %s)").format(
        sql.Identifier(eng.key, "insert_event"), sql.SQL(args)
    )
    row = eng.conn.execute(query, (queue, PAYLOAD, n)).fetchone()
    return 0 if row is None else int(row[0])


def read_cursor(eng: Engine, batch_id: int) -> int:
    """The chunked batch reader: open the batch's cursor, FETCH 5000 until empty."""
    name = "bench_batch"
    conn = eng.conn
    fetch = sql.SQL("fetch {} from {}").format(sql.Literal(CHUNK), sql.Identifier(name))
    with conn.transaction():
        if eng.key == "cdc":
            conn.execute(eng.call("open_batch_cursor", 2), (batch_id, name))
            n = 0
        else:  # get_batch_cursor returns the first CHUNK rows itself
            first = conn.execute(
                eng.call("get_batch_cursor", 3, star=True), (batch_id, name, CHUNK)
            )
            n = len(first.fetchall())
        cur = conn.cursor()
        while rows := cur.execute(fetch).fetchall():
            n += len(rows)
        conn.execute(sql.SQL("close {}").format(sql.Identifier(name)))
    return n


def read_events_client(eng: Engine, batch_id: int) -> int:
    """get_batch_events, rows brought to the client 5000 at a time (server-side cursor)."""
    conn = eng.conn
    n = 0
    with conn.transaction(), conn.cursor(name="bench_events") as cur:
        cur.execute(eng.call("get_batch_events", 1, star=True), (batch_id,))
        while rows := cur.fetchmany(CHUNK):
            n += len(rows)
    return n


def read_events_server(eng: Engine, batch_id: int) -> int:
    """get_batch_events counted on the server: the engine's cost without the transfer."""
    query = sql.SQL("select count(*) from {}(%s)").format(
        sql.Identifier(eng.key, "get_batch_events")
    )
    row = eng.conn.execute(query, (batch_id,)).fetchone()
    return 0 if row is None else int(row[0])


# ---------------------------------------------------------------------------------------
# Running and reporting


@dataclass
class Measure:
    key: str
    title: str
    events: int
    seconds: dict[str, list[float]] = field(default_factory=dict)  # wall clock
    cpu_seconds: dict[str, list[float]] = field(default_factory=dict)  # server backend CPU

    def rate(self, engine: str) -> float:
        """Events per second at the median wall-clock time."""
        return self.events / statistics.median(self.seconds[engine])

    def best_rate(self, engine: str) -> float:
        return self.events / min(self.seconds[engine])

    def ratio(self) -> float:
        return self.rate("cdc") / self.rate("pgq")

    def cpu_ratio(self) -> float | None:
        """ours / PgQ in events per second of server CPU (medians): robust to a busy machine."""
        if not all(self.cpu_seconds.get(k) for k in ("cdc", "pgq")):
            return None
        return statistics.median(self.cpu_seconds["pgq"]) / statistics.median(
            self.cpu_seconds["cdc"]
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "title": self.title,
            "events": self.events,
            "seconds": self.seconds,
            "server_cpu_seconds": self.cpu_seconds,
            "median_events_per_s": {k: self.rate(k) for k in self.seconds},
            "best_events_per_s": {k: self.best_rate(k) for k in self.seconds},
            "ratio_ours_over_pgq": self.ratio(),
            "server_cpu_ratio_ours_over_pgq": self.cpu_ratio(),
        }


def measure(
    engines: tuple[Engine, Engine],
    reps: int,
    m: Measure,
    run: Callable[[Engine], int],
) -> Measure:
    for rep in range(reps):
        order = engines if rep % 2 == 0 else engines[::-1]
        for eng in order:
            eng.checkpoint()
            pid = eng.conn.info.backend_pid
            cpu0 = backend_cpu_ns(pid)
            t0 = time.perf_counter()
            n = run(eng)
            seconds = time.perf_counter() - t0
            cpu1 = backend_cpu_ns(pid)
            if n != m.events:
                raise BenchError(f"{eng.label}: {m.title}: {n} events, expected {m.events}")
            m.seconds.setdefault(eng.key, []).append(seconds)
            if cpu0 is not None and cpu1 is not None:
                m.cpu_seconds.setdefault(eng.key, []).append((cpu1 - cpu0) / 1e9)
            progress(f"  {m.key} rep {rep + 1} {eng.key}: {n / seconds:,.0f} ev/s")
    return m


def open_big_batch(eng: Engine, n: int) -> int:
    """Fill READ_QUEUE with n events (transactions of LOAD_TX), tick, open the batch."""
    t0 = time.perf_counter()
    left = n
    while left > 0:
        step = min(LOAD_TX, left)
        insert_bulk(eng, step, READ_QUEUE)
        left -= step
    eng.scalar("force_tick", READ_QUEUE)
    if eng.scalar("ticker", READ_QUEUE) is None:
        raise BenchError(f"{eng.label}: ticker made no tick after force_tick")
    batch_id = eng.scalar("next_batch", READ_QUEUE, CONSUMER)
    if batch_id is None:
        raise BenchError(f"{eng.label}: next_batch returned no batch")
    progress(
        f"  {eng.key}: {n:,} events loaded in {time.perf_counter() - t0:.1f}s, batch {batch_id}"
    )
    return int(batch_id)


def explain_batch(eng: Engine, batch_id: int) -> str:
    func = "_batch_sql" if eng.key == "cdc" else "batch_event_sql"
    text = eng.scalar(func, batch_id)
    rows = eng.conn.execute(b"explain (analyze, buffers) " + text.encode()).fetchall()
    return f"-- {eng.label}\n-- {text}\n" + "\n".join(r[0] for r in rows)


def format_table(measures: list[Measure]) -> str:
    head = ("measure", "events", "ours ev/s", "PgQ ev/s", "ours/PgQ", "server CPU ours/PgQ")
    rows = [head]
    for m in measures:
        cpu = m.cpu_ratio()
        rows.append(
            (
                m.title,
                f"{m.events:,}",
                f"{m.rate('cdc'):,.0f}",
                f"{m.rate('pgq'):,.0f}",
                f"{m.ratio():.2f}",
                "-" if cpu is None else f"{cpu:.2f}",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    return "\n".join([line(head), "  ".join("-" * w for w in widths), *map(line, rows[1:])])


def plot(measures: list[Measure], path: Path, subtitle: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # main() checks before the run
        raise SystemExit("--plot needs matplotlib: .venv/bin/pip install matplotlib") from exc
    ys = list(range(len(measures)))
    wall = [m.ratio() for m in measures]
    cpu = [m.cpu_ratio() or 0.0 for m in measures]
    fig, ax = plt.subplots(figsize=(9, 0.75 * len(measures) + 1.6))
    h = 0.38
    ax.barh([y - h / 2 for y in ys], wall, h, label="wall clock", color="#3b7dd8")
    ax.barh([y + h / 2 for y in ys], cpu, h, label="server CPU", color="#9ab8e6")
    for y, w, c in zip(ys, wall, cpu, strict=True):
        ax.text(w + 0.02, y - h / 2, f"{w:.2f}", va="center", fontsize=8)
        if c:
            ax.text(c + 0.02, y + h / 2, f"{c:.2f}", va="center", fontsize=8)
    ax.axvline(1.0, color="#444444", linewidth=1)
    ax.set_yticks(ys, [m.title for m in measures], fontsize=9)
    ax.invert_yaxis()
    ax.set_xlim(0, max([*wall, *cpu, 1.0]) * 1.15)
    ax.set_xlabel("events per second, ours / PgQ (median); above 1: ours is faster")
    ax.set_title(f"Queue engine: ours (cdc, PL/pgSQL) vs PgQ 3.5\n{subtitle}", fontsize=10)
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(args: argparse.Namespace) -> tuple[dict[str, Any], list[Measure]]:
    """Start the cluster, measure, stop it; returns the run's facts and the measures."""
    sizes = QUICK if args.quick else FULL
    settings = dict(servers.FAST) if args.fast else {}
    if not (args.pgbin / "pg_ctl").exists():
        raise BenchError(f"no PostgreSQL server binaries in {args.pgbin}: {INSTALL_HINT}")
    control = debian_pgq_control(args.pgbin)
    if control is not None and not control.exists():
        raise BenchError(f"the pgq extension is not installed ({control} missing): {INSTALL_HINT}")
    load_before = os.getloadavg()
    if load_before[0] > (os.cpu_count() or 1) / 2:
        progress(
            f"warning: the machine is busy (load average {load_before[0]:.1f}); "
            "wall-clock figures will be noisy, server CPU ratios less so"
        )

    with cluster(args.pgbin, settings) as admin_dsn:
        progress("cluster started; installing both engines")
        ours, pgq = create_engines(admin_dsn)
        engines = (ours, pgq)
        try:
            version, server_settings = server_info(ours.conn)
            pgq_version = pgq.scalar("version")
            cdc_version = install.installed_version(ours.conn)
            for eng in engines:  # warm up plans and caches, untimed
                insert_single(eng, 200)
                insert_single(eng, 200, extras=True)
                insert_bulk(eng, 1000)
                insert_bulk(eng, 1000, extras=True)

            measures: list[Measure] = []

            def bench(m: Measure, fn: Callable[[Engine], int]) -> None:
                measures.append(measure(engines, args.reps, m, fn))

            bench(
                Measure("insert_1_per_tx", "insert, 1 event per tx", sizes.single),
                lambda e: insert_single(e, sizes.single),
            )
            bench(
                Measure("insert_1_per_tx_7arg", "insert, 1 per tx, 7-arg form", sizes.single),
                lambda e: insert_single(e, sizes.single, extras=True),
            )
            bench(
                Measure("insert_bulk_tx", f"insert, {sizes.bulk:,} events in 1 tx", sizes.bulk),
                lambda e: insert_bulk(e, sizes.bulk),
            )
            bench(
                Measure(
                    "insert_bulk_tx_7arg",
                    f"insert, {sizes.bulk:,} in 1 tx, 7-arg form",
                    sizes.bulk,
                ),
                lambda e: insert_bulk(e, sizes.bulk, extras=True),
            )

            progress(f"filling the read batch: {sizes.batch:,} events per engine")
            batches = {eng.key: open_big_batch(eng, sizes.batch) for eng in engines}
            for eng in engines:
                eng.checkpoint()
                read_events_server(eng, batches[eng.key])  # sets hint bits, warms the cache
            bench(
                Measure("read_cursor", "batch read, cursor + FETCH 5000", sizes.batch),
                lambda e: read_cursor(e, batches[e.key]),
            )
            bench(
                Measure(
                    "read_get_batch_events", "batch read, get_batch_events to client", sizes.batch
                ),
                lambda e: read_events_client(e, batches[e.key]),
            )
            bench(
                Measure(
                    "read_get_batch_events_server",
                    "batch read, get_batch_events, count(*)",
                    sizes.batch,
                ),
                lambda e: read_events_server(e, batches[e.key]),
            )
            plans = [explain_batch(e, batches[e.key]) for e in engines] if args.explain else []
            for eng in engines:
                eng.scalar("finish_batch", batches[eng.key])
        finally:
            for eng in engines:
                eng.conn.close()

    facts = {
        "machine": machine_info(),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "server_version": version,
        "pgq_version": pgq_version,
        "cdc_version": cdc_version,
        "git": git_state(),
        "settings_mode": "fast" if args.fast else "stock",
        "settings": server_settings,
        "reps": args.reps,
        "statistic": "median",
        "payload_bytes": len(PAYLOAD),
        "chunk": CHUNK,
        "sizes": sizes.__dict__,
        "results": [m.as_dict() for m in measures],
        "explain": plans,
    }
    return facts, measures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.queue_bench",
        description="Our queue engine (schema cdc) against PgQ 3.5, side by side, on one "
        "throwaway PostgreSQL cluster.",
    )
    common_arguments(parser)
    parser.add_argument(
        "--fast", action="store_true", help="fsync, synchronous_commit and full_page_writes off"
    )
    parser.add_argument(
        "--explain", action="store_true", help="also EXPLAIN ANALYZE both engines' batch queries"
    )
    args = parser.parse_args(argv)
    check_args(parser, args)
    try:
        facts, measures = run(args)
    except BenchError as exc:
        print(f"queue_bench: {exc}", file=sys.stderr)
        return 2
    print(report(facts, measures))
    if args.json:
        write_json(args.json, facts)
    if args.plot:
        mode = "fsync off" if args.fast else "stock settings"
        server = facts["server_version"].split(" (")[0]
        cpus = facts["machine"]["cpus"]
        plot(measures, args.plot, f"{server}, {cpus} CPUs, {mode}, median of {args.reps}")
    return 0


def report(facts: dict[str, Any], measures: list[Measure]) -> str:
    machine = facts["machine"]
    git = facts["git"]
    load = " -> ".join(f"{facts[k][0]:.2f}" for k in ("load_average_before", "load_average_after"))
    lines = [
        f"machine:  {machine['cpus']} CPUs, {machine['cpu_model']}, {machine['memory_gb']} GB",
        f"load avg: {load}",
        f"server:   {facts['server_version']}",
        f"engines:  cdc {facts['cdc_version']} (git {(git['commit'] or '?')[:10]}"
        f"{', modified' if git['dirty'] else ''}), pgq {facts['pgq_version']}",
        f"settings ({facts['settings_mode']}): "
        + ", ".join(f"{k}={v}" for k, v in facts["settings"].items()),
        f"payload {facts['payload_bytes']} bytes; median of {facts['reps']} samples, "
        "engines alternating first",
        "",
        format_table(measures),
    ]
    lines.extend("\n" + plan for plan in facts["explain"])
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
