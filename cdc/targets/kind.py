"""The interface of a target kind (mirror, history, ...): what the drain, the snapshot and
maintenance ask of a target, whatever it keeps of the source's events.

Its lifecycle, per target table:

- ``ensure``: the target exists with the columns the source's columns call for (created, or
  the missing ones added); schema drift (cdc.targets.schema_drift) calls it, and asks
  ``holds_rows`` whether rows that predate a column get its default and follow the key;
- ``apply``: one batch's decoded rows (cdc.rows), written in one commit marked
  with the batch's Commit, so that a rerun after a crash writes nothing twice;
  ``apply_on_driver`` the same for a batch decoded on the driver, where the kind can;
- ``load``, ``upsert`` (``upsert_on_driver`` for the Arrow engine): the initial copy from a
  snapshot of the source, whole or by chunks (kinds that hold rows);
- ``zorder_by_key``: whether maintenance (cdc.ops.maintain) orders the target's files by the
  source's first key column.

Kinds are found by mode name in cdc.targets.registry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession

from cdc.pg.pgtypes import Column
from cdc.rows import TableBatch
from cdc.targets import delta_table
from cdc.targets.registry import Mode
from cdc.targets.table import Commit, TableRef

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["TargetKind"]


class TargetKind:
    """A target kind; the registry makes one per mode (see the module docstring)."""

    # What the kind needs of the engines (cdc.engines.planner reads these, no kind is
    # special-cased by name or class):
    zorder_by_key = False  # maintenance orders the files by the first key column
    # the Arrow engine may write it (apply_on_driver, upsert_on_driver); else the planner
    # gives every part of its targets to Spark
    writes_on_driver = False

    def __init__(self, mode: Mode) -> None:
        self.mode = mode

    @property
    def holds_rows(self) -> bool:
        return self.mode.holds_rows

    def columns(self, columns: list[Column]) -> list[tuple[str, str]]:
        """The target's (name, Spark type) list for the source's columns."""
        return [(c.name, c.spark_type) for c in columns]

    def key(self, columns: list[Column]) -> list[str]:
        """The target's columns that are never null."""
        return []

    def ensure(
        self, spark: SparkSession, ref: TableRef, columns: list[Column]
    ) -> list[tuple[str, str]]:
        """Creates the target for the source's columns (or adds the columns it lacks);
        returns the target's (name, Spark type) list."""
        schema = self.columns(columns)
        delta_table.ensure(spark, ref, schema, self.key(columns))
        return schema

    def apply(self, spark: SparkSession, ref: TableRef, commit: Commit, batch: TableBatch) -> None:
        raise NotImplementedError

    def apply_on_driver(
        self, ref: TableRef, commit: Commit, events: pa.Table, columns: list[Column]
    ) -> bool:
        """Writes a batch's events decoded on the driver (cdc.engines.arrow.decode:
        the layout of TableBatch.rows, as Arrow) without Spark, as ``apply`` would, in one
        commit marked with commit; False when this kind or this target cannot (then
        ``apply`` writes them)."""
        return False

    def load(
        self, spark: SparkSession, ref: TableRef, rows: DataFrame, columns: list[Column]
    ) -> None:
        """Replaces the target's rows with a snapshot's (columns named as the source's)."""
        raise NotImplementedError(f"a {self.mode.name} target is not loaded from a snapshot")

    def upsert(
        self, spark: SparkSession, ref: TableRef, rows: DataFrame, columns: list[Column]
    ) -> None:
        """Writes a snapshot chunk's rows (columns named as the source's) as whole rows: a
        key the target holds gets the row, a key it lacks is inserted, nothing is deleted
        (kinds that hold rows, cdc.pipeline.snapshot_job)."""
        raise NotImplementedError(f"a {self.mode.name} target is not loaded from a snapshot")

    def upsert_on_driver(
        self, spark: SparkSession, ref: TableRef, rows: pa.Table, columns: list[Column]
    ) -> bool:
        """``upsert`` of rows cast by the Arrow engine (cdc.engines.arrow.decode.cast_rows)
        without Spark; False when this kind or this target cannot (then ``upsert`` writes
        them)."""
        return False
