"""The interface of a target kind (mirror, history, ...): what the drain, the snapshot and
maintenance ask of a target, whatever it keeps of the source's events.

Its lifecycle, per target table:

- ``ensure``: the target exists with the columns the source's columns call for (created,
  laid out and with the properties and column comments of ``layout``, cdc.targets.layout;
  or the missing ones added); schema drift (cdc.targets.schema_drift) calls it, and asks
  ``holds_rows`` whether rows that predate a column get its default and follow the key;
- ``write``: one batch's decoded rows (cdc.rows), written in one commit marked with the
  batch's Commit, so that a rerun after a crash writes nothing twice;
- ``upsert``: a snapshot chunk's rows (kinds that hold rows); ``load`` the whole snapshot at
  once (``cdc resync``, Spark's);
- ``zorder_by_key``: whether maintenance (cdc.ops.maintain) orders the target's files by the
  source's first key column;
- ``current``: the target's rows that ``cdc verify`` compares with the source's.

``write`` and ``upsert`` are written once, against the engine interface
(cdc.engines.engine): the same code runs on the Arrow engine (the driver, delta-rs) and on
the Spark engine, whichever the route planner picked (cdc.engines.planner). A kind never
imports an engine.

Kinds are found by mode name in cdc.targets.registry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, SparkSession

from cdc.pg.pgtypes import Column
from cdc.rows import TableBatch
from cdc.targets import delta_table
from cdc.targets.layout import Layout, layout_of
from cdc.targets.options import TableOptions
from cdc.targets.registry import Mode
from cdc.targets.table import Commit, TableRef

if TYPE_CHECKING:
    from cdc.engines.engine import Engine

__all__ = ["TargetKind"]


class TargetKind:
    """A target kind; the registry makes one per mode (see the module docstring)."""

    # What the kind needs of the engines (cdc.engines.planner reads these, no kind is
    # special-cased by name or class):
    zorder_by_key = False  # maintenance orders the files by the first key column
    # the Arrow engine may write it (its write and upsert use no operation the Arrow engine
    # lacks); else the planner gives every part of its targets to Spark
    writes_on_driver = False

    def __init__(self, mode: Mode, options: TableOptions | None = None) -> None:
        self.mode = mode
        self.options = options or TableOptions()  # the table's (cdc.targets.options)

    @property
    def holds_rows(self) -> bool:
        return self.mode.holds_rows

    def columns(self, columns: list[Column]) -> list[tuple[str, str]]:
        """The target's (name, Spark type) list for the source's columns."""
        return [(c.name, c.spark_type) for c in columns]

    def key(self, columns: list[Column]) -> list[str]:
        """The target's columns that are never null."""
        return []

    def layout(self, ref: TableRef, columns: list[Column]) -> Layout:
        """The target's layout, properties and column comments for the source's columns,
        under the table's options (cdc.targets.layout); ConfigError for a layout column the
        target lacks."""
        comments = {c.name: c.comment for c in columns if c.comment}
        return layout_of(self.options, self.columns(columns), comments, ref.name or ref.location)

    def ensure(
        self, spark: SparkSession, ref: TableRef, columns: list[Column]
    ) -> list[tuple[str, str]]:
        """Creates the target for the source's columns, laid out as the options say (or
        adds the columns it lacks, and sets the properties it lacks); returns the target's
        (name, Spark type) list."""
        schema = self.columns(columns)
        delta_table.ensure(spark, ref, schema, self.key(columns), self.layout(ref, columns))
        return schema

    def conform(
        self,
        spark: SparkSession,
        ref: TableRef,
        columns: list[Column],
        fields: set[str],
        props: dict[str, str],
    ) -> None:
        """Brings an existing target to the kind's options where they add columns or values
        the source's columns do not call for (schema drift calls it before a batch, with the
        source's columns, the target's column names in lower case and its properties):
        nothing by default."""

    def write(self, engine: Engine, commit: Commit, batch: TableBatch) -> None:
        """Writes one batch's decoded rows (batch.rows, the engine's: cdc.rows' layout) to
        the target with the engine's operations, in one commit marked with commit, so that
        a rerun after a crash writes nothing twice. The target exists with the source's
        columns (schema drift ensured it). Declined (cdc.engines.engine) when the engine
        does not write them as the other would: the pipeline then gives them to Spark."""
        raise NotImplementedError

    def current(self, rows: DataFrame) -> DataFrame:
        """Of the target's rows, those that stand for the source's rows (``cdc verify``
        compares them with the source): all of them unless the kind keeps others."""
        return rows

    def load(
        self,
        spark: SparkSession,
        ref: TableRef,
        rows: DataFrame,
        columns: list[Column],
        engine: Engine,
    ) -> None:
        """Replaces the target's rows with a snapshot's (columns named as the source's):
        ``cdc resync``, on Spark (``engine``: the Spark engine of the target)."""
        raise NotImplementedError(f"a {self.mode.name} target is not loaded from a snapshot")

    def upsert(self, engine: Engine, rows: Any, columns: list[Column]) -> None:
        """Writes a snapshot chunk's rows (the engine's rows, columns named as the source's
        and cast to the target's types) as whole rows, with the engine's operations: a key
        the target holds gets the row, a key it lacks is inserted, nothing is deleted (kinds
        that hold rows, cdc.pipeline.snapshot_job). The target exists (the caller ensured
        it). Declined as ``write``."""
        raise NotImplementedError(f"a {self.mode.name} target is not loaded from a snapshot")
