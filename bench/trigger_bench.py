"""Capture trigger benchmark: our generated triggers against PgQ 3.5's C triggers.

Run from the repository root::

    .venv/bin/python -m bench.trigger_bench                  # full size, stock server settings
    .venv/bin/python -m bench.trigger_bench --quick          # smoke run: small sizes
    .venv/bin/python -m bench.trigger_bench --reps 1 --json out.json \
        --plot docs/img/trigger_bench.png

One run initialises and starts one throwaway PostgreSQL cluster from ``--pgbin`` (Debian's
``/usr/lib/postgresql/15/bin``, stock settings) with one database, ``bench_trig``, holding
both ``create extension pgq`` (Debian package postgresql-15-pgq3) and our engine (installed
with ``cdc.pg.install``), a PgQ queue and a cdc queue, both named ``bench``. It stops and
removes the cluster at the end.

Every variant has its own identical 8-column table
(``id int primary key, a text, b int, c numeric, d timestamptz, e bool, f text, g bigint``):

- ``none``: no trigger (the baseline);
- ``pgq <fmt>``: PgQ's C trigger ``pgq.jsontriga`` / ``pgq.logutriga`` / ``pgq.sqltriga``,
  ``after insert or update or delete ... for each row``;
- ``row <fmt>``: ours, ``capture.attach(..., CaptureOptions(format=fmt, mode='row'))``;
- ``stmt <fmt>``: ours, ``mode='statement'``. Until statement mode exists, attach refuses it
  (ConfigError mentioning 'statement') and these cells are reported as n/a.
- ``rowlim json``: ours, row mode, into a queue with a ``per_tx_limit`` that no statement
  reaches: its generated function asks ``cdc._cap_admit`` for every event (the restricted
  path); on a queue without ``disable_insert`` and ``per_tx_limit`` the functions do not look
  at the queue's settings at all.

Measures, each taken ``--reps`` times with the variants' order rotating; the median is shown:

1. bulk INSERT of ``rows`` rows in one statement (``insert ... select ... generate_series``);
2. bulk UPDATE of all of them (``update t set b = b + 1, a = a || 'x'``);
3. bulk DELETE of all of them.
   Before each sample, untimed: the event tables are truncated (``cdc.event`` and PgQ's
   ``pgq.event_<id>``), the table is vacuumed (after the INSERT: hint bits and statistics)
   and a checkpoint runs. Server CPU is the backend's on-CPU time from /proc/<pid>/schedstat.
4. single-row transactions through pgbench (4 clients, 2 threads, ``--pgbench-seconds``
   each): two scripts of equal weight, an UPDATE of one random row of ``pgbench_rows``
   preloaded rows by primary key, and an INSERT of a new row whose id comes from a sequence;
   each is one autocommit transaction. Shown: TPS and the TPS loss against no trigger. Server
   CPU per transaction is the growth of the postmaster's reaped-children CPU time
   (/proc/<postmaster>/stat cutime + cstime), i.e. the pgbench backends' CPU once they exit.

Ratios: time / no-trigger time, and ours / PgQ time for the same format (at or below 1: ours
is as fast or faster). For pgbench, "time" is 1 / TPS.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

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
from cdc import errors
from cdc.pg import capture, install
from cdc.pg.capture import CaptureOptions

DB = "bench_trig"
QUEUE = "bench"
# a second cdc queue with a per_tx_limit no statement reaches: its capture functions take the
# restricted path (cdc._cap_admit for every event), which the rowlim variant measures
LIMITED_QUEUE = "bench_limited"
FORMATS = ("json", "urlenc", "sql")
PGQ_FUNC = {"json": "jsontriga", "urlenc": "logutriga", "sql": "sqltriga"}
BULK = ("insert", "update", "delete")
MEASURES = (*BULK, "pgbench")
PGBENCH_CLIENTS = 4
PGBENCH_THREADS = 2
ID_SEQ = "bench_ids"
NEW_IDS_FROM = 100_000_000

COLUMNS = "id int primary key, a text, b int, c numeric, d timestamptz, e bool, f text, g bigint"
ROW_EXPR = (
    "g, 'row ' || g, g % 1000, g * 1.25, timestamptz '2024-01-01 00:00+00' + g * interval '1 s', "
    "g % 2 = 0, md5(g::text), g::bigint * 1000"
)


@dataclass(frozen=True)
class Sizes:
    rows: int  # bulk measures
    pgbench_rows: int  # rows preloaded for the pgbench UPDATE
    pgbench_seconds: int


FULL = Sizes(rows=200_000, pgbench_rows=100_000, pgbench_seconds=20)
QUICK = Sizes(rows=20_000, pgbench_rows=10_000, pgbench_seconds=3)


@dataclass(frozen=True)
class Variant:
    key: str  # "none", "pgq_json", "row_json", "stmt_json", ...
    kind: str  # "none", "pgq", "row", "stmt", "rowlim"
    fmt: str | None

    @property
    def ours(self) -> bool:
        return self.kind in ("row", "stmt", "rowlim")

    @property
    def one_event_per_row(self) -> bool:
        return self.kind in ("pgq", "row", "rowlim")

    @property
    def table(self) -> str:
        return f"t_{self.key}"

    @property
    def label(self) -> str:
        if self.kind == "none":
            return "no trigger"
        if self.kind == "rowlim":
            return f"ours row {self.fmt}, per_tx_limit"
        names = {"pgq": "PgQ C", "row": "ours row", "stmt": "ours statement"}
        return f"{names[self.kind]} {self.fmt}"


VARIANTS = (
    Variant("none", "none", None),
    *(Variant(f"{kind}_{fmt}", kind, fmt) for kind in ("pgq", "row", "stmt") for fmt in FORMATS),
    Variant("rowlim_json", "rowlim", "json"),
)


@dataclass
class Cell:
    """One variant under one measure: samples, or why there are none."""

    seconds: list[float] = field(default_factory=list)  # bulk: statement time
    cpu_seconds: list[float] = field(default_factory=list)  # bulk: backend CPU per statement
    tps: list[float] = field(default_factory=list)  # pgbench
    cpu_us_per_tx: list[float] = field(default_factory=list)  # pgbench
    events: list[int] = field(default_factory=list)
    na: str | None = None

    def time(self) -> float | None:
        """Median seconds per statement (bulk) or per transaction (pgbench: 1 / median TPS)."""
        if self.seconds:
            return statistics.median(self.seconds)
        if self.tps:
            return 1 / statistics.median(self.tps)
        return None

    def cpu(self) -> float | None:
        """Median server CPU: seconds per statement (bulk), µs per transaction (pgbench)."""
        vals = self.cpu_seconds or self.cpu_us_per_tx
        return statistics.median(vals) if vals else None


Results = dict[str, dict[str, Cell]]  # measure -> variant key -> cell


# ---------------------------------------------------------------------------------------
# Setup


def setup(admin_dsn: str) -> tuple[str, psycopg.Connection, dict[str, str]]:
    """Create the database, both engines, the queues and one table per variant; attach the
    triggers. Returns the DSN, an autocommit connection and {variant: why n/a}."""
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        found = conn.execute("select 1 from pg_available_extensions where name = 'pgq'")
        if found.fetchone() is None:
            raise BenchError(f"the pgq extension is not available to this server: {INSTALL_HINT}")
        conn.execute(sql.SQL("create database {}").format(sql.Identifier(DB)))
    dsn = make_conninfo(admin_dsn, dbname=DB)
    conn = psycopg.connect(dsn, autocommit=True)
    conn.execute("create extension pgq")
    install.install(dsn)
    conn.execute("select pgq.create_queue(%s)", (QUEUE,))
    conn.execute("select cdc.create_queue(%s)", (QUEUE,))
    conn.execute("select cdc.create_queue(%s)", (LIMITED_QUEUE,))
    conn.execute("select cdc.set_queue_config(%s, 'per_tx_limit', '2147483647')", (LIMITED_QUEUE,))
    conn.execute(
        sql.SQL("create sequence {} start {}").format(
            sql.Identifier(ID_SEQ), sql.Literal(NEW_IDS_FROM)
        )
    )
    na: dict[str, str] = {}
    for v in VARIANTS:
        conn.execute(
            sql.SQL("create table {} ({}) with (autovacuum_enabled = off)").format(
                sql.Identifier(v.table), sql.SQL(COLUMNS)
            )
        )
        if v.kind == "pgq":
            conn.execute(
                sql.SQL(
                    "create trigger capture after insert or update or delete on {} "
                    "for each row execute procedure {}({})"
                ).format(
                    sql.Identifier(v.table),
                    sql.Identifier("pgq", PGQ_FUNC[v.fmt or ""]),
                    sql.Literal(QUEUE),
                )
            )
        elif v.ours:
            mode = "statement" if v.kind == "stmt" else "row"
            queue = LIMITED_QUEUE if v.kind == "rowlim" else QUEUE
            try:
                opts = CaptureOptions(queue=queue, format=v.fmt, mode=mode)  # type: ignore[arg-type]
                capture.attach(conn, f"public.{v.table}", opts)
            except errors.ConfigError as exc:
                if "statement" not in str(exc):
                    raise
                na[v.key] = str(exc)
                progress(f"  {v.label}: n/a ({exc})")
    return dsn, conn, na


def pgq_event_table(conn: psycopg.Connection) -> str:
    row = conn.execute(
        "select queue_data_pfx from pgq.queue where queue_name = %s", (QUEUE,)
    ).fetchone()
    if row is None:
        raise BenchError("the PgQ queue is missing")
    return str(row[0])  # e.g. pgq.event_1: the parent of pgq.event_1_0 .. _2


def clear_events(conn: psycopg.Connection, pgq_events: str) -> None:
    conn.execute(f"truncate cdc.event, {pgq_events}")


def count_events(conn: psycopg.Connection, pgq_events: str, v: Variant) -> int:
    if v.kind == "none":
        return 0
    table = pgq_events if v.kind == "pgq" else "cdc.event"
    row = conn.execute(f"select count(*) from {table}").fetchone()
    return int(row[0]) if row else 0


# ---------------------------------------------------------------------------------------
# Bulk DML


def bulk_sql(measure: str, table: str, rows: int) -> sql.Composed:
    t = sql.Identifier(table)
    if measure == "insert":
        return sql.SQL("insert into {} select {} from generate_series(1, {}) g").format(
            t, sql.SQL(ROW_EXPR), sql.Literal(rows)
        )
    if measure == "update":
        return sql.SQL("update {} set b = b + 1, a = a || 'x'").format(t)
    return sql.SQL("delete from {}").format(t)


def run_bulk(
    conn: psycopg.Connection, pgq_events: str, v: Variant, rows: int, results: Results
) -> None:
    """One sample of insert, update and delete on the variant's table."""
    t = sql.Identifier(v.table)
    conn.execute(sql.SQL("truncate {}").format(t))
    for measure in BULK:
        clear_events(conn, pgq_events)
        if measure != "insert":
            conn.execute(sql.SQL("vacuum (analyze) {}").format(t))
        conn.execute("checkpoint")
        query = bulk_sql(measure, v.table, rows)
        pid = conn.info.backend_pid
        cpu0 = backend_cpu_ns(pid)
        t0 = time.perf_counter()
        cur = conn.execute(query)
        seconds = time.perf_counter() - t0
        cpu1 = backend_cpu_ns(pid)
        if cur.rowcount != rows:
            raise BenchError(f"{v.label}: {measure}: {cur.rowcount} rows, expected {rows}")
        cell = results[measure][v.key]
        cell.seconds.append(seconds)
        if cpu0 is not None and cpu1 is not None:
            cell.cpu_seconds.append((cpu1 - cpu0) / 1e9)
        n = count_events(conn, pgq_events, v)
        cell.events.append(n)
        if v.one_event_per_row and n != rows:
            raise BenchError(f"{v.label}: {measure}: {n} events, expected {rows}")
        progress(f"  {measure:7} {v.label:22} {seconds:7.3f}s  ({n:,} events)")
    clear_events(conn, pgq_events)


