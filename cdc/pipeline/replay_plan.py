"""A replay's plan (step 1 of cdc.pipeline.replay): which of a table's open quarantined
events are superseded, which stay (a TRUNCATE), which are applied; and how a key's row then
and now is compared (``aligned``, ``same_row``) from the versions the events' batches started
from (``versions_before``).

An event's cause (cdc.targets.quarantine.cause_of, which also reads the rows of earlier
versions) says whether a failing target sent it there: such events are superseded by the
target's resync, never compared.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from functools import reduce
from operator import and_

import psycopg
from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, DoubleType, FloatType, StructType

from cdc import formats
from cdc.config import Pipeline, TableMap
from cdc.engines.spark import decode as spark_decode
from cdc.engines.spark import fold as spark_fold
from cdc.engines.spark import masking as spark_masking
from cdc.engines.spark.decode import cast_text
from cdc.pg import pgtypes
from cdc.rows import is_numeric_text
from cdc.targets import delta_table, masking, quarantine, registry, schema_drift
from cdc.targets.table import Commit, TableRef, app_id, legacy_app_id, quote

__all__ = ["Plan", "Planner", "aligned", "columns_of", "plan_app", "same_row", "versions_before"]

log = logging.getLogger("cdc.replay")

# why a TRUNCATE (or a re-created table's marker) stays quarantined, as a replay counts it
RESET_KEPT = "a TRUNCATE or a re-created table's marker is not replayed"


@dataclass(frozen=True)
class Plan:
    """A recorded plan: its run, and its events counted by state."""

    run: int
    counts: dict[str, int]


def plan_app(pipeline: Pipeline, incarnation: int | None) -> str:
    """The idempotent-write identity of a replay's marks in the resolutions table (its plan;
    its end with ``#final``)."""
    resolved = pipeline.table(quarantine.resolved_name(pipeline.quarantine))
    return app_id(pipeline.source, incarnation, resolved.location) + "#plan"


def columns_of(
    conn: psycopg.Connection, pipeline: Pipeline, m: TableMap
) -> tuple[list[pgtypes.Column], schema_drift.Fill]:
    """A configured source table's columns and fill now, as the drain reads them."""
    queue = pipeline.source.capture_queue
    return (
        pgtypes.keyed_columns(conn, m.schema, m.name, queue),
        schema_drift.fill_of(conn, m.schema, m.name),
    )


