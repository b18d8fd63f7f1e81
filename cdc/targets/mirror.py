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

Written once against the engine interface (cdc.engines.engine): the fold, the MERGE (a plan,
cdc.targets.merge_plan, that each engine renders) and the writes are the engine's, so the
same code runs on the Arrow engine and on Spark. This module writes no SQL.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, SparkSession

from cdc.pg.pgtypes import Column
from cdc.rows import TableBatch, value
from cdc.targets import delta_table
from cdc.targets.kind import TargetKind
from cdc.targets.merge_plan import MergePlan
from cdc.targets.table import Commit, TableRef

if TYPE_CHECKING:
    from cdc.engines.engine import Engine

__all__ = ["Mirror"]


class Mirror(TargetKind):
    """The source's rows by key (see the module docstring)."""

    zorder_by_key = True  # the column of the MERGE's pruning range
    writes_on_driver = True  # the Arrow engine folds and MERGEs it

    def key(self, columns: list[Column]) -> list[str]:
        return [c.name for c in columns if c.is_key]

    def write(self, engine: Engine, commit: Commit, batch: TableBatch) -> None:
        """Folds the table's events and MERGEs them into the target, or, when the batch holds
        a TRUNCATE of the table, overwrites the target with the rows that follow it.

        On Spark the fold is not cached: Delta materializes a MERGE source that is not a
        Delta scan (``merge.materializeSource=auto``), so the fold runs once inside the
        MERGE. Caching it first, to time it apart, cost a second copy (1M-event backlog,
        warm: 27.7-30.3 s against 22.8-23.2 s)."""
        columns = batch.columns
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

    def upsert(self, engine: Engine, rows: Any, columns: list[Column]) -> None:
        """Writes snapshot rows as whole rows in one MERGE with no commit identity: a key the
        target holds gets every column of the row, a key it lacks is inserted, nothing is
        deleted. Pruned by the rows' first key range; when the target holds no row in that
        range (an initial copy), the rows are appended instead: the same result, without the
        MERGE's joins. The caller holds the table's lock: no batch writes the range
        meanwhile."""
        schema = self.columns(columns)
        plan = MergePlan.for_snapshot_chunk(columns, schema, engine.chunk_bounds(rows, columns))
        if plan.bounds is not None and engine.holds_none_between(plan.bounds):
            engine.append_chunk(rows, columns, schema)
            return
        engine.merge_chunk(rows, columns, plan)

    def load(
        self, spark: SparkSession, ref: TableRef, rows: DataFrame, columns: list[Column]
    ) -> None:
        self.ensure(spark, ref, columns)
        delta_table.overwrite(rows, ref)