# ---------------------------------------------------------------------------------------
# pgbench


UPDATE_SCRIPT = "\\set id random(1, {n})\nupdate {t} set b = b + 1, a = a || 'x' where id = :id;\n"
INSERT_SCRIPT = "insert into {t} select nextval('{seq}'), {expr} from (select {n} as g) s;\n"


def postmaster_children_cpu(pidfile: Path) -> float | None:
    """CPU seconds of the postmaster's exited (reaped) children: cutime + cstime."""
    try:
        pid = int(pidfile.read_text().split()[0])
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat.rsplit(")", 1)[1].split()
        # fields[0] is field 3 (state); cutime and cstime are fields 16 and 17
        return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def run_pgbench(
    pgbin: Path,
    dsn: str,
    conn: psycopg.Connection,
    pgq_events: str,
    v: Variant,
    sizes: Sizes,
    workdir: Path,
    results: Results,
) -> None:
    """Reload the table, then one pgbench run of single-row transactions against it."""
    t = sql.Identifier(v.table)
    conn.execute(sql.SQL("truncate {}").format(t))
    conn.execute(bulk_sql("insert", v.table, sizes.pgbench_rows))
    clear_events(conn, pgq_events)
    conn.execute(sql.SQL("vacuum (analyze) {}").format(t))
    conn.execute("checkpoint")
    upd = workdir / f"update_{v.key}.sql"
    ins = workdir / f"insert_{v.key}.sql"
    upd.write_text(UPDATE_SCRIPT.format(n=sizes.pgbench_rows, t=v.table))
    ins.write_text(
        INSERT_SCRIPT.format(t=v.table, seq=ID_SEQ, expr=ROW_EXPR.split(", ", 1)[1], n=7)
    )
    for f in (upd, ins):
        f.chmod(0o644)
    info = conninfo_to_dict(dsn)
    cmd = [
        str(pgbin / "pgbench"),
        "-n",
        "-h", str(info["host"]),
        "-U", str(info.get("user", "postgres")),
        "-c", str(PGBENCH_CLIENTS),
        "-j", str(PGBENCH_THREADS),
        "-T", str(sizes.pgbench_seconds),
        "-f", f"{upd}@1",
        "-f", f"{ins}@1",
        DB,
    ]  # fmt: skip
    if os.geteuid() == 0:
        cmd = ["runuser", "-u", "postgres", "--", *cmd]
    pidfile = Path(str(info["host"])) / "data" / "postmaster.pid"
    cpu0 = postmaster_children_cpu(pidfile)
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise BenchError(f"pgbench failed ({proc.returncode}): {proc.stderr.strip()[-1500:]}")
    tps_m = re.search(r"^tps = ([\d.]+)", proc.stdout, re.M)
    n_m = re.search(r"number of transactions actually processed: (\d+)", proc.stdout)
    failed = re.search(r"number of failed transactions: (\d+)", proc.stdout)
    if tps_m is None or n_m is None:
        raise BenchError(f"cannot read pgbench's output:\n{proc.stdout}")
    if failed and int(failed.group(1)):
        raise BenchError(f"pgbench: {failed.group(1)} failed transactions:\n{proc.stdout}")
    # wait for the pgbench backends to exit, so that their CPU shows in cutime
    for _ in range(100):
        row = conn.execute(
            "select count(*) from pg_stat_activity where application_name = 'pgbench'"
        ).fetchone()
        if row and row[0] == 0:
            break
        time.sleep(0.05)
    cpu1 = postmaster_children_cpu(pidfile)
    tps, ntx = float(tps_m.group(1)), int(n_m.group(1))
    cell = results["pgbench"][v.key]
    cell.tps.append(tps)
    if cpu0 is not None and cpu1 is not None and ntx:
        cell.cpu_us_per_tx.append((cpu1 - cpu0) / ntx * 1e6)
    n = count_events(conn, pgq_events, v)
    cell.events.append(n)
    if v.one_event_per_row and n != ntx:
        raise BenchError(f"{v.label}: pgbench: {n} events for {ntx} transactions")
    clear_events(conn, pgq_events)
    progress(f"  pgbench {v.label:22} {tps:9.1f} tps  ({ntx:,} tx)")


