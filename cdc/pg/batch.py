"""An open batch of one consumer, and the three ways to read its events.

- ``chunks()`` / ``events()``: Python ``Event`` values, at most ``chunk_size`` at a time,
  through a server-side cursor (our engine's ``open_batch_cursor``);
- ``arrow()``: Arrow record batches of ``EVENT_SCHEMA``, read with COPY in CSV form
  (``cdc.pg.copyreader``), memory bounded by the CSV block;
- ``jdbc_slices(parts)`` and ``jdbc_query(lo, hi)``: ranges of ev_ids and the subquery each
  range reads, for Spark's JDBC source (read in parallel by its executors).

Every way returns the events in ev_id order, exactly what ``get_batch_events`` returns.
Finishing the batch (``finish()``) moves the consumer past it; until then the next
``next_batch`` returns the same batch again (a reissued ``batch_id``, the same ``tick_id``).
"""

from __future__ import annotations

import datetime as dt
import itertools
import logging
from collections.abc import Iterator
from dataclasses import dataclass

import psycopg
import pyarrow as pa
from psycopg import sql
from psycopg.rows import class_row

from cdc import errors
from cdc.pg import copyreader
from cdc.pg.engine import CDC, Engine

__all__ = ["EVENT_SCHEMA", "Batch", "BatchInfo", "Event"]

log = logging.getLogger("cdc.source")

DEFAULT_CHUNK_SIZE = 5000
# The batch query sorts by ev_id; with PostgreSQL's default work_mem (4MB) the sort of a large
# batch spills to disk. Reading sets this for the batch's transaction.
DEFAULT_WORK_MEM = "128MB"

EVENT_SCHEMA = pa.schema(
    [
        ("ev_id", pa.int64()),
        ("ev_time", pa.timestamp("us", tz="UTC")),
        ("ev_txid", pa.int64()),
        ("ev_retry", pa.int32()),
        ("ev_type", pa.string()),
        ("ev_data", pa.string()),
        ("ev_extra1", pa.string()),
        ("ev_extra2", pa.string()),
        ("ev_extra3", pa.string()),
        ("ev_extra4", pa.string()),
    ]
)

# ev_time comes as UTC without an offset, which Arrow's parser reads as is
# per event in Arrow besides its text: ev_id, ev_time, ev_txid (8 bytes each), ev_retry (4),
# an offset of 4 bytes for each of the six text columns, validity bits
FIXED_BYTES = 56
SAMPLE_EVENTS = 1000  # events sampled to size a batch (Batch.sampled_bytes_per_event)
_CSV_SCHEMA = EVENT_SCHEMA.set(1, pa.field("ev_time", pa.timestamp("us")))
CSV_BLOCK = copyreader.BLOCK  # bytes of CSV parsed at a time


@dataclass(frozen=True, slots=True)
class Event:
    """One event as a batch returns it (PgQ's get_batch_events columns)."""

    ev_id: int
    ev_time: dt.datetime
    ev_txid: int
    ev_retry: int | None
    ev_type: str | None
    ev_data: str | None
    ev_extra1: str | None
    ev_extra2: str | None
    ev_extra3: str | None
    ev_extra4: str | None


@dataclass(frozen=True, slots=True)
class BatchInfo:
    """A batch's id and the ticks at both of its ends."""

    batch_id: int
    cur_tick_id: int
    prev_tick_id: int
    cur_tick_time: dt.datetime
    prev_tick_time: dt.datetime
    cur_tick_event_seq: int
    prev_tick_event_seq: int

    @property
    def events_upper_bound(self) -> int:
        """The event sequence's advance between the batch's ticks: most of its events have
        ids in between (retried events come on top)."""
        return (self.cur_tick_event_seq or 0) - (self.prev_tick_event_seq or 0)


