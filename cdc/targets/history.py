"""The history kind: the target holds one row per event of the source table (TRUNCATE
included, with empty columns, and so is the marker of a table re-created under its name: op
X, the rows before it being the dropped table's), appended in one commit per batch marked
with the batch's Commit. Its rows are the events' meta columns (HISTORY_META) and the
source's columns: a source column of one of those names is refused. The Arrow engine
appends the events it decoded with delta-rs (``apply_on_driver``), Spark the others. It is
never loaded from a snapshot (events cannot be re-read from the source) and needs no file order.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cdc.engines.arrow import write as driver_writes
from cdc.errors import ConfigError
from cdc.pg.pgtypes import Column, arrow_type
from cdc.rows import TableBatch, meta, value
from cdc.targets import delta_table
from cdc.targets.kind import TargetKind
from cdc.targets.table import Commit, TableRef

__all__ = ["HISTORY_META", "History"]

HISTORY_META = [
    ("op", "string"),
    ("ev_id", "long"),
    ("ev_txid", "long"),
    ("ev_time", "timestamp"),
    ("tick_id", "long"),
]


class History(TargetKind):
    """One row per event (see the module docstring)."""

    writes_on_driver = True  # apply_on_driver: delta-rs appends the decoded events

    def columns(self, columns: list[Column]) -> list[tuple[str, str]]:
        return HISTORY_META + [(c.name, c.spark_type) for c in columns]

    def ensure(
        self, spark: SparkSession, ref: TableRef, columns: list[Column]
    ) -> list[tuple[str, str]]:
        taken = {n for n, _ in HISTORY_META}
        clash = [c.name for c in columns if c.name in taken]
        if clash:
            raise ConfigError(
                f"history target {ref.location}: source column(s) {', '.join(clash)} have"
                f" the names of history columns ({', '.join(n for n, _ in HISTORY_META)});"
                ' rename them in the source, or give the table mode = "mirror"'
            )
        return super().ensure(spark, ref, columns)

    def apply_on_driver(
        self, ref: TableRef, commit: Commit, events: pa.Table, columns: list[Column]
    ) -> bool:
        """Appends one row per event decoded by the Arrow engine with delta-rs, as ``apply``
        does with Spark: the same columns, cast to the target's Arrow types (the decoded
        values have them already: the casts only name them as the target does), in one
        commit marked with commit; False where delta-rs may not write the target (then
        Spark does)."""
        local = delta_table.LocalTable.open_local(ref)
        schema = self.columns(columns)
        if local is None or not driver_writes.appendable(local, schema):
            return False
        if not driver_writes.fits(events):
            return False
        sources = [meta(n) for n, _ in HISTORY_META] + [value(i) for i in range(len(columns))]
        rows = pa.table(
            {
                name: events.column(source).cast(arrow_type(spark_type))
                for source, (name, spark_type) in zip(sources, schema, strict=True)
            }
        )
        return driver_writes.try_append(local, rows, schema, commit)

    def apply(self, spark: SparkSession, ref: TableRef, commit: Commit, batch: TableBatch) -> None:
        """Appends one row per event."""
        self.ensure(spark, ref, batch.columns)
        meta_cols = [F.col(meta(n)).cast(t).alias(n) for n, t in HISTORY_META]
        value_cols = [
            F.col(value(i)).cast(c.spark_type).alias(c.name) for i, c in enumerate(batch.columns)
        ]
        delta_table.append(batch.rows.select(*meta_cols, *value_cols), ref, commit)
