"""Status and metrics: the queue, the consumer and every target table of a pipeline, read
from PostgreSQL and from the Delta logs (delta-rs, no JVM), for a terminal, for scripts (JSON)
and for Prometheus.

A ticker is flagged **stalled** when the queue's last tick is older than twice its idle
period (a ticker ticks at least that often), or when events wait and the last tick is older
than ten times the queue's max lag (and at least 30 s).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any

import psycopg
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry
from psycopg import sql
from psycopg.rows import dict_row

from cdc.config import Pipeline
from cdc.pg import source
from cdc.targets import failing, snapshots
from cdc.targets.delta_table import LocalTable
from cdc.targets.table import TableRef, app_id, legacy_app_id

STALL_MIN = 30.0  # seconds


def _seconds(value: timedelta | None) -> float | None:
    return None if value is None else value.total_seconds()


@dataclass
class QueueState:
    queue: str
    last_tick_id: int | None
    ticker_lag_s: float | None
    events_per_s: float | None
    new_events: int
    ticker_paused: bool
    external_ticker: bool
    stalled: bool


@dataclass
class ConsumerState:
    consumer: str
    registered: bool
    lag_s: float | None = None  # age of the last finished tick
    last_seen_s: float | None = None
    last_tick: int | None = None
    current_batch: int | None = None
    pending_events: int | None = None
    dead_letters: int | None = None  # None: not known (PgQ, or no privilege)
    dead_by_table: dict[str, int] = field(default_factory=dict)  # ev_extra1 -> count


@dataclass
class TableState:
    source: str
    target: str
    mode: str
    location: str
    exists: bool
    delta_version: int | None = None
    last_tick: int | None = None  # the drain's idempotent-write version in the Delta log
    rows: int | None = None
    quarantined: int = 0
    dead_letters: int | None = None
    failing: bool = False  # its events go to the quarantine until `cdc resync`
    failing_reason: str | None = None
    failing_since_tick: int | None = None
    snapshot: str | None = None  # running, copied, done or failed (cdc.targets.snapshots)
    snapshot_rows: int | None = None  # rows copied so far
    snapshot_reason: str | None = None  # why it failed


@dataclass
class Status:
    queue: QueueState
    consumer: ConsumerState
    tables: list[TableState] = field(default_factory=list)
    quarantined_other: int = 0  # quarantined events of tables not in the configuration

    @property
    def failing(self) -> list[TableState]:
        return [t for t in self.tables if t.failing]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _stalled(info: dict[str, Any]) -> bool:
    if info["queue_ticker_paused"] or info["queue_external_ticker"]:
        return False
    lag = _seconds(info["ticker_lag"])
    if lag is None:
        return True  # never ticked
    idle = _seconds(info["queue_ticker_idle_period"]) or 60.0
    max_lag = _seconds(info["queue_ticker_max_lag"]) or 3.0
    if lag > 2 * idle:
        return True
    return bool(info["ev_new"]) and lag > max(10 * max_lag, STALL_MIN)


def queue_state(conn: psycopg.Connection, schema: str, queue: str) -> QueueState:
    cur = conn.cursor(row_factory=dict_row)
    info = cur.execute(
        sql.SQL("select * from {}.get_queue_info(%s)").format(sql.Identifier(schema)), (queue,)
    ).fetchone()
    if info is None:
        raise psycopg.errors.UndefinedObject(f"queue {queue} does not exist")
    return QueueState(
        queue=queue,
        last_tick_id=info["last_tick_id"],
        ticker_lag_s=_seconds(info["ticker_lag"]),
        events_per_s=info["ev_per_sec"],
        new_events=int(info["ev_new"] or 0),
        ticker_paused=bool(info["queue_ticker_paused"]),
        external_ticker=bool(info["queue_external_ticker"]),
        stalled=_stalled(info),
    )


def _consumer_state(conn: psycopg.Connection, schema: str, queue: str, name: str) -> ConsumerState:
    cur = conn.cursor(row_factory=dict_row)
    rows = cur.execute(
        sql.SQL("select * from {}.get_consumer_info(%s)").format(sql.Identifier(schema)), (queue,)
    ).fetchall()
    info = next((r for r in rows if r["consumer_name"] == name), None)
    if info is None:
        return ConsumerState(name, registered=False)
    state = ConsumerState(
        consumer=name,
        registered=True,
        lag_s=_seconds(info["lag"]),
        last_seen_s=_seconds(info["last_seen"]),
        last_tick=info["last_tick"],
        current_batch=info["current_batch"],
        pending_events=info["pending_events"],
    )
    if schema == "cdc":
        try:
            with conn.transaction():
                rows = conn.execute(
                    "select d.ev_extra1, count(*) from cdc.dead_letter d join cdc.queue q"
                    " on q.queue_id = d.dl_queue where q.queue_name = %s and d.dl_consumer = %s"
                    " group by d.ev_extra1",
                    (queue, name),
                ).fetchall()
            state.dead_by_table = {table: n for table, n in rows if table is not None}
            state.dead_letters = sum(n for _, n in rows)
        except psycopg.errors.InsufficientPrivilege:
            pass
    return state


def _quarantine_counts(ref: TableRef) -> dict[str | None, int]:
    table = LocalTable.open(ref)
    if table is None:
        return {}
    rows = table.query("q", "select ev_extra1, count(*) as n from q group by ev_extra1")
    return {row["ev_extra1"]: row["n"] for row in rows}


def collect(pipeline: Pipeline) -> Status:
    src = pipeline.source
    with psycopg.connect(src.dsn, autocommit=True) as conn:
        queue = queue_state(conn, src.queue_schema, src.queue)
        consumer = _consumer_state(conn, src.queue_schema, src.queue, src.consumer)
        incarnation = source.incarnation(conn, src)
    quarantined = _quarantine_counts(pipeline.table(pipeline.quarantine))
    marks = failing.read_local(pipeline.table(pipeline.failing_table))
    copies = snapshots.read_local(pipeline.table(snapshots.table_name(pipeline.quarantine)))
    status = Status(queue, consumer)
    for t in pipeline.tables:
        ref = pipeline.table(t.target)
        table = LocalTable.open(ref)
        state = TableState(t.source, t.target, t.mode, ref.location, exists=table is not None)
        if table is not None:
            state.delta_version = table.version()
            state.last_tick = table.committed(app_id(src, incarnation, t.target))
            if state.last_tick is None and incarnation is not None:  # drained before upgrade
                state.last_tick = table.committed(legacy_app_id(src, t.target))
            state.rows = table.rows()
        state.quarantined = quarantined.get(t.source, 0)
        if consumer.dead_letters is not None:
            state.dead_letters = consumer.dead_by_table.get(t.source, 0)
        mark = marks.get(t.target)
        if mark is not None:
            state.failing = True
            state.failing_reason = mark.reason
            state.failing_since_tick = mark.tick_id
        copy = copies.get(t.target)
        if copy is not None:
            state.snapshot, state.snapshot_rows = copy.state, copy.rows
            state.snapshot_reason = copy.reason
        status.tables.append(state)
    known = {t.source for t in pipeline.tables}
    status.quarantined_other = sum(n for k, n in quarantined.items() if k not in known)
    return status


def _fmt(value: float | int | None, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.1f}{unit}"
    return f"{value:,}{unit}"


def render(status: Status) -> str:
    """The status as a readable table."""
    q, c = status.queue, status.consumer
    health = "STALLED" if q.stalled else "paused" if q.ticker_paused else "ok"
    lines = [
        f"queue {q.queue}: ticker {health}, last tick {_fmt(q.last_tick_id)}"
        f" {_fmt(q.ticker_lag_s, ' s')} ago, {_fmt(q.new_events)} new event(s),"
        f" {_fmt(q.events_per_s, '/s')}",
    ]
    if not c.registered:
        lines.append(f"consumer {c.consumer}: not registered (the first drain registers it)")
    else:
        lines.append(
            f"consumer {c.consumer}: lag {_fmt(c.lag_s, ' s')}, {_fmt(c.pending_events)}"
            f" pending event(s), last tick {_fmt(c.last_tick)}, batch {_fmt(c.current_batch)},"
            f" seen {_fmt(c.last_seen_s, ' s')} ago, dead letters {_fmt(c.dead_letters)}"
        )
    header = (
        "source", "target", "mode", "state", "snapshot", "last tick", "version", "rows",
        "quarantined", "dead",
    )  # fmt: skip
    rows = [
        (
            t.source,
            t.target,
            t.mode,
            "FAILING" if t.failing else "ok",
            _snapshot(t),
            _fmt(t.last_tick),
            _fmt(t.delta_version),
            _fmt(t.rows) if t.exists else "(no table yet)",
            _fmt(t.quarantined),
            _fmt(t.dead_letters),
        )
        for t in status.tables
    ]
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, *rows]:
        lines.append("  ".join(str(v).ljust(w) for v, w in zip(r, widths, strict=True)))
    if status.quarantined_other:
        lines.append(f"quarantined events of tables not configured: {status.quarantined_other:,}")
    for t in status.failing:
        lines.append(
            f"FAILING {t.target} since tick {_fmt(t.failing_since_tick)}: {t.failing_reason}"
            f" (its events go to the quarantine; fix the cause, then `cdc resync {t.source}`)"
        )
    for t in status.tables:
        if t.snapshot == snapshots.FAILED:
            lines.append(
                f"SNAPSHOT FAILED {t.target} after {_fmt(t.snapshot_rows)} row(s):"
                f" {t.snapshot_reason} (fix the cause, then `cdc snapshot {t.source} --restart`)"
            )
    return "\n".join(lines)


def _snapshot(t: TableState) -> str:
    """The snapshot column: none, or its state with the rows copied while it runs."""
    if t.snapshot is None:
        return "-"
    if t.snapshot in (snapshots.RUNNING, snapshots.COPIED):
        return f"{t.snapshot} ({_fmt(t.snapshot_rows)} rows)"
    return t.snapshot.upper() if t.snapshot == snapshots.FAILED else t.snapshot


def to_json(status: Status) -> str:
    return json.dumps(status.as_dict(), indent=2)


class PipelineCollector(Collector):
    """Prometheus metrics of a pipeline, collected on every scrape."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline

    def collect(self) -> Iterator[Metric]:
        yield from metrics(collect(self.pipeline))


