"""The drain: batches from the queue, applied to Delta tables exactly once.

Per batch (taken with the one consumer client, cdc.pg.consumer): read the events
(cdc.pipeline.reader: COPY into Arrow, or Spark JDBC for a large batch), decode them per
table in Spark, fold and MERGE each table the batch touches (or append, in history mode),
several tables at once (cdc.pipeline.apply, ``--workers``), send bad events to the
quarantine table, and only then, once every table's commit is done, finish the batch.
Every Delta write is marked with appId = queue/consumer/target and version = the batch's
end tick, so a batch redone after a crash skips the tables it had committed.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from functools import partial

import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from pyspark.sql import SparkSession

from cdc import memory
from cdc.config import Pipeline, add_config_argument
from cdc.pg import source as source_module
from cdc.pg import sqlfiles
from cdc.pg.consumer import Consumer
from cdc.pg.queue import Batch
from cdc.pipeline.apply import WORKERS, BatchApplier, BatchStats
from cdc.pipeline.reader import BatchEvents, BatchReader
from cdc.pipeline.snapshot_runner import SnapshotRunner
from cdc.pipeline.tables import TableResolver
from cdc.progress import Progress
from cdc.targets import masking

log = logging.getLogger("cdc.drain")

# The stage at which a drain kills itself (SIGKILL): "read", "table:<target>" (after that
# table's commit), "committed:<n>" (after the batch's n-th table commit, others may be
# committing meanwhile), "merged" (every table committed, batch not finished), "finished".
KILL_AT_ENV = "CDC_DRAIN_KILL_AT"

FOLLOW_POLL = 0.2  # seconds between looks for new events, when the drain ticks itself
SNAPSHOT_STEP = 2.0  # seconds of snapshot chunks between two batches (at least one chunk)
STATUS_QUERIES = "queries_status.sql"  # its consumer_info: the pending events, both engines


class Drain:
    """One pipeline's drain, on one Spark session and one PostgreSQL connection."""

    def __init__(
        self,
        pipeline: Pipeline,
        spark: SparkSession,
        tick: bool = True,
        workers: int = WORKERS,
    ) -> None:
        masking.require_salt_of(pipeline)  # before anything is read or written
        self.pipeline = pipeline
        self.spark = spark
        self.tick_first = tick
        self.conn = psycopg.connect(pipeline.source.dsn, autocommit=True)
        # event times as COPY writes them: ISO, with a numeric offset
        self.conn.execute("set datestyle = 'ISO, YMD'")
        self.conn.execute("set timezone = 'UTC'")
        self.engine = pipeline.source.engine
        self.consumer = Consumer.for_source(self.conn, pipeline.source)
        self.reader = BatchReader(spark, pipeline.source, pipeline.drain)
        self.stopping = threading.Event()
        self.consumer.register()
        queue, name = pipeline.source.queue, self.consumer.name
        self.pending = partial(pending_events, self.conn, self.engine.schema, queue, name)
        self.applier = BatchApplier(pipeline, spark, self.conn, workers)
        # tables that pattern rules match, listed again before each batch (cdc.pipeline.tables)
        self.resolver = TableResolver(pipeline, self.conn)
        # chunked snapshots asked for by signal events, run between batches
        self.snapshots = SnapshotRunner(pipeline, spark, self.conn)
        self.last_tick: int | None = None  # the end tick of the last batch this run applied

    def close(self) -> None:
        self.applier.close()
        self.conn.close()

    def __enter__(self) -> Drain:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ per batch

    def refresh_tables(self) -> None:
        """The pipeline with the tables its rules match now: a table created since the last
        batch is replicated from this batch on, without a restart."""
        pipeline = self.resolver.current()
        if pipeline is not self.pipeline:
            self.pipeline = self.applier.pipeline = self.snapshots.pipeline = pipeline

    def read(self, batch: Batch) -> BatchEvents:
        """The batch's events, split by source table (cdc.pipeline.reader), the names of
        renamed tables looked up again first."""
        src = self.pipeline.source
        names = source_module.table_names(self.conn, src, self.pipeline.tables)
        self.applier.names = names
        return self.reader.read(batch, names)

    def apply(self, batch: Batch, on_stage: Callable[[str], None] | None = None) -> BatchStats:
        """Applies one batch to every table and the quarantine, then finishes it."""
        stats = BatchStats(batch.batch_id, batch.tick_id)

        def stage(name: str) -> None:
            if os.environ.get(KILL_AT_ENV) == name:  # fault injection for the crash tests
                os.kill(os.getpid(), signal.SIGKILL)
            if on_stage is not None:
                on_stage(name)

        started = time.monotonic()
        self.refresh_tables()
        self.applier.incarnation = source_module.incarnation(self.conn, self.pipeline.source)
        events = self.read(batch)
        stats.seconds["read"] = time.monotonic() - started
        stats.events = sum(events.counts.values())
        stats.read, stats.read_rule = events.route, events.rule
        stage("read")
        # a chunk of a snapshot of a table this batch changes waits for the batch's end, and
        # the batch for the chunk's end; chunks of other tables go on meanwhile
        touched = sorted(events.tables)
        with source_module.table_locks(self.conn, self.pipeline.source, touched, "drain"):
            try:
                self.applier.apply(batch, events, stats, stage)
            finally:
                events.release()
            # registered before the batch is finished: a batch done again registers nothing
            # twice
            self.snapshots.on_signals(events.signals, batch.tick_id)
            stage("merged")
            started = time.monotonic()
            batch.finish()
            stats.seconds["finish"] = time.monotonic() - started
        stage("finished")
        self.last_tick = batch.tick_id
        self.snapshots.after_batch(batch)
        return stats

    def snapshot_step(self) -> bool:
        """Chunks of the running snapshots (the drain lock held: every chunk's snapshot is
        after the last applied batch). Returns whether to go on at once: chunks remain, or
        the copy just ended and a tick was taken, whose batch marks the snapshot done."""
        if not self.snapshots.busy:
            return False
        self.refresh_tables()
        if self.snapshots.step(self.last_tick, SNAPSHOT_STEP):
            return True
        if self.tick_first:
            self.consumer.tick()
            return True
        return False

    # ------------------------------------------------------------------ runs

    def run(
        self,
        mode: str = "until-caught-up",
        on_batch: Callable[[BatchStats], None] | None = None,
        stop_at_tick: int | None = None,
    ) -> int:
        """Applies batches: one (once), all there are (until-caught-up), or forever (follow).
        stop_at_tick: one tick per batch, and stop once that tick's batch is applied.
        Returns the number of batches applied."""
        if mode == "follow" and self.engine.notifies_ticks:
            self.conn.execute("listen cdc_tick")
        if self.tick_first:
            self.consumer.tick()
        # events applied / pending (the queue's count), events/s, ETA: a line every few
        # seconds, and the summary at the end (cdc.progress)
        progress = Progress("drain", "events", self.pending())
        progress.extra = "0 batch(es)"
        done = self._run(mode, on_batch, stop_at_tick, progress)
        progress.finish()
        log.info("%s", memory.summary(self.spark))  # against drain.memory_budget
        return done

    def _run(
        self,
        mode: str,
        on_batch: Callable[[BatchStats], None] | None,
        stop_at_tick: int | None,
        progress: Progress,
    ) -> int:
        done = 0
        while not self.stopping.is_set():
            # one drain per consumer (cdc resync and verify take this lock too; a snapshot's
            # chunk takes only its table's lock: see apply)
            with source_module.drain_lock(self.conn, self.pipeline.source, "drain"):
                batch = self._next_batch(one_tick=stop_at_tick is not None)
                stats = self.apply(batch) if batch is not None else None
                copying = self.snapshot_step()
            if stats is None:
                if copying:
                    continue
                if mode != "follow":
                    break
                # ticking itself, the drain looks for new events often (a cheap query);
                # otherwise the ticker's NOTIFY wakes it
                wait_for_tick(
                    self.conn,
                    self.engine.notifies_ticks,
                    self.stopping,
                    FOLLOW_POLL if self.tick_first else 1.0,
                )
                if self.tick_first:
                    self.consumer.tick(only_if_new=True)
                continue
            done += 1
            log.debug(
                "batch %d (tick %d): %d events (%s) read by %s (%s), %d quarantined, %d"
                " table(s) written from the driver",
                stats.batch_id, stats.tick_id, stats.events, per_table(stats), stats.read,
                stats.read_rule, stats.quarantined, len(stats.on_driver),
            )  # fmt: skip
            progress.extra = f"{done} batch(es)"
            pending = self.pending()
            progress.add(stats.events, None if pending is None else progress.done + pending)
            if on_batch:
                on_batch(stats)
            if mode == "once" or (stop_at_tick is not None and stats.tick_id >= stop_at_tick):
                break
        return done

    def _next_batch(self, one_tick: bool = False) -> Batch | None:
        """The open batch, or the next one joining as many ticks as fit in the source's
        max_events; one_tick: up to the next tick only."""
        max_events = self.pipeline.source.max_events
        min_count = None if one_tick else self.consumer.ticks_within(max_events)
        return self.consumer.next_batch(min_count=min_count)

    def stop_on_signals(self) -> None:
        """SIGTERM / SIGINT stop the run between batches."""

        def handler(signum: int, _frame: object) -> None:
            log.info("signal %d: stopping after the current batch", signum)
            self.stopping.set()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)


