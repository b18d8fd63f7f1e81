"""Both renderings of a MERGE plan that marks deleted rows (cdc.targets.merge_plan,
SoftDeletes: Spark SQL, cdc.targets.delta.spark_sql; delta-rs, cdc.targets.delta.delta_rs) on
two copies of one target from the same soft fold's rows: the two tables end exactly alike,
and as the plan's clauses say, for every case of the fold's output against a live row, a
marked row and a missing key; then the same with a TRUNCATE, which also marks every row the
source lacks at its time (a marked one keeps its own)."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from cdc.engines.arrow import write as driver_writes
from cdc.pg.pgtypes import Column
from cdc.rows import (
    ACTION,
    DELETE,
    GONE,
    GONE_AT,
    KEEPS,
    RESET,
    UPDATE_IF_PRESENT,
    UPSERT,
    has,
    value,
)
from cdc.targets import delta_table
from cdc.targets.merge_plan import MergePlan, SoftDeletes
from cdc.targets.mirror import DELETED, DELETED_AT, SOFT_COLUMNS
from cdc.targets.table import Commit, TableRef

pytestmark = pytest.mark.spark

COLUMNS = [Column("id", "integer", "int", True), Column("v", "text", "string", False)]
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
OLD = 1_600_000_000_000_000  # microseconds: a row marked before the batch


def _t(key: int) -> int:
    """The time of key's last DELETE in the batch (microseconds)."""
    return 1_700_000_000_000_000 + key * 1_000_001


TRUNCATED = 1_650_000_000_123_456
# the target's rows: key -> (v, __deleted, __deleted_at)
TARGET = {
    1: ("t1", False, None),
    2: ("t2", True, OLD),
    3: ("t3", False, None),
    4: ("t4", True, OLD),
    5: ("t5", False, None),
    6: ("t6", True, OLD),
    20: ("t20", False, None),
    21: ("t21", True, OLD),
}
# the soft fold's rows: key -> (action, reset, v, has v)
BATCH = {
    1: (DELETE, False, None, False),  # live row deleted: marked, keeps its values
    2: (DELETE, True, "n2", True),  # marked row inserted and deleted again: values, time
    3: (UPSERT, False, "n3", True),  # live row updated
    4: (UPSERT, True, "n4", True),  # marked row revived
    5: (UPDATE_IF_PRESENT, True, "n5", True),  # live row: updated, stays live
    6: (UPDATE_IF_PRESENT, True, "n6", True),  # marked row: values and time, stays marked
    7: (DELETE, True, "n7", True),  # missing key inserted then deleted: kept, marked
    8: (DELETE, False, None, False),  # missing key deleted: nothing
    9: (UPSERT, True, "n9", True),  # missing key inserted
    10: (UPDATE_IF_PRESENT, True, "n10", True),  # missing key, transient: nothing
}
EXPECTED = {
    1: ("t1", True, _t(1)),
    2: ("n2", True, _t(2)),
    3: ("n3", False, None),
    4: ("n4", False, None),
    5: ("n5", False, None),
    6: ("n6", True, _t(6)),
    7: ("n7", True, _t(7)),
    9: ("n9", False, None),
    20: TARGET[20],
    21: TARGET[21],
}
# after a TRUNCATE: an UPDATE_IF_PRESENT's row is gone too; every other unmarked row marked
EXPECTED_TRUNCATED = {
    **EXPECTED,
    5: ("n5", True, _t(5)),
    20: ("t20", True, TRUNCATED),
}


def _target(spark, tmp_path: Path) -> tuple[TableRef, TableRef]:
    """The target, made by Spark, and a copy of it (the same log and files)."""
    ref = TableRef(str(tmp_path / "spark"))
    schema = [(c.name, c.spark_type) for c in COLUMNS] + SOFT_COLUMNS
    delta_table.ensure(spark, ref, schema, ["id"])
    rows = [
        (k, v, gone, None if at is None else EPOCH + dt.timedelta(microseconds=at))
        for k, (v, gone, at) in sorted(TARGET.items())
    ]
    frame = spark.createDataFrame(
        rows, f"id int, v string, {DELETED} boolean, {DELETED_AT} timestamp"
    )
    delta_table.append(frame, ref)
    shutil.copytree(ref.location, tmp_path / "delta-rs")
    return ref, TableRef(str(tmp_path / "delta-rs"))


def _folded() -> pa.Table:
    """The batch as a soft fold's output, typed as the target (delta-rs casts nothing)."""
    keys = sorted(BATCH)
    actions = [BATCH[k][0] for k in keys]
    resets = [BATCH[k][1] for k in keys]
    times = [
        None if a == UPSERT else EPOCH + dt.timedelta(microseconds=_t(k))
        for k, a in zip(keys, actions, strict=True)
    ]
    return pa.table(
        {
            value(0): pa.array(keys, pa.int32()),
            value(1): pa.array([BATCH[k][2] for k in keys], pa.string()),
            has(1): pa.array([BATCH[k][3] for k in keys]),
            ACTION: pa.array(actions),
            RESET: pa.array(resets),
            GONE: pa.array([a == DELETE for a in actions]),
            GONE_AT: pa.array(times, pa.timestamp("us", "UTC")),
            KEEPS: pa.array(
                [a == UPSERT or (a == DELETE and r) for a, r in zip(actions, resets, strict=True)]
            ),
        }
    )


def _rows(spark, ref: TableRef) -> dict[int, tuple]:
    frame = delta_table.read(spark, ref)
    at = F.unix_micros(F.col(DELETED_AT))
    return {r[0]: tuple(r[1:]) for r in frame.select("id", "v", DELETED, at).collect()}


@pytest.mark.parametrize("truncated", [False, True], ids=["batch", "truncate"])
def test_both_renderings_of_a_soft_plan_write_the_same_table(spark, tmp_path, truncated):
    by_spark, by_delta_rs = _target(spark, tmp_path)
    folded = _folded()
    schema = [(c.name, c.spark_type) for c in COLUMNS]
    marks = SoftDeletes.of_fold(DELETED, DELETED_AT, TRUNCATED if truncated else None)
    plan = MergePlan.for_batch(COLUMNS, schema, (min(BATCH), max(BATCH)), marks)
    assert (plan.bounds is None) == truncated
    commit = Commit("q/c/t", 7)
    delta_table.merge(spark, by_spark, spark.createDataFrame(folded), plan, commit)
    local = delta_table.LocalTable.open_local(by_delta_rs)
    assert driver_writes.writable(local, schema, COLUMNS)
    driver_writes.merge(local, folded, plan, commit)
    expected = EXPECTED_TRUNCATED if truncated else EXPECTED
    assert _rows(spark, by_spark) == _rows(spark, by_delta_rs) == expected
    for ref in (by_spark, by_delta_rs):
        assert delta_table.LocalTable.open(ref).committed("q/c/t") == 7
