"""A batch's changes as versions (SCD type 2, the rules in cdc.targets.scd2), in Spark: the
decoded rows and the target's current versions of their keys become versioned rows
(cdc.rows), the MERGE source of MergePlan.for_versions.

Per key, every step in ev_id order: the target's current version (step -1), then one step
per source transaction (its end state: existence by the fold's rules, cdc.engines.spark.fold,
and the columns it sets), and the batch's last TRUNCATE (a step that ends whatever is open).
Windows over the key carry existence and each column's last value forward, mark the steps
that open a version (a row after no row, a tombstone after a row, a tracked column changed)
and number the versions; one aggregation per version takes its last state, and a window over
the versions gives each its end, the start of the next.
"""

from __future__ import annotations

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from cdc import rows as contract
from cdc.engines.spark.fold import norm_numeric
from cdc.pg.pgtypes import Column
from cdc.rows import CURRENT, DELETED, END, START, Versioning, merge_key, meta, present, value

__all__ = ["versions"]

ROW, TOMBSTONE, GAP = "row", "tombstone", "gap"  # what a step leaves the key as


def _group(column: Column, frame_value: SparkColumn) -> SparkColumn:
    """A key column as keys compare (a numeric key kept as text: normalised)."""
    return norm_numeric(frame_value) if contract.is_numeric_text(column) else frame_value


