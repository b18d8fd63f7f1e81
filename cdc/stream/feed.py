"""The stream's side of the queue, on Spark's driver: the consumer, its batches and the ticks.

The stream reader (cdc.stream.source) calls one ``Feed`` method per call Spark makes:

- ``start()`` (``initialOffset``, a new checkpoint): registers the stream's consumer at the
  queue's latest tick when it is not registered, and starts at its position;
- ``latest(start)`` (``latestOffset``): ``start`` ends the last micro-batch Spark committed,
  so the consumer is settled there first (cdc.stream.offsets: a queue batch the sink has
  committed is finished); then the next queue batch is opened (``next_batch``, joining ticks
  up to ``max_events``) and its end tick is the next offset. Without one, the stream ticks
  the queue when events wait (option ``tick``), at most every ``poll_interval``;
- ``slices(start, end)`` (``partitions``): the open queue batch from ``start`` must end at
  ``end``, as it does whenever this feed opened it, also after a restart (``next_batch``
  returns the open batch until it is finished); its ev_id ranges (``Slice``) are read by the
  executors (cdc.stream.reading);
- ``settle(end)`` (``commit``): Spark committed the micro-batch: its queue batch is finished.
  Spark calls ``commit`` lazily (when it plans the next micro-batch), and not at all for the
  last one before a stop or a crash: ``latest`` settles then;
- ``prepare_available_now()``: for ``trigger(availableNow=True)``, the queue's last tick now
  (after a tick of its own) is where the stream stops; batches then take one tick each, so
  that none ends past it.

The consumer is held by one stream at a time: a session advisory lock, kept by the feed's
connection while the query runs, refuses a second stream with the same consumer (after
LOCK_WAIT seconds: the session of a stream that just crashed may take a moment to end).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import dataclass

import psycopg
from psycopg import sql

from cdc import errors
from cdc.pg.batch import BatchInfo, jdbc_slices
from cdc.pg.consumer import Consumer
from cdc.pg.source import incarnation
from cdc.stream.offsets import ConsumerState, Offset, Step, settle_step
from cdc.stream.options import StreamOptions

__all__ = ["Feed", "Slice", "lock_key"]

log = logging.getLogger("cdc.stream")

LOCK_WAIT = 30.0  # seconds a stream waits for its consumer's lock


@dataclass(frozen=True)
class Slice:
    """One ev_id range [lo, hi) of an open batch (None: open-ended), read by one Spark task."""

    batch_id: int
    lo: int | None
    hi: int | None
    tick_id: int
    tick_time: dt.datetime  # the end tick's time


def lock_key(options: StreamOptions) -> str:
    src = options.source
    return f"cdc-stream:{src.queue_schema}.{src.queue}/{src.consumer}"


class Feed:
    """The stream's consumer on the driver (see the module docstring)."""

    def __init__(self, options: StreamOptions) -> None:
        self.options = options
        self.source = options.source
        self.engine = options.source.engine
        self._conn: psycopg.Connection | None = None
        self._incarnation: int | None = None
        self._settled: int | None = None  # the tick the consumer was last settled at
        self._idle_at = -float("inf")  # when the last look found no batch (monotonic)
        self._stop_at: int | None = None  # availableNow: the last tick to read

    # -- the connection --------------------------------------------------------------------

    @property
    def conn(self) -> psycopg.Connection:
        """The feed's autocommit connection, opened (and the consumer's lock taken) at first
        use; opened again after a broken one (the lock with it)."""
        if self._conn is not None and (self._conn.closed or self._conn.broken):
            self._conn = None
            self._settled = None
        if self._conn is None:
            conn = psycopg.connect(self.source.dsn, autocommit=True)
            try:
                self._lock(conn)
                self._incarnation = incarnation(conn, self.source)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def _lock(self, conn: psycopg.Connection) -> None:
        """Takes the consumer's lock, waiting up to LOCK_WAIT seconds for it (the session of
        a stream that just crashed may take a moment to end)."""
        key = lock_key(self.options)
        deadline = time.monotonic() + LOCK_WAIT
        query = "select pg_try_advisory_lock(hashtext(%s))"
        while not conn.execute(query, (key,)).fetchone()[0]:
            if time.monotonic() >= deadline:
                raise errors.CdcError(
                    f"consumer {self.source.consumer} of queue {self.source.queue} is read by"
                    " another stream: give each stream a consumer of its own"
                )
            time.sleep(0.5)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    @property
    def consumer(self) -> Consumer:
        return Consumer(self.conn, self.source.queue, self.source.consumer, engine=self.engine)

    def offset(self, tick: int) -> Offset:
        return Offset(tick, self._incarnation)

    # -- the calls Spark makes -------------------------------------------------------------

    def start(self) -> Offset:
        """A new checkpoint's first offset: the consumer's position, registered now (at the
        queue's latest tick) when it is not registered yet."""
        consumer = self.consumer
        if consumer.register():
            log.info("registered consumer %s on queue %s", self.source.consumer, self.source.queue)
        position = consumer.position()
        if position is None:
            raise errors.ConsumerNotFound(
                f"consumer {self.source.consumer} of queue {self.source.queue} is not registered"
            )
        return self.offset(position)

    def latest(self, start: Offset) -> Offset:
        """The end of the next micro-batch from ``start``: the end tick of the consumer's next
        queue batch; ``start`` when there is none yet."""
        self.settle(start)
        if self._stop_at is not None and start.tick >= self._stop_at:
            return start
        if time.monotonic() - self._idle_at < self.options.poll_interval:
            return start
        info = self._next_batch()
        may_tick = info is None and self.options.tick and self._stop_at is None
        if may_tick and self.consumer.tick(only_if_new=True) is not None:
            info = self._next_batch()
        if info is None:
            self._idle_at = time.monotonic()
            return start
        return self.offset(info.cur_tick_id)

    def slices(self, start: Offset, end: Offset) -> list[Slice]:
        """The ev_id ranges of the queue batch from ``start`` to ``end``, which is open."""
        if start.tick == end.tick:
            return []
        self.settle(start)
        info = self._next_batch()
        if info is None or info.cur_tick_id != end.tick:
            found = "none" if info is None else f"one ending at tick {info.cur_tick_id}"
            raise errors.CdcError(
                f"the checkpoint's micro-batch is the batch of ticks {start.tick} to {end.tick}"
                f" of queue {self.source.queue}, but consumer {self.source.consumer} has"
                f" {found} open: did another client take its batches? Give the stream a"
                " consumer of its own and a new checkpoint location"
            )
        parts = self.options.partitions(info.events_upper_bound)
        if not self.engine.has_batch_slices:
            parts = 1  # PgQ: a slice would read the whole batch
        return [
            Slice(info.batch_id, lo, hi, info.cur_tick_id, info.cur_tick_time)
            for lo, hi in jdbc_slices(info, parts)
        ]

    def settle(self, done: Offset) -> None:
        """Brings the consumer to ``done``, the end of a micro-batch Spark has committed
        (cdc.stream.offsets.settle_step)."""
        if done.tick == self._settled and self._conn is not None:
            return
        conn = self.conn
        done.check_queue(self._incarnation, self.source.queue)
        state = self._state()
        step = Step.MOVE if state is None else settle_step(state, done.tick)
        if step is Step.FINISH:
            assert state is not None and state.batch_id is not None
            self.engine.call(conn, "finish_batch", batch_id=state.batch_id)
        elif step is Step.MOVE:
            where = (
                "was not registered"
                if state is None
                else (f"stood at tick {state.position} (open batch to {state.batch_end})")
            )
            log.warning(
                "consumer %s of queue %s %s: moved to tick %d, where the stream's checkpoint"
                " stands",
                self.source.consumer, self.source.queue, where, done.tick,
            )  # fmt: skip
            self.consumer.register_at(done.tick)
        self._settled = done.tick

    def prepare_available_now(self) -> None:
        """Stops the stream at the queue's last tick (ticked first where the stream ticks)."""
        if self.options.tick:
            self.consumer.tick(only_if_new=True)
        query = sql.SQL("select last_tick_id from {}.get_queue_info(%s)").format(self.engine.schema)
        row = self._fetch(query, (self.source.queue,))
        self._stop_at = None if row is None or row[0] is None else int(row[0])
        self._idle_at = -float("inf")

    # -- the queue -------------------------------------------------------------------------

    def _state(self) -> ConsumerState | None:
        """Where the consumer stands; None when it is not registered (any more)."""
        query = sql.SQL(
            "select last_tick, current_batch, next_tick from {}.get_consumer_info(%s, %s)"
        ).format(self.engine.schema)
        try:
            row = self._fetch(query, (self.source.queue, self.source.consumer))
        except errors.ConsumerNotFound:
            return None
        return None if row is None else ConsumerState(*row)

    def _next_batch(self) -> BatchInfo | None:
        """The open queue batch, or the next one: joining ticks up to max_events, or one
        tick when stopping at a tick (availableNow)."""
        consumer = self.consumer
        min_count = None
        if self._stop_at is None:
            min_count = consumer.ticks_within(self.source.max_events)
        batch = consumer.next_batch(min_count=min_count)
        if batch is None:
            return None
        self._idle_at = -float("inf")
        return batch.info

    def _fetch(self, query: sql.Composable, params: tuple) -> tuple | None:
        try:
            return self.conn.execute(query, params).fetchone()
        except psycopg.Error as exc:
            raise errors.translate(exc) from exc
