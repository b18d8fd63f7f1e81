"""The queue's side of the status, read from PostgreSQL with the named queries of
``queries_status.sql``: the queue, its consumers, the drain lock, the captures' guards and a
queue's settings. ``cdc consumer``, ``cdc queue config`` and ``cdc capture`` read them too."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from cdc.config import Pipeline
from cdc.ops.status.model import ConsumerState, QueueState
from cdc.pg import source, sqlfiles
from cdc.pg.engine import Engine

QUERIES = "queries_status.sql"


def seconds(value: timedelta | None) -> float | None:
    """An interval PostgreSQL returned, in seconds (None stays None)."""
    return None if value is None else value.total_seconds()


def named(name: str) -> str:
    """The text of a query of QUERIES that names no engine's schema."""
    return sqlfiles.queries(QUERIES)[name]


def _query(engine: Engine, name: str) -> sql.Composed:
    return sql.SQL(named(name)).format(schema=engine.schema)


def queue_state(conn: psycopg.Connection, engine: Engine, queue: str) -> QueueState:
    cur = conn.cursor(row_factory=dict_row)
    info = cur.execute(_query(engine, "queue_info"), {"queue": queue}).fetchone()
    if info is None:
        raise psycopg.errors.UndefinedObject(f"queue {queue} does not exist")
    return QueueState(
        queue=queue,
        last_tick_id=info["last_tick_id"],
        ticker_lag_s=seconds(info["ticker_lag"]),
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
        lag_s=seconds(r["lag"]),
        last_seen_s=seconds(r["last_seen"]),
        last_tick=r["last_tick"],
        current_batch=r["current_batch"],
        pending_events=r["pending_events"],
        pending_exact=exact,
    )
    if exact:
        state.pending_age_s = seconds(r["pending_age"])
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
    row = conn.execute(named("has_function"), {"function": signature})
    found = row.fetchone()
    return bool(found and found[0])


def registered_consumers(conn: psycopg.Connection) -> dict[str, list[str]]:
    """Every queue of our engine that has consumers: queue -> consumer names (empty when the
    engine is not installed)."""
    if not _has_function(conn, "cdc.get_consumer_info()"):
        return {}
    found: dict[str, list[str]] = {}
    for queue, name in conn.execute(named("all_consumers")).fetchall():
        found.setdefault(queue, []).append(name)
    return found


def capture_guards(conn: psycopg.Connection) -> dict[tuple[str, str], bool]:
    """(table, queue) -> whether a guard trigger regenerates its capture at the next write."""
    rows = conn.execute(named("capture_guards")).fetchall()
    return {(table, queue): bool(guarded) for table, queue, guarded in rows}


def queue_config(conn: psycopg.Connection, engine: Engine, queue: str) -> dict[str, str | None]:
    """A queue's settings (``cdc.get_queue_config``): name -> value as text, None: no limit."""
    return dict(conn.execute(_query(engine, "queue_config"), {"queue": queue}).fetchall())


def drain_lock_held(conn: psycopg.Connection, pipeline: Pipeline) -> bool:
    """Whether a session holds the consumer's drain lock (a batch or a snapshot chunk)."""
    key = source.lock_key(pipeline.source)
    row = conn.execute(_query(pipeline.source.engine, "drain_lock_held"), {"key": key}).fetchone()
    return bool(row and row[0])