# ---------------------------------------------------------------------------------------
# Reporting


def ratios(results: Results, measure: str, v: Variant) -> tuple[float | None, float | None]:
    """(time / no-trigger time, ours / PgQ time for the same format)."""
    cells = results[measure]
    mine = cells[v.key].time()
    base = cells["none"].time()
    if mine is None:
        return None, None
    vs_none = mine / base if base else None
    vs_pgq = None
    if v.ours:
        pgq = cells[f"pgq_{v.fmt}"].time()
        vs_pgq = mine / pgq if pgq else None
    return vs_none, vs_pgq


def cpu_vs_pgq(results: Results, measure: str, v: Variant) -> float | None:
    if not v.ours:
        return None
    mine, pgq = results[measure][v.key].cpu(), results[measure][f"pgq_{v.fmt}"].cpu()
    return mine / pgq if mine and pgq else None


def _f(x: float | None, fmt: str) -> str:
    return "n/a" if x is None else format(x, fmt)


def table_rows(results: Results) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for measure in MEASURES:
        base = results[measure]["none"]
        for v in VARIANTS:
            cell = results[measure][v.key]
            vs_none, vs_pgq = ratios(results, measure, v)
            cpu_r = cpu_vs_pgq(results, measure, v)
            if measure == "pgbench":
                tps = statistics.median(cell.tps) if cell.tps else None
                btps = statistics.median(base.tps) if base.tps else None
                loss = 1 - tps / btps if tps and btps else None
                value = _f(tps, ",.0f") + " tps"
                extra = _f(None if loss is None else loss * 100, ".1f") + "%"
                cpu = _f(cell.cpu(), ".0f") + " µs/tx"
            else:
                value = _f(cell.time(), ".3f") + " s"
                extra = "-"
                cpu = _f(cell.cpu(), ".3f") + " s"
            rows.append(
                (
                    measure,
                    v.label,
                    value,
                    _f(vs_none, ".2f"),
                    extra,
                    "-" if v.kind in ("none", "pgq") else _f(vs_pgq, ".2f"),
                    cpu,
                    "-" if v.kind in ("none", "pgq") else _f(cpu_r, ".2f"),
                )
            )
    return rows