def wait_for_tick(
    conn: psycopg.Connection, notifies: bool, stopping: threading.Event, timeout: float = 1.0
) -> None:
    """Waits for a tick NOTIFY (our engine sends one on channel cdc_tick), at most timeout
    seconds: the polling fallback for PgQ (notifies False), and for runs that tick
    themselves."""
    if not notifies:
        stopping.wait(timeout)
        return
    for _ in conn.notifies(timeout=timeout, stop_after=1):
        pass


def pending_events(conn: psycopg.Connection, schema: str, queue: str, consumer: str) -> int | None:
    """The consumer's pending events, as the queue counts them (events since its last
    finished tick); None when this role may not read them (no ETA then)."""
    query = sql.SQL(sqlfiles.queries(STATUS_QUERIES)["consumer_info"]).format(schema=schema)
    try:
        with conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(query, {"queue": queue}).fetchall()
    except psycopg.Error as exc:
        log.debug("no pending event count for the progress: %s", exc)
        return None
    for row in rows:
        if row["consumer_name"] == consumer and row["pending_events"] is not None:
            return int(row["pending_events"])
    return None


def per_table(stats: BatchStats) -> str:
    """``orders 12, customers 3``: a batch's events per target, for a log line."""
    return ", ".join(f"{target} {count:,}" for target, count in stats.per_table.items()) or "-"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_argument(parser)
    how = parser.add_mutually_exclusive_group()
    how.add_argument(
        "--once", dest="mode", action="store_const", const="once", help="one batch, then exit"
    )
    how.add_argument(
        "--until-caught-up",
        dest="mode",
        action="store_const",
        const="until-caught-up",
        help="every batch there is, then exit (the default: for cron and Airflow)",
    )
    how.add_argument(
        "--follow",
        dest="mode",
        action="store_const",
        const="follow",
        help="keep going; SIGTERM stops between batches",
    )
    parser.add_argument(
        "--no-tick", action="store_true", help="do not tick the queue (a ticker daemon does)"
    )
    parser.add_argument(
        "--workers",
        type=_workers,
        default=WORKERS,
        metavar="N",
        help=f"tables of a batch applied at once, each its own Delta commit (default {WORKERS})",
    )
    parser.set_defaults(mode="until-caught-up")


def _workers(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"--workers: a whole number of 1 or more, not {text!r}")
    return value


def serve_metrics(pipeline: Pipeline) -> Callable[[BatchStats], None]:
    """Serves the pipeline's Prometheus metrics (cdc.ops.status) on its metrics port, with the
    drain's own counters; returns the on_batch callback that updates them."""
    from prometheus_client import Counter, Gauge, start_http_server

    from cdc.ops import status

    registry = status.registry(pipeline)
    batches = Counter("cdc_drain_batches", "Batches applied", registry=registry)
    events = Counter("cdc_drain_events", "Events applied", registry=registry)
    seconds = Gauge("cdc_drain_last_batch_seconds", "Duration of the last batch", registry=registry)
    start_http_server(pipeline.metrics_port or 0, registry=registry)
    log.info("metrics on port %s", pipeline.metrics_port)

    def on_batch(stats: BatchStats) -> None:
        batches.inc()
        events.inc(stats.events)
        seconds.set(sum(stats.seconds.values()))

    return on_batch