class Planner:
    """Plans a replay run of one table's open events (see cdc.pipeline.replay, step 1)."""

    def __init__(self, pipeline: Pipeline, spark: SparkSession) -> None:
        self.pipeline = pipeline
        self.spark = spark
        self.rref = pipeline.table(quarantine.resolved_name(pipeline.quarantine))

    def plan(
        self,
        conn: psycopg.Connection,
        mine: DataFrame,
        maps: list[TableMap],
        incarnation: int | None,
        source: str,
    ) -> Plan | None:
        """Classifies the open events and records the plan; None when none is open."""
        events = quarantine.open_rows(mine).where(
            F.col("ev_id").isNotNull() & (F.col("ev_type") != quarantine.SNAPSHOT)
        )
        if not events.limit(1).count():
            return None
        run = quarantine.next_run(self.spark, self.rref)
        typed = spark_decode.with_op_and_map(events).cache()
        by_failing = F.col("cause") == quarantine.FAILING_TARGET
        truncate = F.col("op").isin(*formats.RESET_OPS)  # a TRUNCATE, a table re-created
        superseded: DataFrame | None = None
        for m in maps:
            if not registry.holds_rows(m.mode):
                continue
            found = self.superseded(conn, typed.where(~by_failing & ~truncate), m, incarnation)
            if found is not None:
                superseded = found if superseded is None else superseded.unionByName(found)
        plan = typed.select(*quarantine.IDENTITY, "op", "cause")
        if superseded is not None:
            hit = superseded.distinct().withColumn("__later", F.lit(True))
            plan = plan.join(hit, on=["ev_id", "tick_id"], how="left")
        else:
            plan = plan.withColumn("__later", F.lit(None).cast("boolean"))
        state = (
            F.when(by_failing, F.lit(quarantine.SUPERSEDED))
            .when(truncate, F.lit(quarantine.FAILED))
            .when(F.col("__later"), F.lit(quarantine.SUPERSEDED))
            .otherwise(F.lit(quarantine.REPLAYING))
        )
        why = (
            F.when(by_failing, F.lit("superseded by the resync of its failing target"))
            .when(
                truncate,
                F.lit(
                    f"{RESET_KEPT} (it would empty the target of later changes):"
                    f" `cdc resync {source}` rebuilds the table"
                ),
            )
            .when(F.col("__later"), F.lit("superseded by a later change of its key in the target"))
        )
        # computed once, before the plan is written to the table it was read from
        rows = plan.select(
            *quarantine.IDENTITY,
            state.alias("state"),
            why.alias("reason"),
            F.lit(run).cast("long").alias("run"),
        ).localCheckpoint()
        typed.unpersist()
        counts = dict(rows.groupBy("state").count().collect())
        commit = Commit(plan_app(self.pipeline, incarnation), run)
        quarantine.record(self.spark, self.rref, rows, commit)
        log.info(
            "%s: replay run %d planned: %d to apply, %d superseded, %d TRUNCATE or marker kept",
            source, run, counts.get(quarantine.REPLAYING, 0),
            counts.get(quarantine.SUPERSEDED, 0), counts.get(quarantine.FAILED, 0),
        )  # fmt: skip
        return Plan(run, counts)

    def superseded(
        self, conn: psycopg.Connection, typed: DataFrame, m: TableMap, incarnation: int | None
    ) -> DataFrame | None:
        """(ev_id, tick_id) of the events whose key's row in mirror target m changed after
        their batch (see cdc.pipeline.replay), or None when there can be none.

        The target's log is read once for its drain commits; an event whose batch started
        from the current version is never superseded and is not compared. For the others,
        each distinct version their batches started from is read once (time travel), and so
        is the current one, each only for the events' keys, all in the one Spark job that
        computes the result."""
        ref = self.pipeline.table(m.target)
        if not delta_table.exists(self.spark, ref):
            return None
        now = delta_table.version(self.spark, ref)
        wanted = [int(r[0]) for r in typed.select("tick_id").distinct().collect()]
        before = versions_before(self._drain_ticks(ref, m.target, incarnation), wanted, now)
        older = {t: v for t, v in before.items() if v != now}
        if not older:
            return None
        source, _ = columns_of(conn, self.pipeline, m)
        masks = masking.resolve(m.options, source, m.source, listed=not m.rule)
        columns = list(masks.columns)  # as the target holds them: a key hashed, say
        keys = [(i, c) for i, c in enumerate(columns) if c.is_key]
        key_names = [f"__k{i}" for i, _ in keys]
        kv = F.col("kv")

        def event_key(c: pgtypes.Column) -> SparkColumn:
            """An event's key value as the target holds it (masked as the drain masks it)."""
            mask = masks.of(c.name)
            if mask is None:
                return cast_text(kv.getItem(c.name), c.spark_type)
            typed = cast_text(kv.getItem(c.name), mask.source_type)
            return spark_masking.masked(typed, mask, masks)

        mapping = self.spark.createDataFrame(sorted(older.items()), "tick_id long, __v long")
        events = typed.join(F.broadcast(mapping), on="tick_id").select(
            "ev_id",
            "tick_id",
            "__v",
            *[_key_expr(event_key(c), c).alias(f"__k{i}") for i, c in keys],
        )  # fmt: skip
        wanted_keys = events.select(*key_names).distinct()
        current = delta_table.read(self.spark, ref, now).schema

        def rows_at(version: int, name: str) -> DataFrame:
            """The events' keys' rows of a version, as (keys, the row in the current schema)."""
            frame = delta_table.read(self.spark, ref, version)
            row = aligned(frame, current)
            return frame.select(
                *[_key_expr(F.col(quote(c.name)), c).alias(f"__k{i}") for i, c in keys],
                row.alias(name),
            ).join(wanted_keys, on=key_names, how="left_semi")

        # a version before the target's creation (-1) holds no row: the join finds none
        states = [
            rows_at(v, "__then").withColumn("__v", F.lit(v).cast("long"))
            for v in sorted(set(older.values()))
            if v >= 0
        ]
        joined = events
        if states:
            joined = joined.join(
                reduce(DataFrame.unionByName, states), on=[*key_names, "__v"], how="left"
            )
        else:
            joined = joined.withColumn("__then", F.lit(None).cast(current))
        joined = joined.join(rows_at(now, "__now"), on=key_names, how="left")
        changed = ~same_row(F.col("__then"), F.col("__now"), current)
        return joined.where(changed).select("ev_id", "tick_id")

    def _drain_ticks(
        self, ref: TableRef, target: str, incarnation: int | None
    ) -> list[tuple[int, int]]:
        """(version, tick) of the target's commits by the drain, from its log's txn actions."""
        src = self.pipeline.source
        apps = {app_id(src, incarnation, target), legacy_app_id(src, target)}
        return delta_table.app_commits(self.spark, ref, apps)


