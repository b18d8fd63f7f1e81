"""The MERGE plan as a value (cdc.targets.merge_plan) and its two renderings, Spark SQL
(cdc.targets.delta.spark_sql) and delta-rs / DataFusion (cdc.targets.delta.delta_rs), as text:
no JVM. tests/spark/test_merge_plan.py runs both renderings of the same plans on tables."""

from __future__ import annotations

import datetime as dt

import pytest

from cdc import rows as contract
from cdc.pg.pgtypes import Column
from cdc.rows import ACTION, RESET, has, match_key, value
from cdc.targets.delta import delta_rs, spark_sql
from cdc.targets.merge_plan import (
    ALWAYS,
    EXACT,
    FLOAT,
    IF_SET,
    KEEP,
    NUMERIC_TEXT,
    Bounds,
    KeyMatch,
    MergePlan,
    SetColumn,
    SourceIs,
)

ID = Column("id", "integer", "int", True)
V = Column("v", "text", "string", False)
N = Column("n", "numeric(10,2)", "decimal(10,2)", False)
COLUMNS = [ID, V, N]
SCHEMA = [(c.name, c.spark_type) for c in COLUMNS]


def test_a_batch_plan_deletes_sets_what_the_batch_sets_and_inserts_upserts():
    plan = MergePlan.for_batch(COLUMNS, SCHEMA, ("3", "40"))
    assert plan.keys == (KeyMatch("id", value(0), EXACT),)
    assert plan.sets == (
        SetColumn("id", value(0), KEEP),
        SetColumn("v", value(1), IF_SET, (RESET, has(1))),
        SetColumn("n", value(2), IF_SET, (RESET, has(2))),
    )
    assert plan.updates == plan.sets[1:]
    assert plan.inserts == (("id", value(0)), ("v", value(1)), ("n", value(2)))
    assert plan.delete_when == SourceIs(ACTION, contract.DELETE)
    assert plan.insert_when == SourceIs(ACTION, contract.UPSERT)
    assert plan.bounds == Bounds("id", "int", "3", "40")


def test_restated_keys_match_on_their_match_column_and_take_the_batch_form():
    num = Column("k", "numeric", "string", True)
    real = Column("f", "double precision", "double", True)
    schema = [("k", "string"), ("f", "double"), ("v", "string")]
    plan = MergePlan.for_batch([num, real, V], schema, ("1.50", "20"))
    assert plan.keys == (
        KeyMatch("k", match_key(0), NUMERIC_TEXT),
        KeyMatch("f", match_key(1), FLOAT),
    )
    assert [s.when for s in plan.sets] == [ALWAYS, ALWAYS, IF_SET]
    assert [s.source for s in plan.sets[:2]] == [value(0), value(1)]
    # every text of the numbers 1.5 to 20 (1.50, 20.000, ...) lies in the range
    assert plan.bounds == Bounds("k", "string", "1.5", "201")


def test_a_snapshot_chunk_plan_writes_whole_rows_and_deletes_nothing():
    real = Column("f", "real", "float", True)
    plan = MergePlan.for_snapshot_chunk([real, V], [("f", "float"), ("v", "string")], None)
    assert plan.keys == (KeyMatch("f", value(0), FLOAT),)
    assert plan.sets == (SetColumn("f", value(0), ALWAYS), SetColumn("v", value(1), ALWAYS))
    assert plan.inserts == (("f", value(0)), ("v", value(1)))
    assert (plan.delete_when, plan.insert_when, plan.bounds) == (None, None, None)


@pytest.mark.parametrize(
    ("key", "key_range", "bounds"),
    [
        (ID, None, None),
        (ID, (None, None), None),
        (ID, ("1", "x"), None),  # integer bounds that are not integers
        (ID, (-5, 2**40), ("-5", str(2**40))),  # Python values: their text
        (Column("d", "date", "date", True), (dt.date(44, 3, 15),) * 2, ("0044-03-15",) * 2),
        (Column("t", "timestamptz", "timestamp", True), ("2024-01-01", "2024-02-01"), None),
        (Column("f", "real", "float", True), ("1", "2"), None),
        (Column("s", "text", "string", True), ("a'b", "z"), ("a'b", "z")),
        (Column("k", "numeric", "string", True), ("-0.0", "3.10"), ("0", "3.11")),
    ],
)
def test_bounds(key, key_range, bounds):
    found = Bounds.of([key, V], key_range)
    assert (None if found is None else (found.low, found.high)) == bounds


def test_spark_sql_of_a_batch_plan():
    plan = MergePlan.for_batch(COLUMNS, SCHEMA, ("3", "40"))
    assert spark_sql.statement(plan, "delta.`/t`", "src") == (
        "merge into delta.`/t` t using src s on t.`id` = s.__v0 and t.`id` between 3 and 40"
        " when matched and s.__action = 'D' then delete"
        " when matched then update set"
        " `v` = case when s.__reset or s.__has1 then s.__v1 else t.`v` end,"
        " `n` = case when s.__reset or s.__has2 then s.__v2 else t.`n` end"
        " when not matched and s.__action = 'U'"
        " then insert (`id`, `v`, `n`) values (s.__v0, s.__v1, s.__v2)"
    )


def test_spark_sql_of_a_snapshot_chunk_plan_with_a_numeric_text_key():
    num = Column("we`ird", "numeric", "string", True)
    plan = MergePlan.for_snapshot_chunk([num], [("we`ird", "string")], ("1", "2"))
    norm = spark_sql.norm_numeric("t.`we``ird`")
    assert norm.startswith("case when case when t.`we``ird` like '%.%' then regexp_replace(")
    assert spark_sql.statement(plan, "x", "src") == (
        f"merge into x t using src s on {norm} = s.{match_key(0)}"
        " and t.`we``ird` between '1' and '21'"
        " when matched then update set `we``ird` = s.__v0"
        " when not matched then insert (`we``ird`) values (s.__v0)"
    )


@pytest.mark.parametrize(
    ("spark_type", "text", "spark", "datafusion"),
    [
        ("long", "-12", "-12", "-12"),
        ("string", "a'b\\c", "'a\\'b\\\\c'", "'a''b\\c'"),
        ("date", "2024-01-31", "cast('2024-01-31' as date)", "DATE '2024-01-31'"),
    ],
)
def test_bounds_are_literals_of_each_dialect(spark_type, text, spark, datafusion):
    assert spark_sql.literal(text, spark_type) == spark
    assert delta_rs.literal(text, spark_type) == datafusion


def test_delta_rs_rendering_of_a_batch_plan():
    hostile = Column('we"ird', "text", "string", False)
    columns = [ID, hostile]
    plan = MergePlan.for_batch(columns, [("id", "int"), ('we"ird', "string")], (3, 40))
    assert delta_rs.on(plan) == 't."id" = s.__v0 and t."id" between 3 and 40'
    assert delta_rs.updates(plan) == {
        '"we""ird"': 'case when s.__reset or s.__has1 then s.__v1 else t."we""ird" end'
    }
    assert delta_rs.inserts(plan) == {'"id"': "s.__v0", '"we""ird"': "s.__v1"}
    assert delta_rs.between(plan.bounds, alias="") == '"id" between 3 and 40'


def test_delta_rs_refuses_keys_it_would_compare_otherwise_than_spark():
    for key in (Column("k", "numeric", "string", True), Column("f", "real", "float", True)):
        plan = MergePlan.for_batch([key, V], [("k", "string"), ("v", "string")], None)
        with pytest.raises(ValueError, match="compares keys exactly"):
            delta_rs.on(plan)