class Batch:
    """An open batch of one consumer (see the module's docstring)."""

    def __init__(
        self,
        conn: psycopg.Connection,
        info: BatchInfo,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        work_mem: str | None = DEFAULT_WORK_MEM,
        engine: Engine = CDC,
    ) -> None:
        self.conn = conn
        self.info = info
        self.chunk_size = chunk_size
        self.work_mem = work_mem
        self.engine = engine

    @property
    def batch_id(self) -> int:
        return self.info.batch_id

    @property
    def tick_id(self) -> int:
        """The batch's end tick: stable across a reissued batch_id."""
        return self.info.cur_tick_id

    @property
    def events_upper_bound(self) -> int:
        return self.info.events_upper_bound

    def chunks(self) -> Iterator[list[Event]]:
        """The batch's events in ev_id order, at most ``chunk_size`` at a time.

        Reads through a server-side cursor inside a transaction (a savepoint when one is
        open already), so memory stays bounded whatever the batch's size. The consumer's
        ``work_mem`` applies to the transaction, so that the server sorts the batch in memory.
        """
        name = f"cdc_batch_{self.batch_id}"
        fetch = sql.SQL("fetch {} from {}").format(
            sql.Literal(self.chunk_size), sql.Identifier(name)
        )
        try:
            with self.conn.transaction():
                if self.work_mem:
                    self.conn.execute(
                        "select pg_catalog.set_config('work_mem', %s, true)", (self.work_mem,)
                    )
                self.engine.call(
                    self.conn, "open_batch_cursor", batch_id=self.batch_id, cursor=name
                )
                cur = self.conn.cursor(row_factory=class_row(Event))
                while rows := cur.execute(fetch).fetchall():
                    yield rows
                self.conn.execute(sql.SQL("close {}").format(sql.Identifier(name)))
        except psycopg.Error as exc:
            raise errors.translate(exc) from exc

    def events(self) -> Iterator[Event]:
        """The batch's events one by one, read in chunks."""
        for chunk in self.chunks():
            yield from chunk

    def arrow(self, block: int = CSV_BLOCK) -> Iterator[pa.RecordBatch]:
        """The batch's events as Arrow record batches of ``EVENT_SCHEMA``, in the order
        get_batch_events returns them (ev_id order: a function's rows are read in the order
        it returned them; not sorted again here, which cost a second sort of the batch), read
        with COPY in CSV form and parsed by Arrow in pieces of about ``block`` bytes (a
        larger event is a piece of its own: cdc.pg.copyreader); a piece is held about three
        times over while it is parsed."""
        query = sql.SQL(
            "copy (select ev_id, ev_time at time zone 'UTC', ev_txid::bigint, ev_retry, ev_type,"
            " ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4 from {}.get_batch_events({})"
            ") to stdout with (format csv)"
        ).format(self.engine.schema, sql.Literal(self.batch_id))
        try:
            for record_batch in copyreader.record_batches(self.conn, query, _CSV_SCHEMA, block):
                yield record_batch.cast(EVENT_SCHEMA)
        except psycopg.Error as exc:
            raise errors.translate(exc) from exc

    def sampled_bytes_per_event(self, sample: int = SAMPLE_EVENTS) -> float | None:
        """About how many Arrow bytes (``EVENT_SCHEMA``) an event of the batch takes: the
        text of the first ``sample`` event ids after the previous tick, plus the fixed
        columns and offsets (``FIXED_BYTES``). None without a slice function (PgQ: the
        whole batch would be read) or when the sample holds no event."""
        if not self.engine.has_batch_slices:
            return None
        first = self.info.prev_tick_event_seq or 0
        text = sql.SQL(" + ").join(
            sql.SQL("coalesce(octet_length({}), 0)").format(sql.Identifier(name))
            for name in ("ev_type", "ev_data", "ev_extra1", "ev_extra2", "ev_extra3", "ev_extra4")
        )
        query = sql.SQL("select count(*), sum({}) from {}.get_batch_events({}, {}, {})").format(
            text,
            self.engine.schema,
            sql.Literal(self.batch_id),
            sql.Literal(first),
            sql.Literal(first + sample + 1),
        )
        try:
            count, total = self.conn.execute(query).fetchone()
        except psycopg.Error as exc:
            raise errors.translate(exc) from exc
        return None if not count else FIXED_BYTES + int(total) / count

    def jdbc_slices(self, parts: int) -> list[tuple[int | None, int | None]]:
        """ev_id ranges [from, to) covering everything, the outer ones open: parts slices of
        the span between the batch's ticks' sequence positions."""
        return jdbc_slices(self.info, parts)

    def jdbc_query(self, lo: int | None, hi: int | None) -> str:
        """The subquery one JDBC slice reads (``jdbc_slices``)."""
        cols = ", ".join(EVENT_SCHEMA.names).replace("ev_txid", "ev_txid::bigint as ev_txid")
        lo_sql = "null" if lo is None else str(lo)
        hi_sql = "null" if hi is None else str(hi)
        events = f"{self.engine.name}.get_batch_events({self.batch_id}"
        if self.engine.has_batch_slices:
            return f"(select {cols} from {events}, {lo_sql}, {hi_sql})) e"
        # no slice function: each slice filters the whole batch
        bounds = [f"ev_id >= {lo}"] if lo is not None else []
        bounds += [f"ev_id < {hi}"] if hi is not None else []
        cond = " and ".join(bounds) or "true"
        return f"(select {cols} from {events}) where {cond}) e"

    def retry(self, ev_id: int, seconds: int = 60) -> None:
        """Deliver this event again to this consumer, in a batch after ``seconds``.

        Like ``retry_all`` and ``dead``, it runs in a savepoint: when the engine refuses (say,
        the event is not in the batch), the batch's transaction stays usable.
        """
        self.engine.call_in_savepoint(
            self.conn, "event_retry", batch_id=self.batch_id, ev_id=ev_id, seconds=seconds
        )

    def retry_all(self, seconds: int = 60) -> int:
        """Deliver every event of the batch again later; returns how many."""
        return self.engine.call_in_savepoint(
            self.conn, "batch_retry", batch_id=self.batch_id, seconds=seconds
        )

    def dead(self, ev_id: int, reason: str) -> None:
        """Give up on this event: it goes to cdc.dead_letter with the reason."""
        self.engine.call_in_savepoint(
            self.conn, "event_dead", batch_id=self.batch_id, ev_id=ev_id, reason=reason
        )

    def finish(self) -> None:
        """Close the batch: the consumer moves past it. BatchNotFound when it was not open
        (the SQL function, as PgQ's, only warns and returns 0)."""
        if not self.engine.call(self.conn, "finish_batch", batch_id=self.batch_id):
            raise errors.BatchNotFound(
                f"batch {self.batch_id} is not open: it was finished already, or never existed;"
                " take a new batch"
            )


def jdbc_slices(info: BatchInfo, parts: int) -> list[tuple[int | None, int | None]]:
    """ev_id ranges [from, to) covering everything, the outer ones open: parts slices of the
    span between the batch's ticks' sequence positions."""
    first = info.prev_tick_event_seq or 0
    span = max(info.events_upper_bound, parts)
    bounds = [first + span * i // parts for i in range(1, parts)]
    edges: list[int | None] = [None, *bounds, None]
    return list(itertools.pairwise(edges))
