"""Producer and consumer API over the queue engine's SQL functions.

A consumer takes a batch as a context::

    consumer = Consumer(conn, "orders", "delta")
    with consumer.batch() as batch:
        if batch is not None:
            for chunk in batch.chunks():        # bounded lists of Event
                apply(chunk)
    # leaving the block finishes the batch; an exception leaves it open for the next try

This module is the public face: ``Queue`` (administration) and ``Producer`` here, the one
consumer client from ``cdc.pg.consumer`` (``Consumer``) and ``cdc.pg.batch`` (``Batch``,
``BatchInfo``, ``Event``). Queue administration and producing are our engine's (``cdc``);
the consumer also reads a real PgQ queue (``cdc.pg.engine``).

Every engine error arrives as a typed exception from ``cdc.errors``.
"""

from __future__ import annotations

from typing import Any

import psycopg

from cdc import errors
from cdc.pg.batch import DEFAULT_CHUNK_SIZE, DEFAULT_WORK_MEM, Batch, BatchInfo, Event
from cdc.pg.consumer import Consumer
from cdc.pg.engine import CDC

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_WORK_MEM",
    "Batch",
    "BatchInfo",
    "Consumer",
    "Event",
    "Producer",
    "Queue",
]


class Queue:
    """Administration of one queue."""

    def __init__(self, conn: psycopg.Connection, name: str) -> None:
        self.conn = conn
        self.name = name

    def create(self) -> bool:
        """Create the queue; False when it existed already."""
        return CDC.call(self.conn, "create_queue", queue=self.name) == 1

    def drop(self, force: bool = False) -> None:
        """Drop the queue and its events; ``force`` also drops it while consumers remain."""
        CDC.call(self.conn, "drop_queue", queue=self.name, force=force)

    def set_config(self, param: str, value: object) -> None:
        """Set one queue parameter (see cdc.set_queue_config); None means no limit."""
        text = (
            None if value is None else str(value).lower() if isinstance(value, bool) else str(value)
        )
        CDC.call(self.conn, "set_queue_config", queue=self.name, param=param, value=text)

    def tick(self) -> int | None:
        """Tick the queue if a tick is due; the new tick id or None."""
        return CDC.call(self.conn, "ticker_queue", queue=self.name)

    def force_tick(self) -> int:
        """Make the next ticker call tick; returns the last tick id."""
        return CDC.call(self.conn, "force_tick", queue=self.name)

    def info(self) -> dict[str, Any]:
        """The queue's row of cdc.get_queue_info()."""
        try:
            cur = self.conn.cursor(row_factory=psycopg.rows.dict_row)
            row = cur.execute(CDC.query("queue_info"), {"queue": self.name}).fetchone()
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
        return CDC.call(
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
