"""Status and metrics: the queue, the consumer and every target table of a pipeline, read
from PostgreSQL and from the Delta logs (delta-rs, no JVM), for a terminal, for scripts (JSON)
and for Prometheus: the same health in all three, with the same exit code.

**Health.** The pipeline is *unhealthy* when its consumer has pending events older than the
threshold (``--max-pending-age``, 900 s by default) and no drain is at work on them, when a
table is failing, when a snapshot failed, or when the configuration refuses a table a rule
matches (cdc.pipeline.tables: its target would be another source's table). Idle time is not a
symptom: no tick for an hour with nothing pending is healthy (between scheduled drains, after a
snapshot).

- A *pending* event is committed, visible to the consumer, and not yet in a batch it finished
  (``cdc.get_consumer_status``): a rolled-back transaction's events never count.
- Its age runs from the later of its time (its transaction's start) and the consumer's last
  finished tick: it cannot have been waiting, committed, for longer.
- *Draining*: a session holds the consumer's drain lock (a drain applying a batch, a snapshot
  copying a chunk): old pending events are being worked on, which is healthy.
- With a real PgQ (no ``get_consumer_status``) pending events are PgQ's count by sequence
  values (rolled-back events included) and their age the consumer's lag.

Other consumers of the queue with pending events older than the threshold are *orphans*: they
hold back the rotation of the queue's event tables (the oldest table is emptied only once every
consumer is past it). They are listed, and do not change the pipeline's health.
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
from cdc.pg import source, sqlfiles
from cdc.pg.engine import Engine
from cdc.targets import failing, quarantine, readers, snapshots
from cdc.targets.delta_table import LocalTable, needs_mapping
from cdc.targets.table import app_id, legacy_app_id

MAX_PENDING_AGE = 900.0  # seconds: the default threshold of "unhealthy"
QUERIES = "queries_status.sql"

OK, DRAINING, UNHEALTHY = "ok", "draining", "unhealthy"


def _seconds(value: timedelta | None) -> float | None:
    return None if value is None else value.total_seconds()


def _query(engine: Engine, name: str) -> sql.Composed:
    return sql.SQL(sqlfiles.queries(QUERIES)[name]).format(schema=engine.schema)


@dataclass
class QueueState:
    queue: str
    last_tick_id: int | None
    ticker_lag_s: float | None  # age of the last tick: idle time, not a symptom
    events_per_s: float | None
    ticker_paused: bool
    external_ticker: bool


@dataclass
class ConsumerState:
    consumer: str
    registered: bool
    lag_s: float | None = None  # age of the last finished tick
    last_seen_s: float | None = None
    last_tick: int | None = None
    current_batch: int | None = None
    pending_events: int | None = None  # committed, not yet in a finished batch
    pending_age_s: float | None = None  # how long the oldest has waited; None: none pending
    pending_exact: bool = True  # False: PgQ's count by sequence values
    dead_letters: int | None = None  # None: not known (PgQ)
    dead_by_table: dict[str, int] = field(default_factory=dict)  # ev_extra1 -> count
    draining: bool = False  # a session holds its drain lock


@dataclass
class TableState:
    source: str
    target: str
    mode: str
    location: str
    exists: bool
    delta_version: int | None = None
    last_tick: int | None = None  # the drain's idempotent-write version in the Delta log
    rows: int | None = None  # live rows: deleted rows (deletion vectors) are not counted
    quarantined: int = 0
    dead_letters: int | None = None
    failing: bool = False  # its events go to the quarantine until `cdc resync`
    failing_reason: str | None = None
    failing_since_tick: int | None = None
    snapshot: str | None = None  # running, copied, done or failed (cdc.targets.snapshots)
    snapshot_rows: int | None = None  # rows copied so far
    snapshot_reason: str | None = None  # why it failed
    column_mapping: bool = False  # its column names are mapped (cdc.targets.readers)
    mapping_unneeded: bool = False  # mapped, though none of its column names needs it
    readers: dict[str, str] = field(default_factory=dict)  # reader -> safe, refuses, wrong


@dataclass
class Health:
    state: str  # ok, draining or unhealthy
    reasons: list[str]  # why unhealthy, one line each
    max_pending_age_s: float


@dataclass
class RefusedTable:
    """A table a rule matches that the configuration does not replicate (its target would be
    another source's table: cdc.pipeline.tables); its events go to the quarantine."""

    source: str
    target: str
    reason: str
    quarantined: int = 0


@dataclass
class Status:
    queue: QueueState
    consumer: ConsumerState
    tables: list[TableState] = field(default_factory=list)
    refused: list[RefusedTable] = field(default_factory=list)
    quarantined_other: int = 0  # quarantined events of tables not in the configuration
    orphans: list[ConsumerState] = field(default_factory=list)  # other consumers, stuck
    health: Health = field(default_factory=lambda: Health(OK, [], MAX_PENDING_AGE))

    @property
    def failing(self) -> list[TableState]:
        return [t for t in self.tables if t.failing]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def queue_state(conn: psycopg.Connection, engine: Engine, queue: str) -> QueueState:
    cur = conn.cursor(row_factory=dict_row)
    info = cur.execute(_query(engine, "queue_info"), {"queue": queue}).fetchone()
    if info is None:
        raise psycopg.errors.UndefinedObject(f"queue {queue} does not exist")
    return QueueState(
        queue=queue,
        last_tick_id=info["last_tick_id"],
        ticker_lag_s=_seconds(info["ticker_lag"]),
        events_per_s=info["ev_per_sec"],
        ticker_paused=bool(info["queue_ticker_paused"]),
        external_ticker=bool(info["queue_external_ticker"]),
    )


def consumers(conn: psycopg.Connection, engine: Engine, queue: str) -> list[ConsumerState]:
    """Every consumer of the queue: exact pending events and dead letters on our engine
    (``get_consumer_status``), PgQ's counts by sequence values on a real PgQ."""
    exact = _has_status_function(conn, engine)
    query = _query(engine, "consumer_status" if exact else "consumer_info")
    cur = conn.cursor(row_factory=dict_row)
    return [_consumer_of_row(r, exact) for r in cur.execute(query, {"queue": queue})]


def _consumer_of_row(r: dict[str, Any], exact: bool) -> ConsumerState:
    """A row of ``get_consumer_status`` (exact) or of PgQ's ``get_consumer_info``, whose
    pending events have waited as long as the consumer's lag and whose dead letters are not
    known."""
    state = ConsumerState(
        consumer=r["consumer_name"],
        registered=True,
        lag_s=_seconds(r["lag"]),
        last_seen_s=_seconds(r["last_seen"]),
        last_tick=r["last_tick"],
        current_batch=r["current_batch"],
        pending_events=r["pending_events"],
        pending_exact=exact,
    )
    if exact:
        state.pending_age_s = _seconds(r["pending_age"])
        state.dead_letters = r["dead_letters"]
        state.dead_by_table = dict(r["dead_by_table"])
    elif r["pending_events"]:
        state.pending_age_s = state.lag_s
    return state


def _has_status_function(conn: psycopg.Connection, engine: Engine) -> bool:
    """Whether the engine has ``get_consumer_status`` (ours; not a real PgQ, nor an install
    older than this package: it then counts as PgQ does)."""
    return _has_function(conn, f"{engine.name}.get_consumer_status(text)")


def _has_function(conn: psycopg.Connection, signature: str) -> bool:
    row = conn.execute(sqlfiles.queries(QUERIES)["has_function"], {"function": signature})
    found = row.fetchone()
    return bool(found and found[0])


def registered_consumers(conn: psycopg.Connection) -> dict[str, list[str]]:
    """Every queue of our engine that has consumers: queue -> consumer names (empty when the
    engine is not installed)."""
    if not _has_function(conn, "cdc.get_consumer_info()"):
        return {}
    found: dict[str, list[str]] = {}
    for queue, name in conn.execute(sqlfiles.queries(QUERIES)["all_consumers"]).fetchall():
        found.setdefault(queue, []).append(name)
    return found


def render_consumers(found: list[ConsumerState]) -> str:
    """Consumers as a table with a header (``cdc consumer list``); empty without any."""
    if not found:
        return ""
    header = ("consumer", "pending", "oldest waiting", "lag", "last tick", "batch", "seen", "dead")
    rows = [
        (
            c.consumer,
            _fmt(c.pending_events),
            _fmt(c.pending_age_s, " s"),
            _fmt(c.lag_s, " s"),
            _fmt(c.last_tick),
            _fmt(c.current_batch),
            _fmt(c.last_seen_s, " s") + " ago",
            _fmt(c.dead_letters),
        )
        for c in found
    ]
    return _table(header, rows)


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join(
        "  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip()
        for r in [header, *rows]
    )


def capture_guards(conn: psycopg.Connection) -> dict[tuple[str, str], bool]:
    """(table, queue) -> whether a guard trigger regenerates its capture at the next write."""
    rows = conn.execute(sqlfiles.queries(QUERIES)["capture_guards"]).fetchall()
    return {(table, queue): bool(guarded) for table, queue, guarded in rows}


def queue_config(conn: psycopg.Connection, engine: Engine, queue: str) -> dict[str, str | None]:
    """A queue's settings (``cdc.get_queue_config``): name -> value as text, None: no limit."""
    return dict(conn.execute(_query(engine, "queue_config"), {"queue": queue}).fetchall())


def drain_lock_held(conn: psycopg.Connection, pipeline: Pipeline) -> bool:
    """Whether a session holds the consumer's drain lock (a batch or a snapshot chunk)."""
    key = source.lock_key(pipeline.source)
    row = conn.execute(_query(pipeline.source.engine, "drain_lock_held"), {"key": key}).fetchone()
    return bool(row and row[0])


def _consumer_state(
    conn: psycopg.Connection, pipeline: Pipeline
) -> tuple[ConsumerState, list[ConsumerState]]:
    """The pipeline's consumer, and the queue's other consumers."""
    src = pipeline.source
    found = consumers(conn, src.engine, src.queue)
    mine = next((c for c in found if c.consumer == src.consumer), None)
    state = mine if mine is not None else ConsumerState(src.consumer, registered=False)
    state.draining = drain_lock_held(conn, pipeline)
    return state, [c for c in found if c.consumer != src.consumer]


def health(status: Status, max_pending_age: float) -> Health:
    """The pipeline's health from its status (see the module's docstring)."""
    c = status.consumer
    reasons: list[str] = []
    old = c.pending_age_s is not None and c.pending_age_s > max_pending_age
    if old and not c.draining:
        reasons.append(
            f"{c.pending_events:,} pending event(s), the oldest waiting {c.pending_age_s:,.0f} s"
            f" (over {max_pending_age:,.0f} s) and no drain at work: run `cdc drain`, or check"
            " that its schedule runs"
        )
    for t in status.failing:
        reasons.append(f"table {t.target} is failing")
    for r in status.refused:
        reasons.append(f"table {r.source} is not replicated: the configuration refuses it")
    for t in status.tables:
        if t.snapshot == snapshots.FAILED:
            reasons.append(f"the snapshot of {t.target} failed")
    state = UNHEALTHY if reasons else DRAINING if c.draining else OK
    return Health(state, reasons, max_pending_age)


def collect(pipeline: Pipeline, max_pending_age: float = MAX_PENDING_AGE) -> Status:
    """The pipeline's status, its health judged with the threshold max_pending_age (s)."""
    src = pipeline.source
    with psycopg.connect(src.dsn, autocommit=True) as conn:
        queue = queue_state(conn, src.engine, src.queue)
        consumer, others = _consumer_state(conn, pipeline)
        incarnation = source.incarnation(conn, src)
    quarantined = quarantine.open_counts_of(pipeline)  # replayed and discarded not counted
    marks = failing.read_local(pipeline.table(pipeline.failing_table))
    copies = snapshots.read_local(pipeline.table(snapshots.table_name(pipeline.quarantine)))
    status = Status(queue, consumer)
    status.orphans = [
        c for c in others if c.pending_age_s is not None and c.pending_age_s > max_pending_age
    ]
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
            state.column_mapping = table.is_mapped()
            names = [f.name for f in table.table.schema().fields]
            state.mapping_unneeded = state.column_mapping and not any(map(needs_mapping, names))
            state.readers = readers.verdicts(table)
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
    status.refused = [
        RefusedTable(r.source, r.target, r.reason, quarantined.get(r.source, 0))
        for r in pipeline.refused
    ]
    known = {t.source for t in pipeline.tables} | {r.source for r in pipeline.refused}
    status.quarantined_other = sum(n for k, n in quarantined.items() if k not in known)
    status.health = health(status, max_pending_age)
    return status


def _fmt(value: float | int | None, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.1f}{unit}"
    return f"{value:,}{unit}"


def render(status: Status) -> str:
    """The status as a readable table, its health first."""
    q, c, h = status.queue, status.consumer, status.health
    lines = [f"health: {h.state.upper() if h.state == UNHEALTHY else h.state}"]
    lines += [f"  {reason}" for reason in h.reasons]
    rate = "" if q.events_per_s is None else f", {_fmt(q.events_per_s, ' events/s')}"
    ticker = ", ticker paused" if q.ticker_paused else ""
    lines.append(
        f"queue {q.queue}: last tick {_fmt(q.last_tick_id)}, {_fmt(q.ticker_lag_s, ' s')} ago"
        f"{rate}{ticker}"
    )
    if not c.registered:
        lines.append(f"consumer {c.consumer}: not registered (the first drain registers it)")
    else:
        lines.append(
            f"consumer {c.consumer}: {_pending(c)}, lag {_fmt(c.lag_s, ' s')},"
            f" last tick {_fmt(c.last_tick)}, batch {_fmt(c.current_batch)},"
            f" seen {_fmt(c.last_seen_s, ' s')} ago, dead letters {_fmt(c.dead_letters)}"
            + (", draining (a drain or snapshot holds its lock)" if c.draining else "")
        )
    for o in status.orphans:
        lines.append(
            f"orphan consumer {o.consumer}: {_pending(o)}, last batch {_fmt(o.last_seen_s, ' s')}"
            " ago; it holds back the rotation of the queue's event tables: `cdc consumer"
            f" unregister {q.queue} {o.consumer}` if nothing uses it"
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
    lines.append(_table(header, rows))
    if status.quarantined_other:
        lines.append(f"quarantined events of tables not configured: {status.quarantined_other:,}")
    for r in status.refused:
        lines.append(
            f"REFUSED {r.source} (its events go to the quarantine: {r.quarantined:,} so far):"
            f" {r.reason}"
        )
    for t in status.failing:
        lines.append(
            f"FAILING {t.target} since tick {_fmt(t.failing_since_tick)}: {t.failing_reason}"
            f" (its events go to the quarantine; fix the cause, then `cdc resync {t.source}`)"
        )
    lines += [_mapping(t) for t in status.tables if t.column_mapping]
    for t in status.tables:
        if t.snapshot == snapshots.FAILED:
            lines.append(
                f"SNAPSHOT FAILED {t.target} after {_fmt(t.snapshot_rows)} row(s):"
                f" {t.snapshot_reason} (fix the cause, then `cdc snapshot {t.source} --restart`)"
            )
    return "\n".join(lines)


def _mapping(t: TableState) -> str:
    """What a table with column mapping means for its readers."""
    by = {v: ", ".join(r for r, found in t.readers.items() if found == v) for v in readers.VERDICTS}
    text = f"COLUMN MAPPING {t.target}: read it with {by[readers.SAFE]}"
    if by[readers.WRONG]:
        text += f"; NULL in place of its mapped columns' values with {by[readers.WRONG]}"
    if by[readers.REFUSES]:
        text += f"; refused by {by[readers.REFUSES]}"
    if t.mapping_unneeded:
        text += (
            "; none of its column names needs mapping (a target made by an earlier version):"
            " setting its delta.columnMapping.mode to 'none' lets every reader read it"
            " (docs/operations.md, which readers read which tables)"
        )
    return text


def _pending(c: ConsumerState) -> str:
    """Its pending events and how long the oldest has waited."""
    text = f"{_fmt(c.pending_events)} pending event(s)"
    if not c.pending_exact:
        text += " (by sequence: rolled-back ones too)"
    if c.pending_age_s is not None:
        text += f", the oldest waiting {c.pending_age_s:,.1f} s"
    return text


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

    def __init__(self, pipeline: Pipeline, max_pending_age: float = MAX_PENDING_AGE) -> None:
        self.pipeline = pipeline
        self.max_pending_age = max_pending_age

    def collect(self) -> Iterator[Metric]:
        yield from metrics(collect(self.pipeline, self.max_pending_age))


class _Fixed(Collector):
    """The metrics of one status already collected."""

    def __init__(self, status: Status) -> None:
        self.status = status

    def collect(self) -> Iterator[Metric]:
        yield from metrics(self.status)


def to_prometheus(status: Status) -> str:
    """The status in Prometheus' text format (the same collect as the exit code's)."""
    from prometheus_client import generate_latest

    reg = CollectorRegistry()
    reg.register(_Fixed(status))
    return generate_latest(reg).decode()


def metrics(status: Status) -> Iterator[Metric]:
    q, c, h = status.queue, status.consumer, status.health
    labels = {"queue": q.queue}

    def gauge(name: str, doc: str, value: float | None, **extra: str) -> Iterator[Metric]:
        if value is None:
            return
        family = GaugeMetricFamily(name, doc, labels=[*labels, *extra])
        family.add_metric([*labels.values(), *extra.values()], float(value))
        yield family

    yield from gauge(
        "cdc_pipeline_unhealthy",
        "1 when unhealthy: pending events older than the threshold and no drain at work, a"
        " failing table, a failed snapshot or a refused table (cdc status exits 3)",
        int(h.state == UNHEALTHY),
    )
    yield from gauge(
        "cdc_pipeline_refused_tables",
        "Tables a rule matches that the configuration refuses: their target would be another"
        " source's table (their events go to the quarantine)",
        len(status.refused),
    )
    yield from gauge(
        "cdc_pipeline_max_pending_age_seconds", "The threshold of unhealthy", h.max_pending_age_s
    )
    yield from gauge("cdc_queue_ticker_lag_seconds", "Age of the last tick", q.ticker_lag_s)
    yield from gauge("cdc_queue_last_tick_id", "Id of the last tick", q.last_tick_id)
    if c.registered:
        who = {"consumer": c.consumer}
        yield from gauge("cdc_consumer_lag_seconds", "Age of its last tick", c.lag_s, **who)
        yield from gauge(
            "cdc_consumer_pending_events",
            "Committed events not yet in a finished batch",
            c.pending_events,
            **who,
        )
        yield from gauge(
            "cdc_consumer_pending_age_seconds",
            "How long the oldest pending event has waited (0: none pending)",
            c.pending_age_s or 0.0,
            **who,
        )
        yield from gauge(
            "cdc_consumer_draining", "1 while a drain or snapshot holds its lock", c.draining, **who
        )
        yield from gauge("cdc_consumer_last_tick_id", "Last finished tick", c.last_tick, **who)
        yield from gauge("cdc_consumer_dead_letters", "Dead letters", c.dead_letters, **who)
    if status.orphans:
        orphan = GaugeMetricFamily(
            "cdc_queue_orphan_consumer_pending_age_seconds",
            "Another consumer of the queue with pending events older than the threshold: it"
            " holds back rotation",
            labels=["queue", "consumer"],
        )
        for o in status.orphans:
            orphan.add_metric([q.queue, o.consumer], o.pending_age_s or 0.0)
        yield orphan
    version = GaugeMetricFamily("cdc_table_delta_version", "Delta version", labels=["target"])
    applied = GaugeMetricFamily(
        "cdc_table_last_tick_id", "Tick of the last batch applied", labels=["target"]
    )
    rows = GaugeMetricFamily(
        "cdc_table_rows",
        "Live rows in the Delta table (deleted rows not counted)",
        labels=["target"],
    )
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


def registry(pipeline: Pipeline, max_pending_age: float = MAX_PENDING_AGE) -> CollectorRegistry:
    reg = CollectorRegistry()
    reg.register(PipelineCollector(pipeline, max_pending_age))
    return reg


def _ticker_behind(info: dict[str, Any]) -> bool:
    """The ticker's own view of a queue: not ticked within twice its idle period (a running
    ticker ticks an idle queue once per idle period), unless paused or ticked elsewhere."""
    if info["queue_ticker_paused"] or info["queue_external_ticker"]:
        return False
    lag = _seconds(info["ticker_lag"])
    idle = _seconds(info["queue_ticker_idle_period"]) or 60.0
    return lag is None or lag > 2 * idle


class TickerCollector(Collector):
    """Prometheus metrics of the ticker: every queue of every database it serves. They say
    whether the ticker keeps up, not whether a pipeline is healthy (``cdc status`` does)."""

    def __init__(self, dsns: list[str]) -> None:
        self.dsns = dsns

    def collect(self) -> Iterator[Metric]:
        lag = GaugeMetricFamily(
            "cdc_queue_ticker_lag_seconds", "Age of the last tick", labels=["database", "queue"]
        )
        behind = GaugeMetricFamily(
            "cdc_queue_ticker_stalled",
            "1 when the queue was not ticked within twice its idle period",
            labels=["database", "queue"],
        )
        for dsn in self.dsns:
            with psycopg.connect(dsn, autocommit=True) as conn:
                db = conn.info.dbname
                cur = conn.cursor(row_factory=dict_row)
                for info in cur.execute(sqlfiles.queries(QUERIES)["all_queue_info"]):
                    key = [db, info["queue_name"]]
                    lag.add_metric(key, _seconds(info["ticker_lag"]) or 0.0)
                    behind.add_metric(key, float(_ticker_behind(info)))
        yield from (lag, behind)
