"""A quarantined row's cause (cdc.targets.quarantine.cause_of): the stored one; for rows of
earlier versions, which stored none, the one their reason tells; a quarantine table of the
earlier shape gets the column on the next append, its rows keeping what they told."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from cdc.targets import delta_table, quarantine
from cdc.targets.table import TableRef

pytestmark = pytest.mark.spark

# (ev_type, reason) as earlier versions wrote them, and the cause each tells
EARLIER = [
    ("I:id", "target t cannot be applied: boom", quarantine.FAILING_TARGET),
    ("U:id", "target t is failing since tick 4 (x): `cdc resync a`", quarantine.FAILING_TARGET),
    ("I:id", "table not in the configuration", quarantine.STRAY),
    ("I:id", "table refused by the configuration: its target is b's", quarantine.STRAY),
    ("snapshot", "value does not cast to the column type: n", quarantine.SNAPSHOT_ROW),
    ("I:id", "value does not cast to the column type: amount", quarantine.BAD_EVENT),
    ("X:id", "undecodable json payload", quarantine.BAD_EVENT),
    ("I:id", "column(s) x not in the source table", quarantine.BAD_EVENT),
    ("I:id", None, quarantine.BAD_EVENT),
]

OLD_SCHEMA = [(n, t) for n, t in quarantine.SCHEMA if n != "cause"]


def test_rows_of_earlier_versions_get_the_cause_their_reason_tells(spark) -> None:
    """Without the column, each earlier reason reads as its cause."""
    frame = spark.createDataFrame([(t, r) for t, r, _ in EARLIER], "ev_type string, reason string")
    got = [r[0] for r in frame.select(quarantine.cause_of(frame)).collect()]
    assert got == [c for _, _, c in EARLIER]


def test_a_stored_cause_wins_over_the_reason(spark) -> None:
    """A stored cause is the cause, whatever the reason says; a null one (a row written
    before the column) falls back to the reason."""
    frame = spark.createDataFrame(
        [
            ("I:id", "target t cannot be applied: boom", quarantine.BAD_EVENT),
            ("I:id", "value does not cast", quarantine.FAILING_TARGET),
            ("I:id", "target t cannot be applied: boom", None),
            ("I:id", "table not in the configuration", None),
        ],
        "ev_type string, reason string, cause string",
    )
    got = [r[0] for r in frame.select(quarantine.cause_of(frame)).collect()]
    assert got == [
        quarantine.BAD_EVENT,
        quarantine.FAILING_TARGET,
        quarantine.FAILING_TARGET,
        quarantine.STRAY,
    ]


def test_a_quarantine_of_the_earlier_shape_takes_the_column(spark, tmp_path) -> None:
    """A quarantine table written before causes were stored gets the column on the next
    append: its rows read with the cause their reason tells, the new ones with theirs."""
    ref = TableRef(str(tmp_path / "_quarantine"))
    resolved = TableRef(str(tmp_path / "_quarantine_resolved"))
    delta_table.ensure(spark, ref, OLD_SCHEMA, [])
    ddl = ", ".join(f"{n} {t}" for n, t in OLD_SCHEMA)
    old = spark.createDataFrame(
        [
            (i, None, None, t, f"d{i}", "public.t", None, None, None, 7, r)
            for i, (t, r, _) in enumerate(EARLIER)
        ],
        ddl,
    )
    delta_table.append(old, ref, None)
    assert "cause" not in delta_table.read(spark, ref).columns
    before = quarantine.with_state(spark, ref, resolved)
    assert before is not None
    assert [r.cause for r in before.orderBy("ev_id").collect()] == [c for _, _, c in EARLIER]

    new = spark.createDataFrame([(100, "d100")], "ev_id long, ev_data string")
    values = {
        "ev_id": F.col("ev_id"),
        "ev_type": F.lit("I:id"),
        "ev_data": F.col("ev_data"),
        "ev_extra1": F.lit("public.u"),
        "tick_id": F.lit(8),
        "reason": F.lit("table not in the configuration"),
        "cause": F.lit(quarantine.STRAY),
    }
    quarantine.append(spark, ref, quarantine.conform(new, values))
    stored = delta_table.read(spark, ref)
    assert stored.where("cause is null").count() == len(EARLIER)  # the earlier rows: none
    after = quarantine.with_state(spark, ref, resolved)
    assert after is not None
    causes = [r.cause for r in after.orderBy("ev_id").collect()]
    assert causes == [*[c for _, _, c in EARLIER], quarantine.STRAY]
