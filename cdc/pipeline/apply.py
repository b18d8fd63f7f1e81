"""One batch's events applied to every target of a pipeline, exactly once, one target
failing alone, the touched targets concurrently.

Only the tables the batch holds events of are looked at: an untouched table costs nothing
(no catalog query, no Delta look-up). On the main thread, with the drain's one connection:
the failing marks (cdc.targets.failing.Cache: read once per run, again only when their log
moved) and the touched tables' columns (``SourceColumns``: one query for all of them per
batch, the full catalog read only for a table whose digest changed). Then each touched
table, on a bounded pool of worker threads with a child Spark session each
(cdc.pipeline.pool): the target follows the source's schema (cdc.targets.schema_drift), the
table's events are decoded (cdc.engines.spark.decode) and written by the target's kind
(cdc.targets.registry: mirror folds and MERGEs, history appends). Every write carries the
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
from dataclasses import dataclass, field, replace
from functools import partial

import psycopg
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc import failures
from cdc.config import Pipeline, TableMap
from cdc.engines import planner
from cdc.engines.arrow import decode as arrow_decode
from cdc.engines.spark import decode as spark_decode
from cdc.errors import CdcError
from cdc.pg import pgtypes
from cdc.pg import source as source_module
from cdc.pg.queue import Batch
from cdc.pipeline.pool import SessionPool, in_session
from cdc.pipeline.reader import BatchEvents
from cdc.rows import TableBatch, add_time
from cdc.spark import is_local
from cdc.targets import delta_table, failing, quarantine, registry, schema_drift
from cdc.targets.kind import TargetKind
from cdc.targets.table import Commit, TableRef, app_id, legacy_app_id

log = logging.getLogger("cdc.drain")

WORKERS = 4  # tables applied at once (cdc drain --workers)
# Where Spark writes a small part (cdc.engines.planner.SMALL_EVENTS), it takes the small-part
# path: decoded without a cache, and MERGEd without Delta's copy of the source
# (merge.materializeSource = none). Delta copies a source it cannot prove deterministic;
# ours is (the fold of the batch's events decoded from the batch's Arrow rows: every read
# gives the same rows, and Delta checks that its two reads counted the same), so the MERGE
# writes the same values in the same commit as the large-part path, with a cache, a copy and
# their Spark jobs fewer. Above it (or read by JDBC: a cached frame, which Delta refuses not
# to copy) the decode cache and the copy are kept: they spare decoding and folding twice.
MATERIALIZE_SOURCE = "spark.databricks.delta.merge.materializeSource"
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


@dataclass(frozen=True)
class Found:
    """A source table's columns and their fill, or why they could not be read."""

    columns: list[pgtypes.Column] | None = None
    fill: schema_drift.Fill | None = None
    error: Exception | None = None

    def get(self) -> tuple[list[pgtypes.Column], schema_drift.Fill]:
        if self.error is not None:
            raise self.error
        assert self.columns is not None and self.fill is not None
        return self.columns, self.fill


class SourceColumns:
    """The columns of source tables (pgtypes.keyed_columns) and their fill
    (schema_drift.fill_of), kept between batches: each batch asks one query for the digests
    of the tables it touches (pgtypes.fingerprints), and reads the catalog again only for a
    table whose digest changed or that has none (it does not exist: the error is kept)."""

    def __init__(self, conn: psycopg.Connection, queue: str | None) -> None:
        self.conn = conn
        self.queue = queue
        self._known: dict[tuple[str, str], tuple[str, Found]] = {}

    def lookup(self, names: list[tuple[str, str]]) -> dict[tuple[str, str], Found]:
        digests = pgtypes.fingerprints(self.conn, names, self.queue)
        found: dict[tuple[str, str], Found] = {}
        for name in names:
            digest = digests.get(name)
            known = self._known.get(name)
            if digest is not None and known is not None and known[0] == digest:
                found[name] = known[1]
                continue
            self._known.pop(name, None)
            try:
                columns = pgtypes.keyed_columns(self.conn, *name, self.queue)
                fill = schema_drift.fill_of(self.conn, *name)
            except psycopg.OperationalError:
                raise
            except Exception as exc:  # classified by the table's task (cdc.failures)
                found[name] = Found(error=exc)
                continue
            found[name] = Found(columns, fill)
            if digest is not None:
                # read after the digest: a change in between shows as a new digest next time
                self._known[name] = (digest, found[name])
        return found


