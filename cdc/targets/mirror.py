"""The mirror kind: the target holds the source table's rows, by key.

A batch's events of the table are folded to one action per key and MERGEd into the target,
with a range of the first key column that prunes files; when the target holds no row in that
range (a first batch, keys past the table's) the upserted rows are appended instead, which is
what the MERGE would do, without its joins. A batch with a TRUNCATE of the table
overwrites the target with what follows the TRUNCATE, and so does one with the marker of a
table re-created under the source's name (op X, cdc.formats.RECREATED): the events before it
are the dropped table's. Both are one commit marked with the batch's Commit. A snapshot
writes the source's rows in chunks (``upsert``: whole rows, never a delete; appended when the
target holds no row in the chunk's key range), ``cdc resync`` overwrites them; maintenance
orders its files by the first key column (the pruning range's).

With ``deletes = "soft"`` (cdc.targets.options) the target keeps deleted rows: it has two
more columns, ``__deleted`` and ``__deleted_at`` (a source column of either name is refused),
and a batch's MERGE marks a deleted row instead of deleting it (``__deleted`` true,
``__deleted_at`` the source time of the key's last DELETE: the soft fold's, cdc.rows.GONE_AT);
an insert or update of the key revives it (false, null); a delete of a key the batch inserted
keeps the row, marked (the append too). A TRUNCATE, or the marker of a re-created table,
marks every row not marked yet at its time, then applies the events after it, in one MERGE
(MergePlan.for_batch with SoftDeletes: the clauses are in cdc.targets.merge_plan). A snapshot
writes its rows unmarked; ``cdc resync`` replaces the unmarked rows with the source's, keeps
the marked ones, and marks a row the source no longer holds at the resync's time. ``cdc
verify`` compares the unmarked rows (``current``); ``cdc maintain
--purge-deleted-older-than`` deletes the old marked ones (cdc.ops.maintain).

Written once against the engine interface (cdc.engines.engine): the fold, the MERGE (a plan,
cdc.targets.merge_plan, that each engine renders) and the writes are the engine's, so the
same code runs on the Arrow engine and on Spark. This module writes no SQL.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc.errors import ConfigError
from cdc.pg.pgtypes import Column
from cdc.rows import GONE, GONE_AT, TableBatch, is_numeric_text, value
from cdc.targets import delta_table
from cdc.targets.delta import spark_sql
from cdc.targets.kind import TargetKind
from cdc.targets.merge_plan import MergePlan, SoftDeletes
from cdc.targets.table import Commit, TableRef, quote

if TYPE_CHECKING:
    from cdc.engines.engine import Engine

__all__ = ["DELETED", "DELETED_AT", "SOFT_COLUMNS", "SOFT_READY", "Mirror", "compared_key"]

log = logging.getLogger("cdc.mirror")

# the columns of a target that keeps deleted rows (deletes = "soft")
DELETED, DELETED_AT = "__deleted", "__deleted_at"
SOFT_COLUMNS = [(DELETED, "boolean"), (DELETED_AT, "timestamp")]
# the target's property saying that each of its rows has __deleted set (``conform``)
SOFT_READY = "cdc.softDeletes"
# a snapshot's rows as the source's columns: unmarked
_UNMARKED = [
    Column(DELETED, "boolean", "boolean", False),
    Column(DELETED_AT, "timestamp with time zone", "timestamp", False),
]


class Mirror(TargetKind):
    """The source's rows by key (see the module docstring)."""

    zorder_by_key = True  # the column of the MERGE's pruning range
    writes_on_driver = True  # the Arrow engine folds and MERGEs it

    @property
    def soft(self) -> bool:
        """The target keeps deleted rows, marked (deletes = "soft")."""
        return self.options.soft_deletes

    def columns(self, columns: list[Column]) -> list[tuple[str, str]]:
        own = super().columns(columns)
        return own + SOFT_COLUMNS if self.soft else own

    def key(self, columns: list[Column]) -> list[str]:
        return [c.name for c in columns if c.is_key]

    def ensure(
        self, spark: SparkSession, ref: TableRef, columns: list[Column]
    ) -> list[tuple[str, str]]:
        self._refuse_clashes(columns, f"mirror target {ref.location}")
        created = self.soft and not delta_table.exists(spark, ref)
        schema = super().ensure(spark, ref, columns)
        if created:  # no row yet: every row it will hold has __deleted set
            delta_table.set_properties(spark, ref, {SOFT_READY: "true"})
        return schema

    def conform(
        self,
        spark: SparkSession,
        ref: TableRef,
        columns: list[Column],
        fields: set[str],
        props: dict[str, str],
    ) -> None:
        """A target given deletes = "soft" once it exists: the two columns added, its rows
        unmarked (``__deleted`` false where null), then the property SOFT_READY set, which
        the next batch finds (a crash in between: done again). Given deletes = "hard" again,
        the property goes (the rows written meanwhile have no __deleted: unmarked when soft
        deletes come back)."""
        ready = props.get(SOFT_READY) == "true"
        if not self.soft:
            if ready:
                delta_table.unset_property(spark, ref, SOFT_READY)
            return
        if ready:
            return
        self._refuse_clashes(columns, f"mirror target {ref.location}")  # before any change
        delta_table.add_columns(spark, ref, [(n, t) for n, t in SOFT_COLUMNS if n not in fields])
        unset = F.col(quote(DELETED)).isNull()
        delta_table.spark_table(spark, ref).update(unset, {DELETED: F.lit(False)})
        delta_table.set_properties(spark, ref, {SOFT_READY: "true"})
        log.info('%s: deletes = "soft": its rows have __deleted and __deleted_at', ref.location)

    def _refuse_clashes(self, columns: list[Column], target: str) -> None:
        """A source column named as a soft-delete column (Delta's names ignore case) is
        refused, also one added later, which schema drift adds without ``ensure``: the
        writes ask again."""
        if not self.soft:
            return
        taken = {n for n, _ in SOFT_COLUMNS}
        clash = [c.name for c in columns if c.name.lower() in taken]
        if clash:
            raise ConfigError(
                f'{target} keeps deleted rows (deletes = "soft"): source'
                f" column(s) {', '.join(clash)} have the names of its columns"
                f" {', '.join(n for n, _ in SOFT_COLUMNS)}; rename them in the source, or"
                ' give the table deletes = "hard"'
            )

    def current(self, rows: DataFrame) -> DataFrame:
        """The rows not marked deleted."""
        return rows.where(~F.col(quote(DELETED))) if self.soft else rows

    def write(self, engine: Engine, commit: Commit, batch: TableBatch) -> None:
        """Folds the table's events and MERGEs them into the target, or, when the batch holds
        a TRUNCATE of the table, overwrites the target with the rows that follow it (a
        target keeping deleted rows: ``_soft_write``).

        On Spark the fold is not cached: Delta materializes a MERGE source that is not a
        Delta scan (``merge.materializeSource=auto``), so the fold runs once inside the
        MERGE. Caching it first, to time it apart, cost a second copy (1M-event backlog,
        warm: 27.7-30.3 s against 22.8-23.2 s)."""
        columns = batch.columns
        if self.soft:
            self._soft_write(engine, commit, batch)
            return
        schema = self.columns(columns)
        if batch.truncated_at is not None:
            after = engine.after(batch.rows, batch.truncated_at)
            kept = engine.upserted(engine.fold(after, columns))
            named = [(value(i), name, kind) for i, (name, kind) in enumerate(schema)]
            engine.overwrite(engine.named(kept, named), schema, commit)
            return
        folded = engine.fold(batch.rows, columns)
        bounds = engine.key_range(folded, columns, batch.key_range)
        plan = MergePlan.for_batch(columns, schema, bounds)
        if plan.bounds is not None and engine.holds_none_between(plan.bounds):
            # no target row within the batch's keys: no key matches, and the MERGE would
            # only insert the upserted rows (a first batch, keys beyond the table's): append
            named = [(value(i), name, kind) for i, (name, kind) in enumerate(schema)]
            engine.append(engine.named(engine.upserted(folded), named), schema, commit)
            return
        engine.merge(folded, columns, plan, commit)

    def _soft_write(self, engine: Engine, commit: Commit, batch: TableBatch) -> None:
        """``write`` for a target that keeps deleted rows: the soft fold MERGEd with the
        SoftDeletes clauses; after a TRUNCATE, the events after it in one MERGE that marks
        every other row at the TRUNCATE's time; the kept rows appended when the target holds
        none in the batch's key range."""
        columns = batch.columns
        self._refuse_clashes(columns, "this mirror target")
        own = super().columns(columns)
        if batch.truncated_at is not None:
            after = engine.after(batch.rows, batch.truncated_at)
            marks = SoftDeletes.of_fold(
                DELETED, DELETED_AT, engine.time_of(batch.rows, batch.truncated_at)
            )
            plan = MergePlan.for_batch(columns, own, None, marks)
            engine.merge(engine.fold(after, columns, soft=True), columns, plan, commit)
            return
        folded = engine.fold(batch.rows, columns, soft=True)
        bounds = engine.key_range(folded, columns, batch.key_range)
        plan = MergePlan.for_batch(columns, own, bounds, SoftDeletes.of_fold(DELETED, DELETED_AT))
        if plan.bounds is not None and engine.holds_none_between(plan.bounds):
            # as the MERGE would: its inserts only (an upsert unmarked, a delete of a key the
            # batch inserted marked)
            named = [(value(i), name, kind) for i, (name, kind) in enumerate(own)]
            named += [(GONE, DELETED, "boolean"), (GONE_AT, DELETED_AT, "timestamp")]
            kept = engine.named(engine.kept(folded), named)
            engine.append(kept, self.columns(columns), commit)
            return
        engine.merge(folded, columns, plan, commit)

    def upsert(self, engine: Engine, rows: Any, columns: list[Column]) -> None:
        """Writes snapshot rows as whole rows in one MERGE with no commit identity: a key the
        target holds gets every column of the row, a key it lacks is inserted, nothing is
        deleted. Pruned by the rows' first key range; when the target holds no row in that
        range (an initial copy), the rows are appended instead: the same result, without the
        MERGE's joins. The caller holds the table's lock: no batch writes the range
        meanwhile. A target keeping deleted rows gets them unmarked (a marked row of the
        key is revived: the source holds it)."""
        schema = self.columns(columns)
        if self.soft:
            self._refuse_clashes(columns, "this mirror target")
            unmarked = [(DELETED, "boolean", False), (DELETED_AT, "timestamp", None)]
            rows = engine.with_values(rows, unmarked)
            columns = [*columns, *_UNMARKED]
        plan = MergePlan.for_snapshot_chunk(columns, schema, engine.chunk_bounds(rows, columns))
        if plan.bounds is not None and engine.holds_none_between(plan.bounds):
            engine.append_chunk(rows, columns, schema)
            return
        engine.merge_chunk(rows, columns, plan)

    def load(
        self,
        spark: SparkSession,
        ref: TableRef,
        rows: DataFrame,
        columns: list[Column],
        engine: Engine,
    ) -> None:
        """Replaces the target's rows with the snapshot's; a target keeping deleted rows
        keeps them (``_with_marked``)."""
        self.ensure(spark, ref, columns)
        if self.soft:
            rows = self._with_marked(spark, ref, rows, columns)
        delta_table.overwrite(rows, ref)

    def _with_marked(
        self, spark: SparkSession, ref: TableRef, rows: DataFrame, columns: list[Column]
    ) -> DataFrame:
        """The snapshot's rows unmarked, and the target's rows of the keys the snapshot
        lacks, marked: those marked already as they are, the others at this time (their
        delete was not applied, its time is unknown: cdc resync after a failing period).
        Keys compare as the MERGE compares them (a numeric key kept as text normalised)."""
        names = [quote(c.name) for c in columns]
        fresh = rows.select(
            *names,
            F.lit(False).alias(DELETED),
            F.lit(None).cast("timestamp").alias(DELETED_AT),
        )
        match = [(compared_key(c), f"__k{i}") for i, c in enumerate(columns) if c.is_key]
        keys = rows.select(*[key.alias(name) for key, name in match])
        held = delta_table.read(spark, ref).select("*", *[key.alias(name) for key, name in match])
        gone = held.join(keys, [name for _, name in match], "left_anti").select(
            *names,
            F.lit(True).alias(DELETED),
            F.coalesce(F.col(DELETED_AT), F.current_timestamp()).alias(DELETED_AT),
        )
        return fresh.unionByName(gone)


def compared_key(column: Column) -> SparkColumn:
    """A key column as keys compare (a numeric key kept as text normalised, as the MERGE's
    rendering normalises the target's side: cdc.targets.delta.spark_sql.norm_numeric)."""
    if is_numeric_text(column):
        return F.expr(spark_sql.norm_numeric(quote(column.name)))
    return F.col(quote(column.name))