def aligned(frame: DataFrame, current: StructType) -> SparkColumn:
    """A row of frame (a version of the target) as a struct of the current schema's columns:
    each cast to its current type (the drift only widens a type, which no value changes), a
    column the version lacks null."""
    have = {f.name for f in frame.schema.fields}
    return F.struct(
        *[
            (F.col(quote(f.name)) if f.name in have else F.lit(None)).cast(f.dataType).alias(f.name)
            for f in current.fields
        ]
    )


def _holds_floats(kind: DataType) -> bool:
    if isinstance(kind, ArrayType):
        return _holds_floats(kind.elementType)
    if isinstance(kind, StructType):
        return any(_holds_floats(f.dataType) for f in kind.fields)
    return isinstance(kind, (FloatType, DoubleType))


def same_row(a: SparkColumn, b: SparkColumn, schema: StructType) -> SparkColumn:
    """Whether two rows (structs of schema, ``aligned``; null: no row) hold the same values,
    typed: a decimal by value (1.50 equals 1.5000), a float exactly (by its shortest text:
    NaN equals NaN, -0.0 differs from 0.0, 0.1 from 0.1000000000000001), every other value
    as Spark compares it (null equals null)."""
    same = [
        (a[f.name].cast("string").eqNullSafe(b[f.name].cast("string")))
        if _holds_floats(f.dataType)
        else a[f.name].eqNullSafe(b[f.name])
        for f in schema.fields
    ]
    both = a.isNotNull() & b.isNotNull() & reduce(and_, same, F.lit(True))
    return (a.isNull() & b.isNull()) | both


def _key_expr(col: SparkColumn, column: pgtypes.Column) -> SparkColumn:
    """A key value as keys match (numeric text without trailing zeros, cdc.engines.spark.fold)."""
    return spark_fold.norm_numeric(col) if is_numeric_text(column) else col


def versions_before(
    ticks: list[tuple[int, int]], wanted: Iterable[int], now: int
) -> dict[int, int]:
    """For each wanted tick, the target's version before its first drain commit of a tick at
    or after that one (the latest version when there is none): the state the event's batch
    started from. ticks: (version, tick) of the drain's commits."""
    by_tick = sorted((t, v) for v, t in ticks)
    firsts = [now + 1] * (len(by_tick) + 1)  # firsts[i]: the lowest version of by_tick[i:]
    for i in range(len(by_tick) - 1, -1, -1):
        firsts[i] = min(by_tick[i][1], firsts[i + 1])
    order = [t for t, _ in by_tick]
    return {tick: firsts[bisect.bisect_left(order, tick)] - 1 for tick in wanted}
