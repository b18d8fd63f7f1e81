"""Both renderings of one MERGE plan (cdc.targets.merge_plan) on the same inputs: two copies
of one target Delta table, one MERGEd by Spark (cdc.targets.delta.on_spark.merge), the other
by delta-rs (cdc.targets.delta.delta_rs.merge, through the driver's cdc.engines.arrow.write
for a batch), from the same source rows; the two tables end exactly alike, and as expected.

The source holds every case of a fold's output: a DELETE, an UPSERT that sets some columns
and keeps the others, one that sets a column to null, one whose key has an INSERT (RESET:
its unset columns become null), an insert, an UPDATE_IF_PRESENT of a present and of a
missing key, a DELETE of a missing key; the plan's bounds prune the first key, whose
literals are written in each dialect (an integer, a text with a quote and a backslash, a
date), beside a column whose name each dialect must quote."""

from __future__ import annotations

import datetime as dt
import decimal
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from cdc.engines.arrow import write as driver_writes
from cdc.pg.pgtypes import Column
from cdc.rows import ACTION, DELETE, RESET, UPDATE_IF_PRESENT, UPSERT, has, value
from cdc.targets import delta_table
from cdc.targets.delta import delta_rs
from cdc.targets.merge_plan import MergePlan
from cdc.targets.table import Commit, TableRef

pytestmark = pytest.mark.spark

HOSTILE = 'we"ird'  # quoted differently by each dialect
KEYS = {
    "long": (Column("id", "bigint", "long", True), pa.int64(), lambda k: k),
    "string": (Column("id", "text", "string", True), pa.string(), lambda k: f"k'{k:03d}\\"),
    "date": (
        Column("id", "date", "date", True),
        pa.date32(),
        lambda k: dt.date(2000, 1, 1) + dt.timedelta(days=k),
    ),
}
VALUES = [
    Column(HOSTILE, "text", "string", False),
    Column("n", "numeric(10,2)", "decimal(10,2)", False),
    Column("d", "date", "date", False),
]
VALUE_TYPES = [pa.string(), pa.decimal128(10, 2), pa.date32()]


def _row(v: str | None, n: str | None, d: int | None) -> tuple:
    day = None if d is None else dt.date(2024, 1, 1) + dt.timedelta(days=d)
    return (v, None if n is None else decimal.Decimal(n), day)


# the target's rows by key number: (v, n, d)
TARGET = {k: _row(f"t{k}", f"{k}.25", k) for k in (-10, 1, 2, 3, 5, 6, 7, 50)}
# the batch by key number: (action, reset, (v, n, d), (has v, has n, has d))
BATCH = {
    1: (DELETE, False, _row(None, None, None), (False, False, False)),
    2: (UPSERT, False, _row("new2", None, None), (True, False, False)),  # n, d kept
    3: (UPSERT, True, _row("new3", None, None), (True, False, False)),  # n, d null
    4: (UPSERT, True, _row("new4", "4.50", 40), (True, True, True)),  # inserted
    5: (UPDATE_IF_PRESENT, False, _row(None, "5.75", None), (False, True, False)),
    6: (UPSERT, False, _row(None, None, 60), (True, False, True)),  # v set to null
    7: (UPSERT, False, _row(None, None, None), (False, False, False)),  # all kept
    8: (UPDATE_IF_PRESENT, False, _row("new8", None, None), (True, False, False)),  # missing
    9: (DELETE, False, _row(None, None, None), (False, False, False)),  # missing
}
EXPECTED = {
    -10: TARGET[-10],
    2: ("new2", *TARGET[2][1:]),
    3: ("new3", None, None),
    4: BATCH[4][2],
    5: (TARGET[5][0], decimal.Decimal("5.75"), TARGET[5][2]),
    6: (None, TARGET[6][1], BATCH[6][2][2]),
    7: TARGET[7],
    50: TARGET[50],
}


def _columns(key: str) -> list[Column]:
    return [KEYS[key][0], *VALUES]