def versions(
    rows: DataFrame,
    current: DataFrame,
    columns: list[Column],
    rules: Versioning,
    truncated_time: SparkColumn | None = None,
) -> DataFrame:
    """Versioned rows (cdc.rows) of decoded rows and the target's current versions
    (``current``: the target's rows named as its columns, the version columns included) of
    their keys (all of them when the batch truncates). ``truncated_time``: the TRUNCATE's
    ev_time, with rules.truncated_at."""
    keys = [i for i, c in enumerate(columns) if c.is_key]
    others = [i for i, c in enumerate(columns) if not c.is_key]
    groups = [f"__g{i}" for i in keys]
    op, ev_id = F.col(meta("op")), F.col(meta("ev_id"))

    # -- one step per key and transaction (split at the TRUNCATE)
    part = F.lit(0) if rules.truncated_at is None else (ev_id > rules.truncated_at).cast("int")
    resets = op.isin("I", "D")
    changes = rows.where(op.isin("I", "U", "D"))
    per_txn = [
        F.sum(F.when(op == "I", 1).when(op == "D", -1).otherwise(0)).alias("__n"),
        F.max_by(op, F.when(resets, ev_id)).alias("__reset_op"),
        F.max(F.when(op == "I", ev_id)).alias("__insert"),
        F.max(ev_id).alias("__at"),
        F.max(meta("ev_time")).alias("__time"),
    ]
    per_txn += [F.max_by(value(i), ev_id).alias(value(i)) for i in keys]
    for i in others:
        at = F.when(F.col(present(i)) & (op != "D"), ev_id)
        per_txn += [F.max_by(value(i), at).alias(f"__last{i}"), F.max(at).alias(f"__at{i}")]
    txns = changes.groupBy(
        *[_group(columns[i], F.col(value(i))).alias(f"__g{i}") for i in keys],
        F.col(meta("ev_txid")),
        part.alias("__part"),
    ).agg(*per_txn)
    n, reset_op, insert = F.col("__n"), F.col("__reset_op"), F.col("__insert")
    exists = (
        F.when(reset_op.isNull() | (n > 0), True)
        .when(n < 0, False)
        .when(reset_op == "I", True)
        .otherwise(F.lit(None).cast("boolean"))  # moved in and out: as it was
    )
    step_columns = [
        *groups,
        *[F.col(value(i)) for i in keys],
        *[F.lit(None).cast(columns[i].spark_type).alias(merge_key(i)) for i in keys],
        F.col("__at"),
        F.col("__time"),
        exists.alias("__exists"),
        F.lit(False).alias("__trunc"),
        F.lit(False).alias("__s0"),
    ]
    for i in others:
        at = F.col(f"__at{i}")
        has = at.isNotNull() & (insert.isNull() | (at >= insert))
        step_columns += [has.alias(f"__h{i}"), F.col(f"__last{i}").alias(value(i))]
    steps = txns.select(*step_columns)

    # -- the target's current version of each key: step -1
    alive = ~F.col(DELETED) if rules.tombstones else F.lit(True)
    known = current.select(
        *[_group(columns[i], F.col(columns[i].name)).alias(f"__g{i}") for i in keys],
        *[F.col(columns[i].name).alias(value(i)) for i in keys],
        *[F.col(columns[i].name).alias(merge_key(i)) for i in keys],
        F.lit(-1).cast("long").alias("__at"),
        F.col(START).alias("__time"),
        alive.alias("__exists"),
        F.lit(False).alias("__trunc"),
        F.lit(True).alias("__s0"),
        *[
            c
            for i in others
            for c in (F.lit(True).alias(f"__h{i}"), F.col(columns[i].name).alias(value(i)))
        ],
    )
    # only the keys of the batch's changes, unless a TRUNCATE ends every version
    if rules.truncated_at is None:
        known = known.join(txns.select(*groups).distinct(), groups, "left_semi")
    steps = steps.unionByName(known)

    # -- the TRUNCATE: ends every key's version that is open before it
    if rules.truncated_at is not None and truncated_time is not None:
        before = steps.where(F.col("__at") < rules.truncated_at)
        ends = before.groupBy(*groups).agg(
            *[F.max_by(value(i), "__at").alias(value(i)) for i in keys]
        )
        steps = steps.unionByName(
            ends.select(
                *groups,
                *[F.col(value(i)) for i in keys],
                *[F.lit(None).cast(columns[i].spark_type).alias(merge_key(i)) for i in keys],
                F.lit(rules.truncated_at).cast("long").alias("__at"),
                truncated_time.cast("timestamp").alias("__time"),
                F.lit(False).alias("__exists"),
                F.lit(True).alias("__trunc"),
                F.lit(False).alias("__s0"),
                *[
                    c
                    for i in others
                    for c in (
                        F.lit(False).alias(f"__h{i}"),
                        F.lit(None).cast(columns[i].spark_type).alias(value(i)),
                    )
                ],
            )
        )

    # -- carried forward per key, in ev_id order
    order = Window.partitionBy(*groups).orderBy("__at")
    upto = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    carried = [
        F.coalesce(F.last("__exists", ignorenulls=True).over(upto), F.lit(False)).alias("__alive")
    ]
    for i in others:
        held = F.last(F.when(F.col(f"__h{i}"), F.struct(F.col(value(i)).alias("v"))), True)
        carried.append(held.over(upto).getField("v").alias(f"__s{i}"))
    steps = steps.select(
        *groups,
        *[F.col(value(i)) for i in keys],
        *[F.col(merge_key(i)) for i in keys],
        "__at",
        "__time",
        "__trunc",
        "__s0",
        *carried,
    )
    leaves = F.when(F.col("__alive"), F.lit(ROW))
    if rules.tombstones:
        leaves = leaves.when(~F.col("__trunc"), F.lit(TOMBSTONE))
    leaves = leaves.otherwise(F.lit(GAP))
    steps = steps.withColumn("__leaves", leaves)
    before = F.lag("__leaves").over(order)
    changed = F.lit(False)
    for i in rules.tracked:
        changed = changed | ~F.col(f"__s{i}").eqNullSafe(F.lag(f"__s{i}").over(order))
    opens = (
        F.col("__s0")
        | F.col("__trunc")
        | before.isNull()
        | (F.col("__leaves") != before)
        | ((F.col("__leaves") == ROW) & changed)
    )
    steps = steps.withColumn("__vid", F.sum(opens.cast("int")).over(upto))

    # -- one row per version: its last state; its end is the next version's start
    per_version = [
        F.min_by("__leaves", "__at").alias("__leaves"),
        F.min_by("__time", "__at").alias("__start"),
        F.max("__s0").alias("__s0"),
        *[F.max_by(value(i), "__at").alias(value(i)) for i in keys],
        *[F.max(merge_key(i)).alias(merge_key(i)) for i in keys],
        *[F.max_by(f"__s{i}", "__at").alias(value(i)) for i in others],
    ]
    row = F.col("__leaves") == ROW  # a tombstone keeps its key alone
    found = steps.groupBy(*groups, "__vid").agg(*per_version)
    ended = found.withColumn(
        "__end", F.lead("__start").over(Window.partitionBy(*groups).orderBy("__vid"))
    ).where(F.col("__leaves") != GAP)
    return ended.select(
        *[
            F.col(value(i)) if columns[i].is_key else F.when(row, F.col(value(i))).alias(value(i))
            for i in range(len(columns))
        ],
        *[F.when(F.col("__s0"), F.col(merge_key(i))).alias(merge_key(i)) for i in keys],
        F.col("__start").alias(START),
        F.col("__end").alias(END),
        F.col("__end").isNull().alias(CURRENT),
        (F.col("__leaves") == TOMBSTONE).alias(DELETED),
    )