def metrics(status: Status) -> Iterator[Metric]:
    q, c = status.queue, status.consumer
    labels = {"queue": q.queue}

    def gauge(name: str, doc: str, value: float | None, **extra: str) -> Iterator[Metric]:
        if value is None:
            return
        family = GaugeMetricFamily(name, doc, labels=[*labels, *extra])
        family.add_metric([*labels.values(), *extra.values()], float(value))
        yield family

    yield from gauge("cdc_queue_ticker_lag_seconds", "Age of the last tick", q.ticker_lag_s)
    yield from gauge("cdc_queue_new_events", "Events since the last tick", q.new_events)
    yield from gauge("cdc_queue_last_tick_id", "Id of the last tick", q.last_tick_id)
    yield from gauge("cdc_queue_ticker_stalled", "1 when the ticker is stalled", int(q.stalled))
    if c.registered:
        who = {"consumer": c.consumer}
        yield from gauge("cdc_consumer_lag_seconds", "Age of its last tick", c.lag_s, **who)
        yield from gauge(
            "cdc_consumer_pending_events", "Events after the last tick", c.pending_events, **who
        )
        yield from gauge("cdc_consumer_last_tick_id", "Last finished tick", c.last_tick, **who)
        yield from gauge("cdc_consumer_dead_letters", "Dead letters", c.dead_letters, **who)
    version = GaugeMetricFamily("cdc_table_delta_version", "Delta version", labels=["target"])
    applied = GaugeMetricFamily(
        "cdc_table_last_tick_id", "Tick of the last batch applied", labels=["target"]
    )
    rows = GaugeMetricFamily("cdc_table_rows", "Rows in the Delta table", labels=["target"])
    bad = CounterMetricFamily(
        "cdc_table_quarantined_events", "Quarantined events of the table", labels=["target"]
    )
    dead = GaugeMetricFamily("cdc_table_dead_letters", "Dead letters", labels=["target"])
    failed = GaugeMetricFamily(
        "cdc_table_failing",
        "1 when the table is failing (its events go to the quarantine until cdc resync)",
        labels=["target"],
    )
    for t in status.tables:
        for family, value in ((version, t.delta_version), (applied, t.last_tick), (rows, t.rows)):
            if value is not None:
                family.add_metric([t.target], float(value))
        bad.add_metric([t.target], float(t.quarantined))
        if t.dead_letters is not None:
            dead.add_metric([t.target], float(t.dead_letters))
        failed.add_metric([t.target], float(t.failing))
    yield from (version, applied, rows, bad, dead, failed)


