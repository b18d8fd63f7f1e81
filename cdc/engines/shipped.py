"""Rows the Arrow engine decoded, folded on the driver and shipped to Spark, which writes them
on the executors: a large part on a cluster whose events the driver holds (the planner's
route ``arrow+spark``, cdc.engines.planner).

The batch is on the driver already (read with COPY). There, the Arrow decoder and the numpy
fold take a fraction of a second where Spark's decode and fold cost jobs: the events into a
DataFrame, a map per event, a cached decode, two shuffles. What scales with the target, the
MERGE, stays the executors' work. So the fold's rows, one per key, become a DataFrame (the
row contract's columns, each value cast to its column's Spark type, a no-op for the types the
Arrow decoder writes) and every write is the Spark engine's. A key compared in a normalised
form (numeric text, float: cdc.rows.restates_key) is folded by Spark from the decoded rows
shipped as they are. Every source Spark reads here is a fixed Arrow table: deterministic, so
the MERGE runs without Delta's copy of its source (cdc.pipeline.parts sets it).

The driver's JVM holds a shipped table whole: folded rows over ``SHIP_MAX_BYTES`` are
declined (nothing committed) and Spark decodes and writes the part from its events instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc import rows as contract
from cdc.engines.arrow import engine as arrow_engine
from cdc.engines.arrow import fold as arrow_fold
from cdc.engines.arrow import write as arrow_rules
from cdc.engines.engine import Declined, Named
from cdc.engines.spark import fold as spark_fold
from cdc.engines.spark.engine import SparkEngine
from cdc.pg.pgtypes import Column
from cdc.rows import value
from cdc.targets.delta.local import LocalTable
from cdc.targets.table import TableRef

if TYPE_CHECKING:
    import pyarrow as pa

    from cdc.rows import Versioning
    from cdc.targets.merge_plan import Bounds

__all__ = ["SHIP_MAX_BYTES", "Shipped"]

SHIP_MAX_BYTES = 512 << 20  # of Arrow rows handed to the driver's JVM at once


class Shipped(SparkEngine):
    """The Arrow engine's fold on the driver; the Spark engine's writes (see the module)."""

    def __init__(self, spark: SparkSession, ref: TableRef, local: LocalTable | None = None):
        super().__init__(spark, ref, local)
        self._range: tuple[Any, Any] | None = None  # the last fold's first-key range

    def ship(self, rows: pa.Table, columns: list[Column]) -> DataFrame:
        """Arrow rows of the row contract as a DataFrame, value(i) as its column's Spark
        type; declined past SHIP_MAX_BYTES."""
        frame = self._frame(rows)
        typed = {value(i): c.spark_type for i, c in enumerate(columns)}
        return frame.select(
            *[
                F.col(name).cast(typed[name]).alias(name) if name in typed else F.col(name)
                for name in frame.columns
            ]
        )

    def fold(  # type: ignore[override]
        self, rows: pa.Table, columns: list[Column], soft: bool = False
    ) -> DataFrame:
        if any(contract.restates_key(c) for c in columns):
            return spark_fold.fold(self.ship(rows, columns), columns, soft)
        folded = arrow_fold.fold_rows(rows, columns, soft)
        self._range = _key_range(folded, columns)
        return self.ship(folded, columns)

    def versions(  # type: ignore[override]
        self, rows: pa.Table, columns: list[Column], rules: Versioning, bounds: Bounds | None
    ) -> DataFrame:
        """Spark's versions of the decoded rows, shipped as they are: the current versions
        they start from are the executors' to read."""
        return super().versions(self.ship(rows, columns), columns, rules, bounds)

    def after(self, rows: pa.Table, ev_id: int) -> pa.Table:  # type: ignore[override]
        return arrow_engine.after(rows, ev_id)

    def time_of(self, rows: pa.Table, ev_id: int) -> int:  # type: ignore[override]
        return arrow_engine.time_of(rows, ev_id)

    def named(self, rows: pa.Table | DataFrame, columns: list[Named]) -> DataFrame:
        if not isinstance(rows, DataFrame):  # decoded rows, appended as they are (history)
            rows = self._frame(rows)
        return super().named(rows, columns)

    def key_range(
        self, folded: DataFrame, columns: list[Column], decoded: tuple[str, str] | None
    ) -> tuple[Any, Any] | None:
        """The folded rows' first-key range, taken on the driver before they were shipped
        (None for a key Spark folded: no pruning range, every file is a candidate)."""
        return self._range

    def _frame(self, rows: pa.Table) -> DataFrame:
        if rows.nbytes > SHIP_MAX_BYTES:
            raise Declined(
                f"{rows.nbytes:,} bytes of rows to ship to Spark, over {SHIP_MAX_BYTES:,}"
            )
        # Spark makes a partition of each Arrow batch of maxRecordsPerBatch rows (10,000):
        # a million folded rows would be a hundred tasks in every stage of the MERGE
        parallelism = self.spark.sparkContext.defaultParallelism
        return self.spark.createDataFrame(rows).coalesce(max(1, parallelism))


def _key_range(folded: pa.Table, columns: list[Column]) -> tuple[Any, Any] | None:
    """The first key's range of the folded rows (cdc.engines.arrow.write.key_range), None
    when a date in it has no Python form (beyond years 1-9999)."""
    first = next((i for i, c in enumerate(columns) if c.is_key), None)
    if first is None or not arrow_rules.fits(folded.select([value(first)])):
        return None
    return arrow_rules.key_range(folded, columns)
