"""The drain: batches from the queue, applied to Delta tables exactly once.

Per batch (taken with the one consumer client, cdc.pg.consumer): read the events
(cdc.pipeline.reader: COPY into Arrow, or Spark JDBC for a large batch), decode them per
table in Spark, fold and MERGE each configured table (or append, in history mode), send bad
events to the quarantine table, and only then finish the batch. Every Delta write is marked
with appId = queue/consumer/target and version = the batch's end tick, so a batch redone
after a crash skips the tables it had committed.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import psycopg
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc import failures
from cdc.config import Pipeline, TableMap, add_config_argument
from cdc.errors import CdcError
from cdc.pg import pgtypes
from cdc.pg import source as source_module
from cdc.pg.consumer import Consumer
from cdc.pg.queue import Batch
from cdc.pipeline import decode
from cdc.pipeline.reader import BatchEvents, BatchReader
from cdc.targets import delta_table, failing, quarantine, registry, schema_drift
from cdc.targets.kind import TableBatch, add_time
from cdc.targets.table import Commit, TableRef, app_id, legacy_app_id

log = logging.getLogger("cdc.drain")

# The stage at which a drain kills itself (SIGKILL): "read", "table:<target>" (after that
# table's commit), "merged" (every table committed, batch not finished), "finished".
KILL_AT_ENV = "CDC_DRAIN_KILL_AT"

FOLLOW_POLL = 0.2  # seconds between looks for new events, when the drain ticks itself


@dataclass
class BatchStats:
    batch_id: int
    tick_id: int
    events: int = 0
    quarantined: int = 0
    per_table: dict[str, int] = field(default_factory=dict)
    failing: dict[str, str] = field(default_factory=dict)  # target -> reason
    seconds: dict[str, float] = field(default_factory=dict)  # read, each table, finish
    phases: dict[str, float] = field(default_factory=dict)  # decode, fold+merge (all tables)


class Drain:
    """One pipeline's drain, on one Spark session and one PostgreSQL connection."""

    def __init__(self, pipeline: Pipeline, spark: SparkSession, tick: bool = True) -> None:
        self.pipeline = pipeline
        self.spark = spark
        self.tick_first = tick
        self.conn = psycopg.connect(pipeline.source.dsn, autocommit=True)
        # event times as COPY writes them: ISO, with a numeric offset
        self.conn.execute("set datestyle = 'ISO, YMD'")
        self.conn.execute("set timezone = 'UTC'")
        self.engine = pipeline.source.engine
        self.consumer = Consumer.for_source(self.conn, pipeline.source)
        self.reader = BatchReader(spark, pipeline.source)
        self.stopping = threading.Event()
        self.consumer.register()
        self.names = source_module.TableNames({t.source: t.source for t in pipeline.tables}, {})
        self.incarnation = source_module.incarnation(self.conn, pipeline.source)
        self._current_ids: set[str] = set()  # targets holding a commit under the current appId

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Drain:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ per batch

    def catalog_name(self, table: TableMap) -> tuple[str, str]:
        """(schema, table) of the source in the catalog now: its configured name, or the new
        name of a table renamed since (source.table_names)."""
        return self.names.current.get(table.source, (table.schema, table.name))

    def columns(self, table: TableMap) -> list[pgtypes.Column]:
        queue = self.pipeline.source.capture_queue
        return pgtypes.keyed_columns(self.conn, *self.catalog_name(table), queue)

    def _target(self, target: str, batch: Batch) -> tuple[TableRef, Commit]:
        """A target's table, and the identity of this batch's write to it."""
        commit = Commit.of(self.pipeline.source, self.incarnation, target, batch.tick_id)
        return self.pipeline.table(target), commit

    def _done_before(self, name: str, batch: Batch) -> bool:
        """Whether the batch is in the target under the appId of versions without queue
        incarnations (committed, then the drain was upgraded before finishing the batch):
        then it is not written again. Without an incarnation, a tick below the one the target
        recorded (a queue created again) stops the drain instead of being skipped silently."""
        ref = self.pipeline.table(name)
        if not ref.is_path or name in self._current_ids:
            return False
        table = delta_table.LocalTable.open(ref)
        if table is None:
            return False
        src = self.pipeline.source
        legacy = table.committed(legacy_app_id(src, name))
        if self.incarnation is None:
            if legacy is not None and legacy > batch.tick_id:
                raise CdcError(
                    f"target {name} holds tick {legacy} of queue {src.queue} (consumer"
                    f" {src.consumer}), later than this batch's tick {batch.tick_id}: the queue"
                    " was created again, and this engine cannot tell its incarnations apart."
                    " Run `cdc install` to upgrade it, then drain again"
                )
            return False
        current = app_id(src, self.incarnation, name)
        if legacy is None or table.committed(current) is not None:
            self._current_ids.add(name)
            return False
        if legacy == batch.tick_id:
            log.info("target %s: tick %d was committed before the upgrade", name, batch.tick_id)
            return True
        return False

    def read(self, batch: Batch) -> BatchEvents:
        """The batch's events, split by source table (cdc.pipeline.reader), the names of
        renamed tables looked up again first."""
        src = self.pipeline.source
        self.names = source_module.table_names(self.conn, src, self.pipeline.tables)
        return self.reader.read(batch, self.names)

    def apply(self, batch: Batch, on_stage: Callable[[str], None] | None = None) -> BatchStats:
        """Applies one batch to every table and the quarantine, then finishes it."""
        stats = BatchStats(batch.batch_id, batch.tick_id)

        def stage(name: str) -> None:
            if os.environ.get(KILL_AT_ENV) == name:  # fault injection for the crash tests
                os.kill(os.getpid(), signal.SIGKILL)
            if on_stage is not None:
                on_stage(name)

        started = time.monotonic()
        self.incarnation = source_module.incarnation(self.conn, self.pipeline.source)
        events = self.read(batch)
        stats.seconds["read"] = time.monotonic() - started
        stats.events = sum(events.counts.values())
        stage("read")
        try:
            self._apply_tables(batch, events, stats, stage)
        finally:
            events.release()
        stage("merged")
        started = time.monotonic()
        batch.finish()
        stats.seconds["finish"] = time.monotonic() - started
        stage("finished")
        return stats

    def _apply_tables(
        self, batch: Batch, events: BatchEvents, stats: BatchStats, stage: Callable[[str], None]
    ) -> None:
        """Applies each table; a table whose data or schema cannot be applied (not an
        infrastructure failure, which stops the batch) is marked failing and its events go to
        the quarantine, and so do the events of tables marked failing earlier."""
        decoded_tables: list[decode.Decoded] = []
        bad: list[DataFrame] = []
        if events.strays is not None:
            strays = decode.with_op_and_map(events.strays).withColumn(
                "reason", F.lit("table not in the configuration")
            )
            bad.append(strays)
        marks = failing.read(self.spark, self.pipeline.table(self.pipeline.failing_table))
        newly: dict[str, tuple[str, str]] = {}
        for table in self.pipeline.tables:
            stats.per_table[table.target] = events.counts.get(table.source, 0)
            if table.target in marks:
                stats.failing[table.target] = marks[table.target].reason
                continue
            if self._done_before(table.target, batch):
                continue
            kept = len(bad)
            try:
                self._apply_table(table, batch, events, stats, stage, decoded_tables, bad)
            except Exception as exc:
                failure = failures.classify(exc, self.pipeline.target_path)
                if failure.kind != failures.TABLE:
                    raise
                del bad[kept:]
                log.error(
                    "target %s is failing from tick %d on, its events go to the quarantine"
                    " until `cdc resync %s`: %s",
                    table.target, batch.tick_id, table.source, failure.message,
                    exc_info=log.isEnabledFor(logging.DEBUG),
                )  # fmt: skip
                newly[table.target] = (table.source, failure.message)
                stats.failing[table.target] = failure.message
        bad.extend(self._failing_events(events, marks, newly))
        failing.mark(self.spark, *self._target(self.pipeline.failing_table, batch), newly)
        started = time.monotonic()
        stats.quarantined = self._quarantine(batch, bad)
        stats.seconds["quarantine"] = time.monotonic() - started
        for done in decoded_tables:
            done.release()

    def _failing_events(
        self,
        events: BatchEvents,
        marks: dict[str, failing.Mark],
        newly: dict[str, tuple[str, str]],
    ) -> list[DataFrame]:
        """The batch's events of the sources with a failing target, once per source, with the
        reasons."""
        reasons: dict[str, list[str]] = {}
        for table in self.pipeline.tables:
            if table.target in newly:
                why = f"target {table.target} cannot be applied: {newly[table.target][1]}"
            elif table.target in marks:
                mark = marks[table.target]
                why = (
                    f"target {table.target} is failing since tick {mark.tick_id}"
                    f" ({mark.reason}): `cdc resync {table.source}` recovers it"
                )
            else:
                continue
            reasons.setdefault(table.source, []).append(why)
        return [
            events.tables[source].withColumn("reason", F.lit("; ".join(why)))
            for source, why in reasons.items()
            if source in events.tables
        ]

    def _apply_table(
        self,
        table: TableMap,
        batch: Batch,
        events: BatchEvents,
        stats: BatchStats,
        stage: Callable[[str], None],
        decoded_tables: list[decode.Decoded],
        bad: list[DataFrame],
    ) -> None:
        """One table's part of the batch: decoded, folded and written to its target."""
        started = time.monotonic()
        ref, commit = self._target(table.target, batch)
        kind = registry.kind(table.mode)
        # the target follows the source's schema where it can; drift says how events are written
        drift = schema_drift.reconcile(
            self.spark, self.conn, ref, self.catalog_name(table), self.columns(table), kind
        )
        columns = drift.columns
        stats.per_table[table.target] = events.counts.get(table.source, 0)
        if table.source not in events.tables:
            return
        decoded = decode.decode_table(
            events.tables[table.source], columns, events.formats[table.source], drift
        )
        decoded_tables.append(decoded)
        facts = decoded.facts(columns)  # decodes, into the cache
        add_time(stats.phases, "decode", started)
        if facts.bad:
            bad.append(decoded.bad)
        rows = TableBatch(decoded.rows, columns, facts.truncated_at, facts.key_range, stats.phases)
        # an OPTIMIZE (cdc maintain) may commit meanwhile: the write is idempotent
        write = partial(kind.apply, self.spark, ref, commit, rows)
        delta_table.retry_conflicts(write, f"table {table.target}")
        stats.seconds[table.target] = time.monotonic() - started
        stage("table:" + table.target)

    def _quarantine(self, batch: Batch, bad: list[DataFrame]) -> int:
        if not bad:
            return 0
        frame = quarantine.conform(bad[0])
        for other in bad[1:]:
            frame = frame.unionByName(quarantine.conform(other))
        # a failing table's events may be many: written from the (cached) frames, not collected
        count = frame.count()
        if not count:
            return 0
        if self._done_before(self.pipeline.quarantine, batch):
            return count
        ref, commit = self._target(self.pipeline.quarantine, batch)
        quarantine.append(self.spark, ref, frame, commit)
        log.warning("%d event(s) of tick %d quarantined in %s", count, batch.tick_id, ref.location)
        return count

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
        done = 0
        if mode == "follow" and self.engine.notifies_ticks:
            self.conn.execute("listen cdc_tick")
        if self.tick_first:
            self.consumer.tick()
        while not self.stopping.is_set():
            # a snapshot of a table holds the lock while it copies: no batch meanwhile
            with source_module.drain_lock(self.conn, self.pipeline.source, "drain"):
                batch = self._next_batch(one_tick=stop_at_tick is not None)
                stats = self.apply(batch) if batch is not None else None
            if stats is None:
                if mode != "follow":
                    break
                # ticking itself, the drain looks for new events often (a cheap query);
                # otherwise the ticker's NOTIFY wakes it
                self._wait_for_tick(FOLLOW_POLL if self.tick_first else 1.0)
                if self.tick_first:
                    self.consumer.tick(only_if_new=True)
                continue
            done += 1
            log.info(
                "batch %d (tick %d): %d events, %s, %d quarantined",
                stats.batch_id, stats.tick_id, stats.events, stats.per_table, stats.quarantined,
            )  # fmt: skip
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

    def _wait_for_tick(self, timeout: float = 1.0) -> None:
        """Waits for a tick NOTIFY (our engine sends one on channel cdc_tick), at most timeout
        seconds: the polling fallback for PgQ, and for runs that tick themselves."""
        if not self.engine.notifies_ticks:
            self.stopping.wait(timeout)
            return
        for _ in self.conn.notifies(timeout=timeout, stop_after=1):
            pass

    def stop_on_signals(self) -> None:
        """SIGTERM / SIGINT stop the run between batches."""

        def handler(signum: int, _frame: object) -> None:
            log.info("signal %d: stopping after the current batch", signum)
            self.stopping.set()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)


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
    parser.set_defaults(mode="until-caught-up")


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