@dataclass
class Outcome:
    """What one table's task did."""

    decoded: spark_decode.Decoded | None = None
    bad: DataFrame | None = None  # its bad events (in the task's session), when any
    failure: str | None = None  # why it cannot be applied (it becomes failing)
    timings: dict[str, float] = field(default_factory=dict)
    seconds: float | None = None
    route: planner.Route | None = None  # the engines that decoded and wrote it, and why


@dataclass(frozen=True)
class TablePart:
    """One table's part of a batch, ready to be decoded and written."""

    table: TableMap
    events: BatchEvents
    columns: list[pgtypes.Column]  # as written (schema_drift.Drift.columns)
    drift: schema_drift.Drift
    ref: TableRef
    commit: Commit
    out: Outcome


def worker_conf(spark: SparkSession) -> dict[str, str]:
    """Settings of the worker sessions: on a local master, Delta rebuilds a table's state
    from its log in as many tasks as there are cores (its default, 50, is for clusters: on
    two cores a commit's state rebuild costs a third more), unless the session sets it."""
    if spark.conf.get(SNAPSHOT_PARTITIONS, None) or not is_local(spark):
        return {}
    return {SNAPSHOT_PARTITIONS: str(max(1, spark.sparkContext.defaultParallelism))}


def stray_reason(pipeline: Pipeline) -> Column:
    """The quarantine's reason for an event of a table the pipeline does not replicate: why
    the resolution refused it (a rule's table whose target is another's, cdc.pipeline.tables),
    else that it is not in the configuration."""
    reason = F.lit("table not in the configuration")
    for r in pipeline.refused:
        refused = F.lit(f"table refused by the configuration: {r.reason}")
        reason = F.when(F.col("ev_extra1") == r.source, refused).otherwise(reason)
    return reason


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
        # the drain's own setting (spark-submit --conf), kept for big batches
        self._materialize = spark.conf.get(MATERIALIZE_SOURCE, "auto") or "auto"
        self._count_lock = threading.Lock()
        # on a local master the driver is where Spark works too: every batch read with COPY
        # is decoded and written there when it can be (on a cluster, small ones only)
        self._local = is_local(spark)
        self.engine = pipeline.drain.engine  # the planner's choice, or one engine forced

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
        # open_local: the table stays open for this batch's other reads of it
        table = delta_table.LocalTable.open_local(ref) or delta_table.LocalTable.open(ref)
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
            strays = spark_decode.with_op_and_map(events.strays).withColumn(
                "reason", stray_reason(self.pipeline)
            )
            bad.append(strays)
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
            bad.extend(self._failing_events(events, marks, newly))
            failing.mark(self.spark, *self._target(self.pipeline.failing_table, batch), newly)
            started = time.monotonic()
            stats.quarantined = self._quarantine(batch, bad)
            stats.seconds["quarantine"] = time.monotonic() - started
        finally:
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
        found: dict[tuple[str, str], Found],
        stage: Callable[[str], None],
        spark: SparkSession,
    ) -> Outcome:
        """One table's part of the batch, on a worker's session: decoded, folded and written
        to its target. Returns its failure when the table cannot be applied; raises an
        infrastructure failure (it stops the batch)."""
        started = time.monotonic()
        out = Outcome()
        if self._done_before(table.target, batch):
            return out
        ref, commit = self._target(table.target, batch)
        kind = registry.kind(table.mode)
        name = self.catalog_name(table)
        try:
            columns, fill = found[name].get()
            # the target follows the source's schema where it can; drift says how events
            # are written
            drift = schema_drift.reconcile(spark, None, ref, name, columns, kind, fill)
            columns = drift.columns
            part = TablePart(table, events, columns, drift, ref, commit, out)
            route = planner.decode_route(self._facts(part, kind))
            if route.decode == planner.ARROW:
                route = self._on_driver(part, route)
            if route.decode == planner.SPARK:
                self._in_spark(part, route, spark)
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

    def _facts(self, part: TablePart, kind: TargetKind) -> planner.PartFacts:
        """What the planner is told of a part before it is decoded."""
        source = part.table.source
        return planner.PartFacts(
            events=part.events.counts.get(source, 0),
            held_on_driver=part.events.on_driver and source in part.events.arrow,
            local_master=self._local,
            kind_writes_arrow=kind.writes_on_driver,
            default_merge_source=self._materialize == "auto",
            forced=self.engine,
        )

    def _on_driver(self, part: TablePart, route: planner.Route) -> planner.Route:
        """The part decoded by the Arrow engine (cdc.engines.arrow.decode) and, where the
        planner lets it, written by it (the kind's apply_on_driver); the route it took: Spark
        decodes and writes it when the Arrow decoder is undecided or the target cannot be
        written from the driver."""
        raw = part.events.arrow[part.table.source]
        kind = registry.kind(part.table.mode)
        started = time.monotonic()
        rows = arrow_decode.decode(raw, part.columns, part.drift)
        started = add_time(part.out.timings, "decode", started)
        if rows is None:
            return route.decoded_by(planner.SPARK, "the Arrow decoder was undecided")
        route = route.decoded_by(planner.ARROW, route.why)
        commit = replace(part.commit, metadata=route.metadata())
        write = partial(kind.apply_on_driver, part.ref, commit, rows, part.columns)
        # an OPTIMIZE (cdc maintain) may commit meanwhile: the write is idempotent
        done = delta_table.retry_conflicts(write, f"table {part.table.target}")
        add_time(part.out.timings, "fold+merge", started)
        if not done:
            return route.decoded_by(planner.SPARK, "delta-rs cannot write the target as Spark")
        part.out.route = route
        return route

    def _in_spark(self, part: TablePart, route: planner.Route, spark: SparkSession) -> None:
        """The table's events decoded in Spark (cdc.engines.spark.decode: its bad events kept
        for the quarantine) and written by its kind (a small part may be written by delta-rs:
        Mirror.apply asks the planner)."""
        started = time.monotonic()
        told = self._facts(part, registry.kind(part.table.mode))
        small = told.small and told.held_on_driver and told.default_merge_source
        out, columns = part.out, part.columns
        frame = in_session(part.events.tables[part.table.source], spark)
        out.decoded = spark_decode.decode_table(
            frame, columns, part.events.formats[part.table.source], part.drift, cache=not small
        )
        facts = out.decoded.facts(columns)  # decodes, into the cache
        add_time(out.timings, "decode", started)
        rows = TableBatch(
            out.decoded.rows, columns, facts.truncated_at, facts.key_range, out.timings, small,
            route=route, forced=self.engine,
        )  # fmt: skip
        spark.conf.set(MATERIALIZE_SOURCE, "none" if small else self._materialize)
        kind = registry.kind(part.table.mode)
        commit = replace(part.commit, metadata=route.metadata())
        write = partial(kind.apply, spark, part.ref, commit, rows)
        delta_table.retry_conflicts(write, f"table {part.table.target}")
        out.route = rows.route  # the kind's write may have taken delta-rs (a small part)
        if facts.bad:
            out.bad = out.decoded.bad
            if facts.recreated_at is not None and kind.holds_rows:
                # a dropped table's events, which the marker of its successor empties away
                out.bad = out.bad.where(F.col("ev_id") > facts.recreated_at)

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
