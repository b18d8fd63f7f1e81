"""One batch's events applied to every target of a pipeline, exactly once, one target
failing alone, the touched targets concurrently.

Only the tables the batch holds events of are looked at: an untouched table costs nothing
(no catalog query, no Delta look-up). On the main thread, with the drain's one connection:
the failing marks (cdc.targets.failing.Cache: read once per run, again only when their log
moved) and the touched tables' columns (``SourceColumns``: one query for all of them per
batch, the full catalog read only for a table whose digest changed). Then each touched
table, on a bounded pool of worker threads with a child Spark session each
(cdc.pipeline.pool): the target follows the source's schema (cdc.targets.schema_drift), and
the table's part is decoded and written by the engines the route planner picks
(cdc.pipeline.parts, cdc.engines.planner) through the target's kind (cdc.targets.registry:
mirror folds and MERGEs, history appends). Every write carries the
batch's commit identity (cdc.targets.table.Commit), its own per target, so a batch redone
after a crash (with any subset of its targets committed) skips those it had committed; a
target committed under the appId of versions without queue incarnations is recognised too
(``_done_before``). The batch is finished (cdc.pipeline.drain) only once every table's task
has ended.

A target whose data or schema cannot be applied (cdc.failures: not an infrastructure
failure, which stops the batch once the running tasks end) is marked failing
(cdc.targets.failing) and its events go to the quarantine (cdc.targets.quarantine), with
those of targets marked failing earlier and of tables not in the configuration.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import psycopg
from pyspark.sql import DataFrame, SparkSession

from cdc import failures
from cdc.config import Pipeline, TableMap
from cdc.engines import planner
from cdc.engines.spark import decode as spark_decode
from cdc.errors import CdcError
from cdc.pg import source as source_module
from cdc.pg.queue import Batch
from cdc.pipeline.parts import Outcome, PartRunner, TablePart
from cdc.pipeline.pool import SessionPool, in_session
from cdc.pipeline.quarantined import failing_events, stray_events
from cdc.pipeline.reader import BatchEvents
from cdc.pipeline.source_columns import Found, SourceColumns
from cdc.rows import add_time
from cdc.spark import is_local
from cdc.targets import delta_table, failing, quarantine
from cdc.targets.table import Commit, TableRef, app_id, legacy_app_id

log = logging.getLogger("cdc.drain")

WORKERS = 4  # tables applied at once (cdc drain --workers)
SNAPSHOT_PARTITIONS = "spark.databricks.delta.snapshotPartitions"


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
    on_driver: set[str] = field(default_factory=set)  # targets decoded and written without Spark
    routes: dict[str, str] = field(default_factory=dict)  # target -> its route (engines.planner)
    read: str = ""  # how the batch was read: "copy", "spilled" (over the budget), "jdbc"
    read_rule: str = ""  # why: its size against jdbc_min_events (cdc.pipeline.reader)


def worker_conf(spark: SparkSession) -> dict[str, str]:
    """Settings of the worker sessions: on a local master, Delta rebuilds a table's state
    from its log in as many tasks as there are cores (its default, 50, is for clusters: on
    two cores a commit's state rebuild costs a third more), unless the session sets it."""
    if spark.conf.get(SNAPSHOT_PARTITIONS, None) or not is_local(spark):
        return {}
    return {SNAPSHOT_PARTITIONS: str(max(1, spark.sparkContext.defaultParallelism))}


class BatchApplier:
    """Applies batches to one pipeline's targets, on one Spark session and one connection."""

    def __init__(
        self,
        pipeline: Pipeline,
        spark: SparkSession,
        conn: psycopg.Connection,
        workers: int = WORKERS,
    ) -> None:
        self.pipeline = pipeline
        self.spark = spark
        self.conn = conn
        self.names = source_module.TableNames({t.source: t.source for t in pipeline.tables}, {})
        self.incarnation = source_module.incarnation(conn, pipeline.source)
        self._current_ids: set[str] = set()  # targets holding a commit under the current appId
        self.marks = failing.Cache(pipeline.table(pipeline.failing_table))
        self.sources = SourceColumns(conn, pipeline.source.capture_queue)
        self.pool = SessionPool(spark, workers, worker_conf(spark))
        self._committed = 0  # tables committed in this batch (the stage "committed:<n>")
        self._count_lock = threading.Lock()
        self.parts = PartRunner.of(spark, pipeline.drain.engine)

    def close(self) -> None:
        self.pool.close()

    def catalog_name(self, table: TableMap) -> tuple[str, str]:
        """(schema, table) of the source in the catalog now: its configured name, or the new
        name of a table renamed since (source.table_names)."""
        return self.names.current.get(table.source, (table.schema, table.name))

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
        # reach: the table stays open for this batch's other reads of it
        table = delta_table.LocalTable.reach(ref) or delta_table.LocalTable.open(ref)
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

    def apply(
        self, batch: Batch, events: BatchEvents, stats: BatchStats, stage: Callable[[str], None]
    ) -> None:
        """Applies each table the batch touches, concurrently; a table whose data or schema
        cannot be applied (not an infrastructure failure, which stops the batch) is marked
        failing and its events go to the quarantine, and so do the events of tables marked
        failing earlier."""
        bad: list[DataFrame] = []
        if events.strays is not None:
            bad.append(stray_events(self.pipeline, spark_decode.with_op_and_map(events.strays)))
        marks = self.marks.current(self.spark)
        todo: list[TableMap] = []
        for table in self.pipeline.tables:
            stats.per_table[table.target] = events.counts.get(table.source, 0)
            if table.target in marks:
                stats.failing[table.target] = marks[table.target].reason
            elif table.source in events.tables:
                todo.append(table)
        started = time.monotonic()
        found = self.sources.lookup(sorted({self.catalog_name(t) for t in todo}))
        add_time(stats.phases, "catalog", started)
        self._committed = 0
        tasks = [
            (t.target, partial(self._apply_table, t, batch, events, found, stage)) for t in todo
        ]
        outcomes = self.pool.run(tasks)
        newly: dict[str, tuple[str, str]] = {}
        decoded_tables: list[spark_decode.Decoded] = []
        for table in todo:
            out = outcomes[table.target]
            for phase, seconds in out.timings.items():
                stats.phases[phase] = stats.phases.get(phase, 0.0) + seconds
            if out.seconds is not None:
                stats.seconds[table.target] = out.seconds
            if out.route is not None:
                log.debug("target %s of tick %d: %s", table.target, batch.tick_id, out.route)
                stats.routes[table.target] = str(out.route)
                if out.route.decode == out.route.write == planner.ARROW:
                    stats.on_driver.add(table.target)
            if out.decoded is not None:
                decoded_tables.append(out.decoded)
            if out.failure is not None:
                log.error(
                    "target %s is failing from tick %d on, its events go to the quarantine"
                    " until `cdc resync %s`: %s",
                    table.target, batch.tick_id, table.source, out.failure,
                )  # fmt: skip
                newly[table.target] = (table.source, out.failure)
                stats.failing[table.target] = out.failure
            elif out.bad is not None:
                bad.append(in_session(out.bad, self.spark))
        try:
            bad.extend(failing_events(self.pipeline, events, marks, newly))
            failing.mark(self.spark, *self._target(self.pipeline.failing_table, batch), newly)
            started = time.monotonic()
            stats.quarantined = self._quarantine(batch, bad)
            stats.seconds["quarantine"] = time.monotonic() - started
        finally:
            for done in decoded_tables:
                done.release()

    def _apply_table(
        self,
        table: TableMap,
        batch: Batch,
        events: BatchEvents,
        found: dict[tuple[str, str], Found],
        stage: Callable[[str], None],
        spark: SparkSession,
    ) -> Outcome:
        """One table's part of the batch, on a worker's session: its target made to follow
        the source's schema, then decoded, folded and written (cdc.pipeline.parts, as a
        replay's). Returns its failure when the table cannot be applied; raises an
        infrastructure failure (it stops the batch)."""
        started = time.monotonic()
        out = Outcome()
        if self._done_before(table.target, batch):
            return out
        ref, commit = self._target(table.target, batch)
        name = self.catalog_name(table)
        try:
            columns, fill = found[name].get()
            part = TablePart(table, events, name, columns, fill, ref, commit, out)
            self.parts.run(part, spark)
        except Exception as exc:
            failure = failures.classify(exc, self.pipeline.target_path)
            if failure.kind != failures.TABLE:
                raise
            if log.isEnabledFor(logging.DEBUG):
                log.debug("target %s cannot be applied", table.target, exc_info=exc)
            out.failure = failure.message
            return out
        out.seconds = time.monotonic() - started
        stage("table:" + table.target)
        with self._count_lock:
            self._committed += 1
            committed = self._committed
        stage(f"committed:{committed}")
        return out

    def _quarantine(self, batch: Batch, bad: list[DataFrame]) -> int:
        if not bad:
            return 0
        frame = quarantine.conform(bad[0])
        for other in bad[1:]:
            frame = frame.unionByName(quarantine.conform(other))
        if len(bad) > 1:  # a source with two targets (a mirror and a history) decodes twice
            frame = frame.dropDuplicates(["ev_id", "cause", "reason"])
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
