"""The Spark engine (cdc.engines.engine's interface) on the executors: rows as DataFrames,
the fold in Spark (cdc.engines.spark.fold), writes by Delta's Spark writer
(cdc.targets.delta.on_spark, every MERGE rendered from its plan). It writes every target and
every value, so it never declines.

A local target that outgrew delta-rs' MERGE budget (cdc.engines.arrow.write.outgrown) gets
deletion vectors before Spark's first MERGE or overwrite of it: without them a MERGE
rewrites every file it touches.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc import rows as contract
from cdc.engines import planner
from cdc.engines.arrow import write as arrow_rules
from cdc.engines.engine import Named
from cdc.engines.spark import fold as spark_fold
from cdc.engines.spark import versions as spark_versions
from cdc.pg.pgtypes import Column
from cdc.rows import Versioning, match_key, value
from cdc.targets import delta_table
from cdc.targets.delta import delta_rs, spark_sql
from cdc.targets.delta.local import LocalTable
from cdc.targets.table import Commit, TableRef, quote

if TYPE_CHECKING:
    from datetime import datetime

    from cdc.targets.merge_plan import Bounds, MergePlan

__all__ = ["SparkEngine", "after", "named", "time_of"]

log = logging.getLogger("cdc.merge")


def after(rows: DataFrame, ev_id: int) -> DataFrame:
    """Decoded rows after the event ev_id (Engine.after; cdc.engines.collected too)."""
    return rows.where(F.col(contract.meta("ev_id")) > ev_id)


def time_of(rows: DataFrame, ev_id: int) -> int:
    """The ev_time of decoded rows' event ev_id, in microseconds since 1970 (Engine.time_of;
    cdc.engines.collected too)."""
    at = F.unix_micros(F.col(contract.meta("ev_time")))
    found = rows.where(F.col(contract.meta("ev_id")) == ev_id).select(at).first()
    if found is None or found[0] is None:
        raise ValueError(f"no event {ev_id} with a time among the decoded rows")
    return int(found[0])


def named(rows: DataFrame, columns: list[Named]) -> DataFrame:
    """rows' source columns as the target names and types them (Engine.named)."""
    return rows.select(*[F.col(src).cast(kind).alias(name) for src, name, kind in columns])