def _target(spark, tmp_path: Path, key: str) -> tuple[TableRef, TableRef]:
    """The target, made by Spark, and a copy of it (the same log and files)."""
    column, _, of = KEYS[key]
    columns = _columns(key)
    schema = [(c.name, c.spark_type) for c in columns]
    ref = TableRef(str(tmp_path / "spark"))
    delta_table.ensure(spark, ref, schema, [column.name])
    ddl = ", ".join(f"`{n.replace('`', '``')}` {t}" for n, t in schema)
    rows = [(of(k), *v) for k, v in sorted(TARGET.items())]
    delta_table.append(spark.createDataFrame(rows, ddl), ref)
    shutil.copytree(ref.location, tmp_path / "delta-rs")
    return ref, TableRef(str(tmp_path / "delta-rs"))


def _rows(spark, ref: TableRef) -> list[tuple]:
    return sorted(tuple(r) for r in delta_table.read(spark, ref).collect())


def _expected(key: str) -> list[tuple]:
    of = KEYS[key][2]
    return sorted((of(k), *v) for k, v in EXPECTED.items())


def _folded(key: str) -> pa.Table:
    """The batch as a fold's output, typed as the target (delta-rs casts nothing)."""
    _, key_type, of = KEYS[key]
    keys = sorted(BATCH)
    columns = {value(0): pa.array([of(k) for k in keys], key_type)}
    for i, kind in enumerate(VALUE_TYPES, start=1):
        columns[value(i)] = pa.array([BATCH[k][2][i - 1] for k in keys], kind)
        columns[has(i)] = pa.array([BATCH[k][3][i - 1] for k in keys])
    columns[ACTION] = pa.array([BATCH[k][0] for k in keys])
    columns[RESET] = pa.array([BATCH[k][1] for k in keys])
    return pa.table(columns)


@pytest.mark.parametrize("key", sorted(KEYS))
def test_both_renderings_of_a_batch_plan_write_the_same_table(spark, tmp_path, key):
    by_spark, by_delta_rs = _target(spark, tmp_path, key)
    folded = _folded(key)
    columns = _columns(key)
    schema = [(c.name, c.spark_type) for c in columns]
    low, high = (KEYS[key][2](k) for k in (min(BATCH), max(BATCH)))
    plan = MergePlan.for_batch(columns, schema, (low, high))
    assert plan.bounds is not None
    commit = Commit("q/c/t", 12)
    delta_table.merge(spark, by_spark, spark.createDataFrame(folded), plan, commit)
    local = delta_table.LocalTable.open_local(by_delta_rs)
    assert driver_writes.writable(local, schema, columns)
    driver_writes.merge(local, folded, plan, commit)
    assert _rows(spark, by_spark) == _rows(spark, by_delta_rs) == _expected(key)
    for ref in (by_spark, by_delta_rs):
        assert delta_table.LocalTable.open(ref).committed("q/c/t") == 12


@pytest.mark.parametrize("key", sorted(KEYS))
def test_both_renderings_of_a_snapshot_chunk_plan_write_the_same_table(spark, tmp_path, key):
    by_spark, by_delta_rs = _target(spark, tmp_path, key)
    _, key_type, of = KEYS[key]
    columns = _columns(key)
    schema = [(c.name, c.spark_type) for c in columns]
    chunk = {k: _row(f"s{k}", None if k % 2 else f"{k}.5", k + 100) for k in range(1, 10)}
    rows = pa.table(
        {
            value(0): pa.array([of(k) for k in chunk], key_type),
            **{
                value(i): pa.array([r[i - 1] for r in chunk.values()], kind)
                for i, kind in enumerate(VALUE_TYPES, start=1)
            },
        }
    )
    plan = MergePlan.for_snapshot_chunk(columns, schema, (of(1), of(9)))
    assert plan.bounds is not None
    assert not delta_table.holds_none_between(spark, by_spark, plan.bounds)
    assert not delta_rs.holds_none_between(
        delta_table.LocalTable.open_local(by_delta_rs), plan.bounds
    )
    delta_table.merge(spark, by_spark, spark.createDataFrame(rows), plan)
    delta_rs.merge(delta_table.LocalTable.open_local(by_delta_rs), rows, plan, None)
    expected = sorted((of(k), *v) for k, v in {**TARGET, **chunk}.items())
    assert _rows(spark, by_spark) == _rows(spark, by_delta_rs) == expected
    empty = MergePlan.for_snapshot_chunk(columns, schema, (of(10), of(49)))
    assert delta_table.holds_none_between(spark, by_spark, empty.bounds)
    assert delta_rs.holds_none_between(delta_table.LocalTable.open_local(by_delta_rs), empty.bounds)
