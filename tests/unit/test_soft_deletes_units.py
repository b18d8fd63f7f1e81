"""Soft deletes without a JVM: the age of ``cdc maintain --purge-deleted-older-than``
(cdc.ops.maintain.parse_age) and its command-line option, the MERGE plan that marks deleted
rows (cdc.targets.merge_plan.SoftDeletes) and its Spark SQL text, and the columns of a mirror
target that keeps deleted rows. tests/spark/test_soft_merge.py runs both renderings of the
plan on tables, tests/e2e/test_soft_deletes.py the drain."""

from __future__ import annotations

import datetime as dt

import pytest

from cdc import cli
from cdc.ops import maintain
from cdc.pg.pgtypes import Column
from cdc.rows import ACTION, DELETE, GONE, GONE_AT, KEEPS, UPDATE_IF_PRESENT
from cdc.targets import registry
from cdc.targets.delta import spark_sql
from cdc.targets.merge_plan import MergePlan, SoftDeletes, SourceIs
from cdc.targets.mirror import SOFT_COLUMNS
from cdc.targets.options import TableOptions

ID = Column("id", "integer", "int", True)
V = Column("v", "text", "string", False)
COLUMNS = [ID, V]
SCHEMA = [("id", "int"), ("v", "string")]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30d", dt.timedelta(days=30)),
        ("12h", dt.timedelta(hours=12)),
        ("90m", dt.timedelta(minutes=90)),
        ("45s", dt.timedelta(seconds=45)),
        ("2w", dt.timedelta(weeks=2)),
        ("0s", dt.timedelta(0)),
        ("007d", dt.timedelta(days=7)),
    ],
)
def test_an_age_is_a_whole_number_and_one_unit(text: str, expected: dt.timedelta) -> None:
    assert maintain.parse_age(text) == expected


@pytest.mark.parametrize(
    "text",
    ["", "30", "d", "1.5d", "-3d", "+3d", "30 d", " 30d", "30d ", "30D", "3dd", "1d2h", "30y"],
)
def test_anything_else_is_not_an_age(text: str) -> None:
    with pytest.raises(ValueError, match="is not an age: write a whole number and one unit"):
        maintain.parse_age(text)


def test_an_age_longer_than_any_time_is_refused() -> None:
    with pytest.raises(ValueError, match="longer than any time can be"):
        maintain.parse_age("999999999w")


def test_the_purge_option_takes_an_age(capsys: pytest.CaptureFixture[str]) -> None:
    """cdc maintain --purge-deleted-older-than: none by default, an age parsed, a wrong one
    refused by the command line with the reason."""
    parser = cli.build_parser()
    assert parser.parse_args(["maintain", "--config", "c"]).purge_deleted_older_than is None
    args = parser.parse_args(["maintain", "--config", "c", "--purge-deleted-older-than", "30d"])
    assert args.purge_deleted_older_than == dt.timedelta(days=30)
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(["maintain", "--config", "c", "--purge-deleted-older-than", "30 days"])
    assert exited.value.code == 2
    assert "'30 days' is not an age" in capsys.readouterr().err


def test_a_soft_mirror_target_has_the_two_columns_last() -> None:
    hard = registry.kind("mirror", TableOptions())
    soft = registry.kind("mirror", TableOptions(deletes="soft"))
    assert hard.columns(COLUMNS) == SCHEMA
    assert soft.columns(COLUMNS) == SCHEMA + SOFT_COLUMNS
    assert SOFT_COLUMNS == [("__deleted", "boolean"), ("__deleted_at", "timestamp")]


def test_a_soft_batch_plan_marks_instead_of_deleting() -> None:
    """The fold's soft columns; no delete clause; a DELETE marks, an UPDATE_IF_PRESENT keeps
    a marked row marked; with a TRUNCATE an UPDATE_IF_PRESENT marks too, and no bounds."""
    marks = SoftDeletes.of_fold("__deleted", "__deleted_at")
    assert (marks.gone, marks.gone_at, marks.keeps) == (GONE, GONE_AT, KEEPS)
    assert marks.marked_when == (SourceIs(ACTION, DELETE),)
    assert marks.kept_when == SourceIs(ACTION, UPDATE_IF_PRESENT)
    plan = MergePlan.for_batch(COLUMNS, SCHEMA, ("1", "9"), marks)
    assert (plan.delete_when, plan.insert_when, plan.soft) == (None, None, marks)
    assert plan.bounds is not None
    hard = MergePlan.for_batch(COLUMNS, SCHEMA, ("1", "9"))
    assert (plan.keys, plan.sets, plan.inserts) == (hard.keys, hard.sets, hard.inserts)
    truncated = SoftDeletes.of_fold("__deleted", "__deleted_at", 1_700_000_000_000_000)
    assert truncated.marked_when == (SourceIs(ACTION, DELETE), SourceIs(ACTION, UPDATE_IF_PRESENT))
    assert truncated.kept_when is None
    assert MergePlan.for_batch(COLUMNS, SCHEMA, ("1", "9"), truncated).bounds is None


def test_the_spark_sql_of_a_soft_plan() -> None:
    """The clauses in the plan's order: marked, kept marked, revived, inserted as the source
    row says; with a TRUNCATE, every other unmarked row marked at its time."""
    plan = MergePlan.for_batch(COLUMNS, SCHEMA, None, SoftDeletes.of_fold("__deleted", "at x"))
    sets = "`v` = case when s.__reset or s.__has1 then s.__v1 else t.`v` end"
    assert spark_sql.clauses(plan) == (
        f"when matched and (s.__action = 'D') then update set {sets},"
        " `__deleted` = true, `at x` = s.__gone_at"
        f" when matched and s.__action = 'M' and t.`__deleted` then update set {sets},"
        " `at x` = s.__gone_at"
        f" when matched then update set {sets}, `__deleted` = false, `at x` = null"
        " when not matched and s.__keeps then insert (`id`, `v`, `__deleted`, `at x`)"
        " values (s.__v0, s.__v1, s.__gone, s.__gone_at)"
    )
    at = 1_700_000_000_000_001
    truncated = MergePlan.for_batch(
        COLUMNS, SCHEMA, None, SoftDeletes.of_fold("__deleted", "at x", at)
    )
    text = spark_sql.clauses(truncated)
    assert text.startswith("when matched and (s.__action = 'D' or s.__action = 'M') then")
    assert "'M' and t.`__deleted` then" not in text
    assert text.endswith(
        "when not matched by source and not t.`__deleted` then update set `__deleted` = true,"
        f" `at x` = timestamp_micros({at})"
    )
