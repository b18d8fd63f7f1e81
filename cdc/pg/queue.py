"""Producer and consumer API over the queue engine's SQL functions.

A consumer takes a batch as a context::

    consumer = Consumer(conn, "orders", "delta")
    with consumer.batch() as batch:
        if batch is not None:
            for chunk in batch.chunks():        # bounded lists of Event
                apply(chunk)
    # leaving the block finishes the batch; an exception leaves it open for the next try

Every engine error arrives as a typed exception from ``cdc.errors``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import class_row

from cdc import errors
from cdc.pg import sqlfiles

DEFAULT_CHUNK_SIZE = 5000
# The batch query sorts by ev_id; with PostgreSQL's default work_mem (4MB) the sort of a large
# batch spills to disk. Reading sets this for the batch's transaction.
DEFAULT_WORK_MEM = "128MB"


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


def _call(conn: psycopg.Connection, name: str, **params: Any) -> Any:
    """Run a named query and return the first column of its first row."""
    try:
        row = conn.execute(sqlfiles.query(name), params).fetchone()
    except psycopg.Error as exc:
        raise errors.translate(exc) from exc
    return None if row is None else row[0]


def _call_in_savepoint(conn: psycopg.Connection, name: str, **params: Any) -> Any:
    """``_call`` in a savepoint: an error leaves the surrounding transaction usable."""
    try:
        with conn.transaction():
            return _call(conn, name, **params)
    except psycopg.Error as exc:
        raise errors.translate(exc) from exc


class Queue:
    """Administration of one queue."""

    def __init__(self, conn: psycopg.Connection, name: str) -> None:
        self.conn = conn
        self.name = name

    def create(self) -> bool:
        """Create the queue; False when it existed already."""
        return _call(self.conn, "create_queue", queue=self.name) == 1

    def drop(self, force: bool = False) -> None:
        """Drop the queue and its events; ``force`` also drops it while consumers remain."""
        _call(self.conn, "drop_queue", queue=self.name, force=force)

    def set_config(self, param: str, value: object) -> None:
        """Set one queue parameter (see cdc.set_queue_config); None means no limit."""
        text = (
            None if value is None else str(value).lower() if isinstance(value, bool) else str(value)
        )
        _call(self.conn, "set_queue_config", queue=self.name, param=param, value=text)

    def tick(self) -> int | None:
        """Tick the queue if a tick is due; the new tick id or None."""
        return _call(self.conn, "ticker_queue", queue=self.name)

    def force_tick(self) -> int:
        """Make the next ticker call tick; returns the last tick id."""
        return _call(self.conn, "force_tick", queue=self.name)

    def info(self) -> dict[str, Any]:
        """The queue's row of cdc.get_queue_info()."""
        try:
            cur = self.conn.cursor(row_factory=psycopg.rows.dict_row)
            row = cur.execute(sqlfiles.query("queue_info"), {"queue": self.name}).fetchone()
        except psycopg.Error as exc:
            raise errors.translate(exc) from exc
        assert row is not None
        return row


class Producer:
    """Inserts events into one queue."""

    def __init__(self, conn: psycopg.Connection, queue: str) -> None:
        self.conn = conn
        self.queue = queue

    def insert(
        self,
        ev_type: str,
        ev_data: str | None,
        extra1: str | None = None,
        extra2: str | None = None,
        extra3: str | None = None,
        extra4: str | None = None,
    ) -> int:
        """Insert one event; returns its ev_id."""
        return _call(
            self.conn,
            "insert_event",
            queue=self.queue,
            ev_type=ev_type,
            ev_data=ev_data,
            extra1=extra1,
            extra2=extra2,
            extra3=extra3,
            extra4=extra4,
        )


