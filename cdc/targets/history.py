"""The history kind: the target holds one row per event of the source table (TRUNCATE
included, with empty columns, and so is the marker of a table re-created under its name: op
X, the rows before it being the dropped table's), appended in one commit per batch marked
with the batch's Commit. Its rows are the events' meta columns (HISTORY_META) and the
source's columns: a source column of one of those names is refused. Written against the
engine interface (cdc.engines.engine): delta-rs appends on the Arrow engine, Spark on
Spark's. It is never loaded from a snapshot (events cannot be re-read from the source)
and needs no file order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import SparkSession

from cdc.errors import ConfigError
from cdc.pg.pgtypes import Column
from cdc.rows import TableBatch, meta, value
from cdc.targets.kind import TargetKind
from cdc.targets.table import Commit, TableRef

if TYPE_CHECKING:
    from cdc.engines.engine import Engine

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

    writes_on_driver = True  # the Arrow engine appends the decoded events

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

    def write(self, engine: Engine, commit: Commit, batch: TableBatch) -> None:
        """Appends one row per event: its meta columns and the source's columns, cast to the
        target's types."""
        sources = [(meta(n), n, t) for n, t in HISTORY_META]
        sources += [(value(i), c.name, c.spark_type) for i, c in enumerate(batch.columns)]
        engine.append(engine.named(batch.rows, sources), self.columns(batch.columns), commit)
