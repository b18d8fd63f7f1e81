"""One slice of a micro-batch read by a Spark task: an ev_id range of the open queue batch.

Each task connects to PostgreSQL with the stream's DSN (the executors must reach it, as
the role that owns the consumer) and reads its range through a server-side cursor, in
chunks of ``CHUNK`` events: a task holds one chunk, whatever the batch's size. Our engine
reads a range with ``get_batch_events(batch, from, to)`` (one index range scan); PgQ has no
such function, and its batch is one slice read whole. The batch is open until Spark
commits the micro-batch, so a task tried again, or the micro-batch read again by a second
action of ``foreachBatch``, reads the same events.

Each event becomes a row of cdc.stream.events; a table's key columns are read once per
task, on a second connection (``cdc.pg.pgtypes.keyed_columns``, the drain's rule).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import psycopg
from psycopg import sql
from psycopg.rows import class_row

from cdc.errors import CdcError, translate
from cdc.pg.batch import DEFAULT_WORK_MEM
from cdc.pg.pgtypes import keyed_columns
from cdc.stream.events import RawEvent, row
from cdc.stream.feed import Slice
from cdc.stream.options import StreamOptions

__all__ = ["CHUNK", "Keys", "read_slice"]

log = logging.getLogger("cdc.stream")

CHUNK = 5000  # events fetched at a time by a task


class Keys:
    """The key columns of the tables a task meets, read once each (None: unreadable)."""

    def __init__(self, dsn: str, capture_queue: str | None) -> None:
        self.dsn = dsn
        self.capture_queue = capture_queue
        self._conn: psycopg.Connection | None = None
        self._known: dict[str, tuple[str, ...] | None] = {}

    def __call__(self, table: str) -> tuple[str, ...] | None:
        if table not in self._known:
            self._known[table] = self._read(table)
        return self._known[table]

    def _read(self, table: str) -> tuple[str, ...] | None:
        schema, _, name = table.partition(".")
        if self._conn is None:
            self._conn = psycopg.connect(self.dsn, autocommit=True)
        try:
            columns = keyed_columns(self._conn, schema, name, self.capture_queue)
        except (CdcError, psycopg.Error) as exc:
            log.warning("no key for the events of %s: %s", table, exc)
            return None
        return tuple(c.name for c in columns if c.is_key)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()


def events_query(options: StreamOptions, part: Slice) -> sql.Composed:
    """The query of one slice's events, in ev_id order."""
    engine = options.source.engine
    columns = sql.SQL("ev_id, ev_time, ev_txid::bigint, ev_type, ev_data, ev_extra1")
    if engine.has_batch_slices:
        return sql.SQL("select {} from {}.get_batch_events({}, {}, {})").format(
            columns,
            engine.schema,
            sql.Literal(part.batch_id),
            sql.Literal(part.lo),
            sql.Literal(part.hi),
        )
    if part.lo is not None or part.hi is not None:
        raise CdcError(f"the {engine.name} queue engine reads a batch in one slice")
    return sql.SQL("select {} from {}.get_batch_events({})").format(
        columns, engine.schema, sql.Literal(part.batch_id)
    )


def read_slice(options: StreamOptions, part: Slice) -> Iterator[tuple]:
    """The stream's rows of one slice (cdc.stream.events.row), the table option applied."""
    keys = Keys(options.source.dsn, options.source.capture_queue)
    wanted = options.table
    try:
        with psycopg.connect(options.source.dsn) as conn, conn.transaction():
            conn.execute("select pg_catalog.set_config('work_mem', %s, true)", (DEFAULT_WORK_MEM,))
            name = f"cdc_stream_{part.batch_id}"
            with conn.cursor(name, row_factory=class_row(RawEvent)) as cur:
                cur.itersize = CHUNK
                cur.execute(events_query(options, part))
                for event in cur:
                    if wanted is not None and event.ev_extra1 != wanted:
                        continue
                    found = row(event, part.tick_id, part.tick_time, keys)
                    if found is not None:
                        yield found
    except psycopg.Error as exc:
        raise translate(exc) from exc
    finally:
        keys.close()
