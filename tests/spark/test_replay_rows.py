"""The replay's comparison of a key's row then and now (cdc.pipeline.replay_plan.aligned and
same_row): typed values, not their text, so a column widened in between (a decimal's scale,
float to double, date to timestamp_ntz) or added since (NULL) is no change, and a float
compares exactly."""

from __future__ import annotations

import datetime as dt
import math
import struct
from decimal import Decimal

import pytest
from pyspark.sql import functions as F

from cdc.pipeline.replay_plan import aligned, same_row

pytestmark = pytest.mark.spark


def _widened(value: float) -> float:
    """A float4 value as Delta's widening to double reads it."""
    return struct.unpack("f", struct.pack("f", value))[0]


def test_a_row_read_at_a_version_before_a_widening_equals_it_now(spark) -> None:
    """Rows read before a widening and an added column, aligned to the current schema, are
    the same row as now; a different decimal or an added column holding a value differ."""
    then = spark.createDataFrame(
        [(i, Decimal("1.50"), 0.1, dt.date(2024, 1, 1)) for i in (1, 2, 3)],
        "id int, n decimal(10,2), f float, d date",
    )
    midnight = dt.datetime(2024, 1, 1)
    now = spark.createDataFrame(
        [
            (1, Decimal("1.5000"), _widened(0.1), midnight, None),
            (2, Decimal("1.5001"), _widened(0.1), midnight, None),
            (3, Decimal("1.5000"), _widened(0.1), midnight, 5),
        ],
        "id int, n decimal(12,4), f double, d timestamp_ntz, added int",
    )
    current = now.schema
    joined = then.select("id", aligned(then, current).alias("a")).join(
        now.select("id", aligned(now, current).alias("b")), on="id"
    )
    found = joined.select("id", same_row(F.col("a"), F.col("b"), current).alias("same"))
    assert sorted(tuple(r) for r in found.collect()) == [(1, True), (2, False), (3, False)]


CASES = [  # (then, now, Spark type, the same row?)
    (math.nan, math.nan, "double", True),
    (0.0, -0.0, "double", False),
    (0.1, 0.1, "double", True),
    (0.1, 0.1000000000000001, "double", False),
    (1e300, 1e300, "double", True),
    ([1.0, math.nan], [1.0, math.nan], "array<double>", True),
    ([1.0, 0.0], [1.0, -0.0], "array<double>", False),
    (Decimal("2.50"), Decimal("2.5"), "decimal(12,4)", True),
    (None, None, "string", True),
    (None, "", "string", False),
    ("a", "a ", "string", False),
    (b"\x00", b"\x00", "binary", True),
]


def test_values_compare_typed_and_floats_exactly(spark) -> None:
    """NaN equals NaN, -0.0 differs from 0.0 (also inside arrays), decimals by value, NULL
    equals NULL only, no row equals no row only; all cases in one Spark job."""
    from pyspark.sql.types import StructType, _parse_datatype_string

    ddl = ", ".join(f"a{i} {kind}, b{i} {kind}" for i, (_, _, kind, _) in enumerate(CASES))
    values = tuple(v for a, b, _, _ in CASES for v in (a, b))
    rows = spark.createDataFrame([values], ddl)
    checks = []
    for i, (_, _, kind, _) in enumerate(CASES):
        schema = StructType().add("v", _parse_datatype_string(kind))
        a, b = (F.struct(F.col(f"{side}{i}").alias("v")) for side in "ab")
        checks.append(same_row(a, b, schema))
    ints = StructType().add("v", _parse_datatype_string("int"))
    no_row, nulls = F.lit(None).cast(ints), F.struct(F.lit(None).cast("int").alias("v"))
    checks += [same_row(no_row, no_row, ints), same_row(no_row, nulls, ints)]
    found = list(rows.select(*checks).first())
    assert found == [case[3] for case in CASES] + [True, False]