class SparkEngine:
    """The Spark engine for one target (see the module docstring)."""

    name = planner.SPARK

    def __init__(self, spark: SparkSession, ref: TableRef, local: LocalTable | None = None):
        self.spark = spark
        self.ref = ref
        self._local = local

    # -- a batch's rows
    def fold(self, rows: DataFrame, columns: list[Column], soft: bool = False) -> DataFrame:
        return spark_fold.fold(rows, columns, soft)

    def after(self, rows: DataFrame, ev_id: int) -> DataFrame:
        return after(rows, ev_id)

    def versions(
        self, rows: DataFrame, columns: list[Column], rules: Versioning, bounds: Bounds | None
    ) -> DataFrame:
        current = delta_table.read(self.spark, self.ref).where(F.col(contract.CURRENT))
        if bounds is not None:  # prunes the files read
            current = current.alias("t").where(F.expr(spark_sql.between(bounds)))
        time = None
        if rules.truncated_at is not None:
            at = rows.where(F.col(contract.meta("ev_id")) == rules.truncated_at)
            time = F.lit(at.agg(F.max(contract.meta("ev_time"))).first()[0])
        return spark_versions.versions(rows, current, columns, rules, time)

    def changes(self, rows: DataFrame, columns: list[Column], at: datetime) -> DataFrame:
        number = F.monotonically_increasing_id() + 1
        return rows.select(
            F.lit("U").alias(contract.meta("op")),
            number.alias(contract.meta("ev_id")),
            number.alias(contract.meta("ev_txid")),
            F.lit(at).cast("timestamp").alias(contract.meta("ev_time")),
            *[F.col(quote(c.name)).alias(value(i)) for i, c in enumerate(columns)],
            *[F.lit(True).alias(contract.present(i)) for i in range(len(columns))],
        )

    def upserted(self, folded: DataFrame) -> DataFrame:
        return folded.where(F.col(contract.ACTION) == contract.UPSERT)

    def kept(self, folded: DataFrame) -> DataFrame:
        return folded.where(F.col(contract.KEEPS))

    def time_of(self, rows: DataFrame, ev_id: int) -> int:
        return time_of(rows, ev_id)

    def with_values(self, rows: DataFrame, values: list[tuple[str, str, Any]]) -> DataFrame:
        return rows.select("*", *[F.lit(v).cast(t).alias(n) for n, t, v in values])

    def named(self, rows: DataFrame, columns: list[Named]) -> DataFrame:
        return named(rows, columns)

    def key_range(
        self, folded: DataFrame, columns: list[Column], decoded: tuple[str, str] | None
    ) -> tuple[Any, Any] | None:
        """The decoder's range (cdc.rows.Facts.key_range): reading it from the folded rows
        would cost a Spark job."""
        return decoded

    def merge(
        self, rows: DataFrame, columns: list[Column], plan: MergePlan, commit: Commit
    ) -> None:
        self._deletion_vectors_when_outgrown()
        delta_table.merge(self.spark, self.ref, rows, plan, commit)

    def append(self, rows: DataFrame, schema: list[tuple[str, str]], commit: Commit) -> None:
        delta_table.append(rows, self.ref, commit)

    def overwrite(self, rows: DataFrame, schema: list[tuple[str, str]], commit: Commit) -> None:
        self._deletion_vectors_when_outgrown()
        delta_table.overwrite(rows, self.ref, commit)

    # -- a snapshot chunk's rows
    def _source(self, rows: DataFrame, columns: list[Column]) -> DataFrame:
        """A chunk's rows as a snapshot MERGE's source: value(i), and the normalised
        match_key(i) of a numeric-text key."""
        return rows.select(
            *[F.col(quote(c.name)).alias(value(i)) for i, c in enumerate(columns)],
            *[
                spark_fold.norm_numeric(F.col(quote(c.name))).alias(match_key(i))
                for i, c in enumerate(columns)
                if c.is_key and contract.is_numeric_text(c)
            ],
        )

    def chunk_bounds(self, rows: DataFrame, columns: list[Column]) -> tuple[Any, Any] | None:
        """The first key's range as text (a numeric-text key's normalised)."""
        first = next(i for i, c in enumerate(columns) if c.is_key)
        bound = F.col(quote(columns[first].name))
        if contract.is_numeric_text(columns[first]):
            bound = spark_fold.norm_numeric(bound)
        low, high = rows.agg(F.min(bound).cast("string"), F.max(bound).cast("string")).first()
        return low, high

    def holds_none_between(self, bounds: Bounds) -> bool:
        """Asked of delta-rs where it reads the target (its log and the files whose
        statistics overlap the bounds: no Spark job), else of Spark; a table delta-rs does
        not read (deletion vectors) is Spark's question."""
        local = self._local or LocalTable.reach(self.ref)
        if local is not None:
            try:
                return delta_rs.holds_none_between(local, bounds)
            except Exception as exc:  # any failure of delta-rs: Spark answers
                log.debug("%s: delta-rs did not read the range (%s): Spark reads it", self.ref, exc)
        return delta_table.holds_none_between(self.spark, self.ref, bounds)

    def append_chunk(
        self, rows: DataFrame, columns: list[Column], schema: list[tuple[str, str]]
    ) -> None:
        given = {c.name for c in columns}
        delta_table.append(
            rows.select(
                *[
                    (F.col(quote(n)) if n in given else F.lit(None)).cast(t).alias(n)
                    for n, t in schema
                ]
            ),
            self.ref,
        )

    def merge_chunk(self, rows: DataFrame, columns: list[Column], plan: MergePlan) -> None:
        # a versioned target's plan takes versioned rows (cdc.rows) as they are
        source = rows if plan.target_flag is not None else self._source(rows, columns)
        delta_table.merge(self.spark, self.ref, source, plan)

    def _deletion_vectors_when_outgrown(self) -> None:
        local = self._local or LocalTable.reach(self.ref)
        if local is not None and arrow_rules.outgrown(local):
            delta_table.enable_deletion_vectors(self.spark, self.ref)
