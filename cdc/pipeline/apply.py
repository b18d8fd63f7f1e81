"""One batch's events applied to every target of a pipeline, exactly once, one target
failing alone.

For each configured table: the target follows the source's schema (cdc.targets.schema_drift),
the table's events are decoded (cdc.pipeline.decode) and written by the target's kind
(cdc.targets.registry: mirror folds and MERGEs, history appends). Every write carries the
batch's commit identity (cdc.targets.table.Commit), so a batch redone after a crash skips
the targets it had committed; a target committed under the appId of versions without queue
incarnations is recognised too (``_done_before``).

A target whose data or schema cannot be applied (cdc.failures: not an infrastructure
failure, which stops the batch) is marked failing (cdc.targets.failing) and its events go to
the quarantine (cdc.targets.quarantine), with those of targets marked failing earlier and of
tables not in the configuration.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import psycopg
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc import failures
from cdc.config import Pipeline, TableMap
from cdc.errors import CdcError
from cdc.pg import pgtypes
from cdc.pg import source as source_module
from cdc.pg.queue import Batch
from cdc.pipeline import decode
from cdc.pipeline.reader import BatchEvents
from cdc.targets import delta_table, failing, quarantine, registry, schema_drift
from cdc.targets.kind import TableBatch, add_time
from cdc.targets.table import Commit, TableRef, app_id, legacy_app_id

log = logging.getLogger("cdc.drain")


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


class BatchApplier:
    """Applies batches to one pipeline's targets, on one Spark session and one connection."""

    def __init__(self, pipeline: Pipeline, spark: SparkSession, conn: psycopg.Connection) -> None:
        self.pipeline = pipeline
        self.spark = spark
        self.conn = conn
        self.names = source_module.TableNames({t.source: t.source for t in pipeline.tables}, {})
        self.incarnation = source_module.incarnation(conn, pipeline.source)
        self._current_ids: set[str] = set()  # targets holding a commit under the current appId

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

    def apply(
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
