"""Rows Spark decoded, written by the Arrow engine: a small part (cdc.engines.planner) that
Spark had to decode (the Arrow decoder was undecided, or the events were replayed) is folded
and selected by Spark, collected to the driver as Arrow (one row per key: few), and written
by delta-rs. A Spark MERGE costs seconds whatever its size; this costs the collect.

Every write is the Arrow engine's (cdc.engines.arrow.engine), so it declines as that one
does, and Spark then writes the part.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdc.engines.arrow.engine import ArrowEngine
from cdc.engines.engine import Named
from cdc.engines.spark import engine as spark_engine
from cdc.engines.spark import fold as spark_fold
from cdc.pg.pgtypes import Column
from cdc.rows import ACTION, GONE, GONE_AT, KEEPS, RESET, has, value

if TYPE_CHECKING:
    import pyarrow as pa

    from cdc.rows import Versioning
    from cdc.targets.merge_plan import Bounds

__all__ = ["Collected"]


class Collected(ArrowEngine):
    """Spark's fold and selection, collected; the Arrow engine's writes."""

    def fold(  # type: ignore[override]
        self, rows: DataFrame, columns: list[Column], soft: bool = False
    ) -> pa.Table:
        folded = spark_fold.fold(rows, columns, soft)
        return folded.select(
            *[F.col(value(i)).cast(c.spark_type).alias(value(i)) for i, c in enumerate(columns)],
            *[F.col(has(i)) for i, c in enumerate(columns) if not c.is_key],
            ACTION,
            RESET,
            *([GONE, GONE_AT, KEEPS] if soft else []),
        ).toArrow()

    def after(self, rows: DataFrame, ev_id: int) -> DataFrame:  # type: ignore[override]
        return spark_engine.after(rows, ev_id)

    def versions(  # type: ignore[override]
        self, rows: DataFrame, columns: list[Column], rules: Versioning, bounds: Bounds | None
    ) -> pa.Table:
        """Spark's versions (its read of the current versions), collected."""
        spark = spark_engine.SparkEngine(rows.sparkSession, self.ref, self._local)
        versioned = spark.versions(rows, columns, rules, bounds)
        return versioned.select(
            *[F.col(value(i)).cast(c.spark_type).alias(value(i)) for i, c in enumerate(columns)],
            *[c for c in versioned.columns if not c.startswith("__v")],
        ).toArrow()

    def time_of(self, rows: DataFrame, ev_id: int) -> int:  # type: ignore[override]
        return spark_engine.time_of(rows, ev_id)

    def named(self, rows: DataFrame | pa.Table, columns: list[Named]) -> pa.Table:  # type: ignore[override]
        if not isinstance(rows, DataFrame):  # folded rows, collected already
            return super().named(rows, columns)
        frame = spark_engine.named(rows, columns)  # decoded rows (history), still Spark's
        return super().named(frame.toArrow(), [(name, name, kind) for _, name, kind in columns])
