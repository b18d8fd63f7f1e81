"""Chunked snapshots served by the drain, between its batches (cdc.pipeline.snapshot has the
algorithm).

The drain owns one ``SnapshotRunner(pipeline, spark, conn)`` and, while it holds the drain
lock:

- ``on_signals(signals, tick_id)`` with a batch's snapshot signals (``cdc.snapshot`` events:
  a table each) registers a snapshot of each table's mirror targets (a table not in the
  pipeline is logged and ignored; a signal of a batch done again after a crash is
  recognised by its tick and not registered twice);
- ``after_batch(batch)`` once a batch is applied: a copied snapshot whose last chunk's
  snapshot ``S_c`` the batch's end tick covers is ``done``;
- ``step(last_tick_id, budget_seconds)`` between batches: chunks of the running snapshots,
  round robin, for about budget_seconds (at least one chunk); each chunk's ``S_c`` is after
  the batch the drain applied last, as the algorithm needs. Returns whether chunks remain.

Snapshots in progress (running or copied) are taken up again from the progress table at
start. A table whose snapshot cannot go on (dropped, a key the target cannot hold) is marked
``failed`` with the reason and the drain goes on; an infrastructure failure (a lost
connection, a full disk) raises, as in the drain, and the chunk is done again on the next
run. ``pipeline`` may be replaced by the drain when it resolves table patterns again.

Whether a tick covers ``S_c`` is decided on the tick's own snapshot when this role may read
the queue's tick table (every transaction ``S_c`` sees is visible in it: ``covers``), else on
the server clock: the tick's transaction started more than ``CLOCK_MARGIN`` after ``S_c``
was taken.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Iterable

import psycopg
from pyspark.sql import SparkSession

from cdc import failures
from cdc.config import Pipeline, TableMap
from cdc.errors import ConfigError
from cdc.pg.queue import Batch
from cdc.pipeline import snapshot_job
from cdc.targets import snapshots
from cdc.targets.snapshots import COPIED, DONE, RUNNING, Progress

__all__ = ["SnapshotRunner", "covers"]

log = logging.getLogger("cdc.snapshot")

CLOCK_MARGIN = dt.timedelta(seconds=1)


def _parse(text: str) -> tuple[int, int, set[int]]:
    xmin, xmax, xip = text.split(":")
    return int(xmin), int(xmax), {int(x) for x in xip.split(",") if x}


def covers(tick_snapshot: str, chunk_snapshot: str) -> bool:
    """Whether every transaction visible in the chunk's snapshot is visible in the tick's
    (both ``txid_snapshot`` text ``xmin:xmax:xip,...``)."""
    _, tick_xmax, tick_xip = _parse(tick_snapshot)
    _, xmax, xip = _parse(chunk_snapshot)
    if xmax > tick_xmax:
        return False
    # a transaction the chunk saw committed (below its xmax, not in progress) still in
    # progress for the tick: the tick was taken before the chunk
    return not any(x < xmax and x not in xip for x in tick_xip)


class SnapshotRunner:
    """The drain's chunked snapshots (see the module docstring)."""

    def __init__(
        self,
        pipeline: Pipeline,
        spark: SparkSession,
        conn: psycopg.Connection,
        chunk_rows: int = snapshot_job.CHUNK_ROWS,
        partitions: int = snapshot_job.PARTITIONS,
    ) -> None:
        self.pipeline = pipeline
        self.spark = spark.newSession()  # its own temp views and SQL settings
        self.conn = conn
        self.chunk_rows, self.partitions = chunk_rows, partitions
        self.jobs: dict[str, snapshot_job.Job] = {}  # by source table, running or copied
        self._resume()

    def _resume(self) -> None:
        known = snapshots.read(self.spark, snapshot_job.store_of(self.pipeline))
        by_source: dict[str, list[Progress]] = {}
        for state in known.values():
            if state.state in (RUNNING, COPIED):
                by_source.setdefault(state.source, []).append(state)
        for source, states in by_source.items():
            targets = [t for t in self.pipeline.tables if t.target in {s.target for s in states}]
            if not targets:
                continue
            states = [s for s in states if s.target in {t.target for t in targets}]
            self.jobs[source] = self._job(targets, sorted(states, key=lambda s: s.target))
            log.info("snapshot of %s taken up again (%s)", source, states[0].state)

    def _job(self, targets: list[TableMap], states: list[Progress]) -> snapshot_job.Job:
        targets = sorted(targets, key=lambda t: t.target)
        return snapshot_job.Job(
            self.pipeline, self.spark, targets, states, self.chunk_rows, self.partitions
        )

    @property
    def busy(self) -> bool:
        """Whether chunks remain to be copied."""
        return any(job.state.state == RUNNING for job in self.jobs.values())

    def on_signals(self, signals: Iterable[tuple[str, str]], tick_id: int) -> None:
        """Registers the snapshots the batch's signals ask for ((table, data) pairs)."""
        for table, _data in signals:
            try:
                targets = sorted(self.pipeline.mirrors([table]), key=lambda t: t.target)
            except ConfigError as exc:
                log.warning("snapshot signal for %s ignored: %s", table, exc)
                continue
            source = targets[0].source
            current = self.jobs.get(source)
            if current is not None and current.state.tick_id == tick_id:
                continue  # this batch, done again after a crash
            known = snapshot_job.states_for(self.pipeline, self.spark, targets)
            if any(s.tick_id == tick_id for s in known.values()):
                continue  # registered by this batch before a crash
            states = snapshot_job.new_states(targets, known, tick_id)
            snapshots.save(self.spark, snapshot_job.store_of(self.pipeline), states)
            self.jobs[source] = self._job(targets, states)
            log.info("snapshot of %s requested at tick %d", source, tick_id)

    def step(self, last_tick_id: int | None, budget_seconds: float) -> bool:
        """Chunks of the running snapshots for about budget_seconds (at least one), round
        robin; the drain lock held and the batch up to last_tick_id applied. Returns
        whether chunks remain."""
        started = time.monotonic()
        while True:
            running = [job for job in self.jobs.values() if job.state.state == RUNNING]
            if not running:
                return False
            for job in running:
                self._chunk(job, last_tick_id)
            if time.monotonic() - started >= budget_seconds:
                return self.busy

    def _chunk(self, job: snapshot_job.Job, position: int | None) -> None:
        try:
            job.chunk(position)
        except Exception as exc:
            failure = snapshot_job.failure_of(exc, self.pipeline, job.source)
            if failure.kind == failures.INFRA:
                raise
            del self.jobs[job.source]
            job.fail(failure.message)
            return
        if job.state.state == COPIED:
            log.info(
                "snapshot of %s copied: %d rows in %d chunk(s); done after the next batch",
                job.source, job.state.rows, job.state.chunks,
            )  # fmt: skip

    def after_batch(self, batch: Batch) -> None:
        """Marks done the copied snapshots whose last chunk the batch's end tick covers."""
        for source, job in list(self.jobs.items()):
            state = job.state
            if state.state != COPIED or state.snapshot is None:
                continue
            if self._covered(batch, state):
                job.save(state=DONE)
                del self.jobs[source]
                log.info("snapshot of %s done at tick %d", source, batch.tick_id)

    def _covered(self, batch: Batch, state: Progress) -> bool:
        src = self.pipeline.source
        try:
            found = src.engine.call_in_savepoint(
                self.conn, "tick_snapshot", queue=src.queue, tick_id=batch.tick_id
            )
        except psycopg.errors.InsufficientPrivilege:
            # a real PgQ's tick table, unreadable to this role (ours: cdc.get_tick_snapshot,
            # checked before the drain starts): the tick's time decides, with a margin
            found = None
        assert state.snapshot is not None
        if found is not None:
            return covers(found, state.snapshot)
        tick_time = batch.info.cur_tick_time
        return state.snapshot_at is not None and tick_time > state.snapshot_at + CLOCK_MARGIN
