"""One consumer of one queue: the one client the tests, the drain, the snapshot and verify use.

A consumer takes a batch as a context::

    consumer = Consumer(conn, "orders", "delta")
    with consumer.batch() as batch:
        if batch is not None:
            for chunk in batch.chunks():        # bounded lists of Event
                apply(chunk)
    # leaving the block finishes the batch; an exception leaves it open for the next try

or, on an autocommit connection as the drain does, ``next_batch()`` then ``batch.finish()``
once the batch is applied. ``Consumer.for_source`` makes the consumer of a pipeline's
``[source]``, on its engine (``cdc.pg.engine``): our ``cdc`` schema or a real PgQ's ``pgq``.

Every engine error arrives as a typed exception from ``cdc.errors``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg.rows import class_row

from cdc import errors
from cdc.config import Source
from cdc.pg.batch import DEFAULT_CHUNK_SIZE, DEFAULT_WORK_MEM, Batch, BatchInfo
from cdc.pg.engine import CDC, Engine

__all__ = ["Consumer"]


class Consumer:
    """One consumer of one queue."""

    def __init__(
        self,
        conn: psycopg.Connection,
        queue: str,
        name: str,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        work_mem: str | None = DEFAULT_WORK_MEM,
        engine: Engine = CDC,
    ) -> None:
        if chunk_size < 1:
            raise errors.ConfigError(f"chunk_size must be 1 or more, not {chunk_size}")
        self.conn = conn
        self.queue = queue
        self.name = name
        self.chunk_size = chunk_size
        self.work_mem = work_mem
        self.engine = engine

    @classmethod
    def for_source(cls, conn: psycopg.Connection, src: Source) -> Consumer:
        """The consumer of a pipeline's source, on its engine."""
        return cls(conn, src.queue, src.consumer, engine=src.engine)

    def register(self) -> bool:
        """Subscribe at the queue's latest tick; False if registered already. The consumer
        belongs to the session's role: other roles (but cdc_admin) get NotConsumerRole."""
        call = self.engine.call
        return call(self.conn, "register_consumer", queue=self.queue, consumer=self.name) == 1

    def register_at(self, tick_id: int) -> bool:
        """Subscribe at (or move to) a given tick; True if newly registered."""
        return (
            self.engine.call(
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
        self.engine.call(self.conn, "unregister_consumer", queue=self.queue, consumer=self.name)

    def set_owner(self, role: str | None) -> None:
        """Give the consumer to ``role`` (exact name; None: cdc_admin members only). Only its
        members and cdc_admin members may then act for it (an administrator's call)."""
        self.engine.call(
            self.conn, "set_consumer_owner", queue=self.queue, consumer=self.name, role=role
        )

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
            info = cur.execute(self.engine.query("next_batch_custom"), params).fetchone()
        except psycopg.Error as exc:
            raise errors.translate(exc) from exc
        if info is None or info.batch_id is None:
            return None
        return Batch(self.conn, info, self.chunk_size, self.work_mem, self.engine)

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

    def ticks_within(self, max_events: int) -> int | None:
        """The ``min_count`` that makes the next batch join as many ticks as fit in
        max_events (at least one tick); None for one tick (a batch is open already, or no
        later tick fits). Read through ``next_batch_ticks`` (a cdc_reader may call it)."""
        found = self.engine.call(
            self.conn, "next_batch_ticks", queue=self.queue, consumer=self.name,
            max_events=max_events,
        )  # fmt: skip
        return None if found is None or found < 1 else int(found)

    def tick(self, only_if_new: bool = False) -> int | None:
        """Makes a tick of the queue now (for runs without a ticker daemon): events committed
        before this call are in the next batches. only_if_new: only when events may have
        arrived since the last tick (a follow-mode drain asks often). Returns the new tick's
        id (None when none was made)."""
        if only_if_new and not self.engine.call(
            self.conn, "queue_has_new_events", queue=self.queue
        ):
            return None
        self.engine.call(self.conn, "force_tick", queue=self.queue)
        tick_id = self.engine.call(self.conn, "ticker_queue", queue=self.queue)
        return None if tick_id is None else int(tick_id)

    def position(self) -> int | None:
        """The consumer's last finished tick (None when it is not registered)."""
        found = self.engine.call(
            self.conn, "consumer_position", queue=self.queue, consumer=self.name
        )
        return None if found is None else int(found)

    def position_time(self) -> tuple[int, dt.datetime] | None:
        """The consumer's last finished tick and the time of that tick (None when it is not
        registered): every batch up to it is applied, so the tables can be read as of it
        (cdc.ops.at_tick)."""
        try:
            row = self.conn.execute(
                self.engine.query("consumer_position_time"),
                {"queue": self.queue, "consumer": self.name},
            ).fetchone()
        except psycopg.Error as exc:
            raise errors.translate(exc) from exc
        if row is None or row[0] is None:
            return None
        return int(row[0]), row[1]