class Batch:
    """An open batch of one consumer. Read it with ``chunks()`` or ``events()``."""

    def __init__(
        self,
        conn: psycopg.Connection,
        info: BatchInfo,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        work_mem: str | None = DEFAULT_WORK_MEM,
    ) -> None:
        self.conn = conn
        self.info = info
        self.chunk_size = chunk_size
        self.work_mem = work_mem

    @property
    def batch_id(self) -> int:
        return self.info.batch_id

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
                _call(self.conn, "open_batch_cursor", batch_id=self.batch_id, cursor=name)
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

    def retry(self, ev_id: int, seconds: int = 60) -> None:
        """Deliver this event again to this consumer, in a batch after ``seconds``.

        Like ``retry_all`` and ``dead``, it runs in a savepoint: when the engine refuses (say,
        the event is not in the batch), the batch's transaction stays usable.
        """
        _call_in_savepoint(
            self.conn, "event_retry", batch_id=self.batch_id, ev_id=ev_id, seconds=seconds
        )

    def retry_all(self, seconds: int = 60) -> int:
        """Deliver every event of the batch again later; returns how many."""
        return _call_in_savepoint(self.conn, "batch_retry", batch_id=self.batch_id, seconds=seconds)

    def dead(self, ev_id: int, reason: str) -> None:
        """Give up on this event: it goes to cdc.dead_letter with the reason."""
        _call_in_savepoint(
            self.conn, "event_dead", batch_id=self.batch_id, ev_id=ev_id, reason=reason
        )

    def finish(self) -> None:
        """Close the batch: the consumer moves past it."""
        _call(self.conn, "finish_batch", batch_id=self.batch_id)


class Consumer:
    """One consumer of one queue."""

    def __init__(
        self,
        conn: psycopg.Connection,
        queue: str,
        name: str,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        work_mem: str | None = DEFAULT_WORK_MEM,
    ) -> None:
        if chunk_size < 1:
            raise errors.ConfigError(f"chunk_size must be 1 or more, not {chunk_size}")
        self.conn = conn
        self.queue = queue
        self.name = name
        self.chunk_size = chunk_size
        self.work_mem = work_mem

    def register(self) -> bool:
        """Subscribe at the queue's latest tick; False if registered already. The consumer
        belongs to the session's role: other roles (but cdc_admin) get NotConsumerRole."""
        return _call(self.conn, "register_consumer", queue=self.queue, consumer=self.name) == 1

    def register_at(self, tick_id: int) -> bool:
        """Subscribe at (or move to) a given tick; True if newly registered."""
        return (
            _call(
                self.conn,
                "register_consumer_at",
                queue=self.queue,
                consumer=self.name,
                tick_id=tick_id,
            )
            == 1
        )

    def unregister(self) -> None:
        """Remove the subscription and its pending retries."""
        _call(self.conn, "unregister_consumer", queue=self.queue, consumer=self.name)

    def set_owner(self, role: str | None) -> None:
        """Give the consumer to ``role`` (exact name; None: cdc_admin members only). Only its
        members and cdc_admin members may then act for it (an administrator's call)."""
        _call(self.conn, "set_consumer_owner", queue=self.queue, consumer=self.name, role=role)

    def next_batch(
        self,
        min_lag: dt.timedelta | None = None,
        min_count: int | None = None,
        min_interval: dt.timedelta | None = None,
    ) -> Batch | None:
        """The open batch, or the next one (see cdc.next_batch_custom); None if none yet."""
        params = {
            "queue": self.queue,
            "consumer": self.name,
            "min_lag": min_lag,
            "min_count": min_count,
            "min_interval": min_interval,
        }
        try:
            cur = self.conn.cursor(row_factory=class_row(BatchInfo))
            info = cur.execute(sqlfiles.query("next_batch_custom"), params).fetchone()
        except psycopg.Error as exc:
            raise errors.translate(exc) from exc
        if info is None or info.batch_id is None:
            return None
        return Batch(self.conn, info, self.chunk_size, self.work_mem)

    @contextmanager
    def batch(
        self,
        min_lag: dt.timedelta | None = None,
        min_count: int | None = None,
        min_interval: dt.timedelta | None = None,
    ) -> Iterator[Batch | None]:
        """Take the next batch for the block; finish it when the block ends normally.

        The batch is opened in a transaction of its own, the block runs in a second one that
        also finishes the batch. An exception rolls the block's transaction back (retries
        included) and leaves the batch open, so the next call returns the same batch.
        """
        with self.conn.transaction():
            batch = self.next_batch(min_lag, min_count, min_interval)
        if batch is None:
            yield None
            return
        with self.conn.transaction():
            yield batch
            batch.finish()