HEAD = (
    "measure",
    "variant",
    "median",
    "time/none",
    "TPS loss",
    "ours/PgQ time",
    "server CPU",
    "CPU ours/PgQ",
)


def format_table(results: Results) -> str:
    rows = [HEAD, *table_rows(results)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEAD))]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(
            c.ljust(w) if i < 2 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    out = [line(HEAD), "  ".join("-" * w for w in widths)]
    prev = None
    for r in rows[1:]:
        if prev is not None and r[0] != prev:
            out.append("")
        out.append(line(r))
        prev = r[0]
    return "\n".join(out)


def goals(results: Results) -> list[str]:
    """The three goals, each checked per format (and measure)."""
    out: list[str] = []
    for fmt in FORMATS:
        row = [ratios(results, m, Variant(f"row_{fmt}", "row", fmt))[1] for m in BULK]
        stmt = [ratios(results, m, Variant(f"stmt_{fmt}", "stmt", fmt))[1] for m in BULK]
        pg = results["pgbench"]
        base = pg["none"].time()

        def loss(key: str, pg: dict[str, Cell] = pg, base: float | None = base) -> float | None:
            t = pg[key].time()
            return 1 - base / t if t and base else None

        lo, lp = loss(f"row_{fmt}"), loss(f"pgq_{fmt}")
        ok_row = all(r is not None and r <= 1 for r in row)
        ok_stmt = all(r is not None and r <= 0.5 for r in stmt)
        out.append(
            f"{fmt:6} row <= PgQ on bulk: {'met' if ok_row else 'NOT met'} "
            f"({', '.join(_f(r, '.2f') for r in row)}); "
            f"statement <= 0.5 PgQ: {'met' if ok_stmt else 'NOT met'} "
            f"({', '.join(_f(r, '.2f') for r in stmt)}); "
            f"pgbench loss row {_f(None if lo is None else lo * 100, '.1f')}% vs PgQ "
            f"{_f(None if lp is None else lp * 100, '.1f')}%: "
            f"{'met' if lo is not None and lp is not None and lo <= lp else 'NOT met'}"
        )
    return out


def plot(results: Results, path: Path, subtitle: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = (("pgq", "PgQ C trigger", "#888888"), ("row", "ours, row", "#3b7dd8"),
             ("stmt", "ours, statement", "#9ab8e6"))  # fmt: skip
    titles = {
        "insert": "bulk INSERT",
        "update": "bulk UPDATE",
        "delete": "bulk DELETE",
        "pgbench": "pgbench, 1-row tx (1/TPS)",
    }
    fig, axes = plt.subplots(1, len(MEASURES), figsize=(13, 4.2), sharey=False)
    w = 0.27
    for ax, measure in zip(axes, MEASURES, strict=True):
        top = 1.0
        for k, (kind, label, color) in enumerate(kinds):
            xs, ys = [], []
            for i, fmt in enumerate(FORMATS):
                vs_none = ratios(results, measure, Variant(f"{kind}_{fmt}", kind, fmt))[0]
                x = i + (k - 1) * w
                if vs_none is None:
                    ax.text(x, 1.0, "n/a", ha="center", va="bottom", fontsize=7, rotation=90)
                    continue
                xs.append(x)
                ys.append(vs_none)
                ax.text(x, vs_none, f"{vs_none:.1f}", ha="center", va="bottom", fontsize=7)
                top = max(top, vs_none)
            ax.bar(xs, ys, w, label=label, color=color)
        ax.axhline(1.0, color="#444444", linewidth=1)
        ax.set_xticks(range(len(FORMATS)), FORMATS)
        ax.set_yscale("log")  # urlenc row mode is two orders of magnitude above the rest
        ax.set_ylim(0.8, top * 1.6)
        ax.set_title(titles[measure], fontsize=10)
    axes[0].set_ylabel("time relative to no trigger (log scale, lower is better)")
    axes[-1].legend(loc="upper left", fontsize=8)
    fig.suptitle(f"Capture triggers: ours vs PgQ 3.5's C triggers\n{subtitle}", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def report(facts: dict[str, Any], results: Results) -> str:
    machine = facts["machine"]
    git = facts["git"]
    load = " -> ".join(f"{facts[k][0]:.2f}" for k in ("load_average_before", "load_average_after"))
    sizes = facts["sizes"]
    lines = [
        f"machine:  {machine['cpus']} CPUs, {machine['cpu_model']}, {machine['memory_gb']} GB",
        f"load avg: {load}",
        f"server:   {facts['server_version']}",
        f"engines:  cdc {facts['cdc_version']} (git {(git['commit'] or '?')[:10]}"
        f"{', modified' if git['dirty'] else ''}), pgq {facts['pgq_version']}",
        "settings (stock): " + ", ".join(f"{k}={v}" for k, v in facts["settings"].items()),
        f"bulk: {sizes['rows']:,} rows, median of {facts['reps']}; pgbench: "
        f"{PGBENCH_CLIENTS} clients, {PGBENCH_THREADS} threads, {sizes['pgbench_seconds']} s, "
        f"{sizes['pgbench_rows']:,} rows, median of {facts['reps']}",
        "",
        format_table(results),
        "",
        *goals(results),
    ]
    for key, why in facts["not_available"].items():
        lines.append(f"n/a: {key}: {why}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# Running


def run(args: argparse.Namespace) -> tuple[dict[str, Any], Results]:
    base = QUICK if args.quick else FULL
    sizes = Sizes(
        rows=args.rows or base.rows,
        pgbench_rows=base.pgbench_rows,
        pgbench_seconds=args.pgbench_seconds or base.pgbench_seconds,
    )
    if not (args.pgbin / "pg_ctl").exists() or not (args.pgbin / "pgbench").exists():
        raise BenchError(f"no PostgreSQL server binaries / pgbench in {args.pgbin}: {INSTALL_HINT}")
    control = debian_pgq_control(args.pgbin)
    if control is not None and not control.exists():
        raise BenchError(f"the pgq extension is not installed ({control} missing): {INSTALL_HINT}")
    load_before = os.getloadavg()
    if load_before[0] > (os.cpu_count() or 1) / 2:
        progress(f"warning: the machine is busy (load average {load_before[0]:.1f})")
    results: Results = {m: {v.key: Cell() for v in VARIANTS} for m in MEASURES}
    workdir = Path(tempfile.mkdtemp(prefix="trigger-bench-"))
    workdir.chmod(0o755)
    try:
        with cluster(args.pgbin, {}) as admin_dsn:
            progress("cluster started; installing PgQ and cdc, attaching triggers")
            dsn, conn, na = setup(admin_dsn)
            try:
                version, server_settings = server_info(conn)
                pgq_version = conn.execute("select pgq.version()").fetchone()
                cdc_version = install.installed_version(conn)
                pgq_events = pgq_event_table(conn)
                active = [v for v in VARIANTS if v.key not in na]
                for v in VARIANTS:
                    if v.key in na:
                        for m in MEASURES:
                            results[m][v.key].na = na[v.key]
                # warm-up, untimed: plans, trigger function caches
                warm = Sizes(rows=2000, pgbench_rows=0, pgbench_seconds=0)
                for v in active:
                    scratch: Results = {m: {x.key: Cell() for x in VARIANTS} for m in MEASURES}
                    run_bulk(conn, pgq_events, v, warm.rows, scratch)
                for rep in range(args.reps):
                    order = active[rep % len(active) :] + active[: rep % len(active)]
                    progress(f"rep {rep + 1}/{args.reps}: bulk DML, {sizes.rows:,} rows")
                    for v in order:
                        run_bulk(conn, pgq_events, v, sizes.rows, results)
                    if args.pgbench_seconds != -1:
                        progress(f"rep {rep + 1}/{args.reps}: pgbench")
                        for v in order:
                            run_pgbench(
                                args.pgbin, dsn, conn, pgq_events, v, sizes, workdir, results
                            )
            finally:
                conn.close()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    facts = {
        "machine": machine_info(),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "server_version": version,
        "pgq_version": pgq_version[0] if pgq_version else None,
        "cdc_version": cdc_version,
        "git": git_state(),
        "settings_mode": "stock",
        "settings": server_settings,
        "reps": args.reps,
        "statistic": "median",
        "sizes": sizes.__dict__,
        "pgbench": {"clients": PGBENCH_CLIENTS, "threads": PGBENCH_THREADS},
        "not_available": na,
        "results": {
            m: {
                v.key: {
                    "label": v.label,
                    **{
                        k: val
                        for k, val in results[m][v.key].__dict__.items()
                        if val not in ([], None)
                    },
                    "median_time_s": results[m][v.key].time(),
                    "time_over_none": ratios(results, m, v)[0],
                    "time_ours_over_pgq": ratios(results, m, v)[1],
                    "server_cpu_ours_over_pgq": cpu_vs_pgq(results, m, v),
                }
                for v in VARIANTS
            }
            for m in MEASURES
        },
    }
    return facts, results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.trigger_bench",
        description="Our capture triggers against PgQ 3.5's C triggers, side by side, on one "
        "throwaway PostgreSQL cluster.",
    )
    common_arguments(parser)
    parser.add_argument("--rows", type=int, help="rows for the bulk measures (default 200000)")
    parser.add_argument(
        "--pgbench-seconds",
        type=int,
        help="seconds per pgbench run (default 20, 3 with --quick; -1 skips pgbench)",
    )
    args = parser.parse_args(argv)
    check_args(parser, args)
    try:
        facts, results = run(args)
    except BenchError as exc:
        print(f"trigger_bench: {exc}", file=sys.stderr)
        return 2
    print(report(facts, results))
    if args.json:
        write_json(args.json, facts)
    if args.plot:
        server = facts["server_version"].split(" (")[0]
        plot(
            results,
            args.plot,
            f"{server}, {facts['machine']['cpus']} CPUs, stock settings, "
            f"{facts['sizes']['rows']:,} rows, median of {args.reps}",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
