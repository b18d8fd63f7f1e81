"""The scd2 kind (slowly changing dimension, type 2): the target holds every version of each
source row, one row per version, with

- ``__start_at``: the source time of the change that opened the version (the writing
  transaction's ``ev_time``, PostgreSQL's ``now()`` in it);
- ``__end_at``: the source time of the change that closed it, null while it is open;
- ``__current``: true for the open version (at most one per key);
- ``__deleted`` (with ``tombstones = true`` only): true for a version that records a delete.

The rules, per key, over a batch's changes in ev_id order (the order PostgreSQL applied
them: a row's changes are serialised by its lock):

- each source transaction that changes the key is one change (within one transaction only
  its end state counts, decided as the mirror's fold decides existence, cdc.engines.spark.fold);
  several transactions in one batch are several versions, none folded away;
- an insert (or an update of a key the target lacks) opens a version; an update opens a new
  version and closes the previous one at its time, unless it changes no tracked column
  (``track_history_columns`` / ``track_history_except_columns``; by default every column):
  then the current version is updated in place;
- a delete closes the current version; with ``tombstones = true`` it also opens a version
  marked ``__deleted`` (the key alone, the other columns null), closed by a later insert;
- a change of key is a delete of the old key and an insert of the new one (as captured);
- a TRUNCATE closes every open version at its time (no tombstones).

The table as of time T is ``where __start_at <= T and (__end_at > T or __end_at is null)``.

Written against the engine interface: ``Engine.versions`` reads the target's current
versions of the batch's keys and gives the versioned rows (cdc.rows), which one MERGE
(MergePlan.for_versions) writes in one commit marked with the batch's Commit: the update of
each key's current version and the insert of the new ones.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc.errors import ConfigError
from cdc.pg.pgtypes import Column
from cdc.rows import CURRENT, DELETED, END, START, TableBatch, Versioning, meta, present, value
from cdc.targets import delta_table
from cdc.targets.kind import TargetKind
from cdc.targets.merge_plan import MergePlan
from cdc.targets.mirror import compared_key
from cdc.targets.table import Commit, TableRef, quote

if TYPE_CHECKING:
    from cdc.engines.engine import Engine

__all__ = ["VERSION_COLUMNS", "Scd2"]

VERSION_COLUMNS = [(START, "timestamp"), (END, "timestamp"), (CURRENT, "boolean")]


class Scd2(TargetKind):
    """Every version of each row (see the module docstring)."""

    writes_on_driver = True  # the Arrow engine keeps versions too
    zorder_by_key = True  # its MERGE and the read of current versions prune by key range

    def version_columns(self) -> list[tuple[str, str]]:
        tomb = [(DELETED, "boolean")] if self.options.tombstones else []
        return VERSION_COLUMNS + tomb

    def columns(self, columns: list[Column]) -> list[tuple[str, str]]:
        return super().columns(columns) + self.version_columns()

    def key(self, columns: list[Column]) -> list[str]:
        # the source's key alone: schema drift takes the target's non-null columns for the
        # key it follows (cdc.targets.schema_drift)
        return [c.name for c in columns if c.is_key]

    def current(self, rows: DataFrame) -> DataFrame:
        """The current versions that are not tombstones: the source's rows."""
        current = rows.where(F.col(CURRENT))
        return current.where(~F.col(DELETED)) if self.options.tombstones else current

    def versioning(self, columns: list[Column], truncated_at: int | None) -> Versioning:
        """Which columns are tracked, for these source columns."""
        names = {c.name for c in columns}
        chosen = self.options.track_history_columns
        if chosen is not None:
            tracked = [n for n in chosen if n in names]
        else:
            tracked = [
                c.name for c in columns if c.name not in self.options.track_history_except_columns
            ]
        indexes = tuple(i for i, c in enumerate(columns) if not c.is_key and c.name in tracked)
        return Versioning(indexes, self.options.tombstones, truncated_at)

    def ensure(
        self, spark: SparkSession, ref: TableRef, columns: list[Column]
    ) -> list[tuple[str, str]]:
        taken = {n for n, _ in self.version_columns()}
        clash = [c.name for c in columns if c.name in taken]
        if clash:
            raise ConfigError(
                f"scd2 target {ref.location}: source column(s) {', '.join(clash)} have the"
                f" names of version columns ({', '.join(sorted(taken))}); rename them in the"
                " source, or give the table another mode"
            )
        chosen = self.options.track_history_columns or self.options.track_history_except_columns
        unknown = sorted(set(chosen) - {c.name for c in columns})
        if unknown:
            raise ConfigError(
                f"scd2 target {ref.location}: track_history columns {', '.join(unknown)} are"
                " not columns of the source table"
            )
        return super().ensure(spark, ref, columns)

    def write(self, engine: Engine, commit: Commit, batch: TableBatch) -> None:
        """The batch's changes as versions, MERGEd in one commit."""
        columns = batch.columns
        schema = self.columns(columns)
        rules = self.versioning(columns, batch.truncated_at)
        # the batch's first-key range prunes the read of the current versions and the MERGE
        # (a TRUNCATE ends every version: no range)
        key_range = None
        if batch.truncated_at is None:
            key_range = engine.key_range(batch.rows, columns, batch.key_range)
        plan = MergePlan.for_versions(columns, schema, key_range)
        versioned = engine.versions(batch.rows, columns, rules, plan.bounds)
        engine.merge(versioned, columns, plan, commit)

    def load(
        self,
        spark: SparkSession,
        ref: TableRef,
        rows: DataFrame,
        columns: list[Column],
        engine: Engine,
    ) -> None:
        """``cdc resync``: the snapshot's rows seeded as ``upsert`` seeds them, and each
        current version whose key the source no longer holds closed now (a tombstone opened,
        with ``tombstones = true``), in one MERGE: the versions before stay. Their changes
        during the failing period are unknown: one version per key stands for them."""
        self.ensure(spark, ref, columns)
        at = datetime.now(UTC)
        changes = engine.changes(rows, columns, at)
        keys = [(c, f"__k{i}") for i, c in enumerate(columns) if c.is_key]
        held = self.current(delta_table.read(spark, ref))
        wanted = rows.select(*[compared_key(c).alias(name) for c, name in keys])
        gone = (
            held.select("*", *[compared_key(c).alias(name) for c, name in keys])
            .join(wanted, [name for _, name in keys], "left_anti")
            .select(
                F.lit("D").alias(meta("op")),
                F.lit(0).cast("long").alias(meta("ev_id")),
                F.lit(0).cast("long").alias(meta("ev_txid")),
                F.lit(at).cast("timestamp").alias(meta("ev_time")),
                *[
                    (F.col(quote(c.name)) if c.is_key else F.lit(None).cast(c.spark_type)).alias(
                        value(i)
                    )
                    for i, c in enumerate(columns)
                ],
                *[F.lit(c.is_key).alias(present(i)) for i, c in enumerate(columns)],
            )
        )
        plan = MergePlan.for_versions(columns, self.columns(columns), None)
        rules = self.versioning(columns, None)
        engine.merge_chunk(
            engine.versions(changes.unionByName(gone), columns, rules, None), columns, plan
        )

    def upsert(self, engine: Engine, rows: Any, columns: list[Column]) -> None:
        """Seeds a snapshot chunk's rows as versions opened now: a key without a current
        version opens one, a current version whose tracked columns differ is closed and a
        new one opened, one that differs in no tracked column is updated in place (so that
        the events a snapshot already shows add no version when the drain applies them).
        Appended when the target holds no row in the chunk's key range."""
        schema = self.columns(columns)
        plan = MergePlan.for_versions(columns, schema, engine.chunk_bounds(rows, columns))
        changes = engine.changes(rows, columns, datetime.now(UTC))
        versioned = engine.versions(changes, columns, self.versioning(columns, None), plan.bounds)
        if plan.bounds is not None and engine.holds_none_between(plan.bounds):
            held = columns + [Column(n, "", t, False) for n, t in self.version_columns()]
            named = [
                (source, name, kind)
                for (name, kind), (_, source) in zip(schema, plan.inserts, strict=True)
            ]
            engine.append_chunk(engine.named(versioned, named), held, schema)
            return
        engine.merge_chunk(versioned, columns, plan)