def registry(pipeline: Pipeline) -> CollectorRegistry:
    reg = CollectorRegistry()
    reg.register(PipelineCollector(pipeline))
    return reg


class TickerCollector(Collector):
    """Prometheus metrics of the ticker: every queue of every database it serves."""

    def __init__(self, dsns: list[str]) -> None:
        self.dsns = dsns

    def collect(self) -> Iterator[Metric]:
        lag = GaugeMetricFamily(
            "cdc_queue_ticker_lag_seconds", "Age of the last tick", labels=["database", "queue"]
        )
        new = GaugeMetricFamily(
            "cdc_queue_new_events", "Events since the last tick", labels=["database", "queue"]
        )
        stalled = GaugeMetricFamily(
            "cdc_queue_ticker_stalled", "1 when stalled", labels=["database", "queue"]
        )
        for dsn in self.dsns:
            with psycopg.connect(dsn, autocommit=True) as conn:
                db = conn.info.dbname
                cur = conn.cursor(row_factory=dict_row)
                for info in cur.execute("select * from cdc.get_queue_info()"):
                    key = [db, info["queue_name"]]
                    lag.add_metric(key, _seconds(info["ticker_lag"]) or 0.0)
                    new.add_metric(key, float(info["ev_new"] or 0))
                    stalled.add_metric(key, float(_stalled(info)))
        yield from (lag, new, stalled)
