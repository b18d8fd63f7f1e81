"""Event text values cast to Spark types (cdc.pipeline.decode.cast_text): exact, or null (so the
event is quarantined), never a different value. Expected figures are PostgreSQL's own:
``d - date '1970-01-01'`` and ``extract(epoch from t) * 1000000``."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from cdc.pipeline import decode

pytestmark = pytest.mark.spark


def _cast(spark, values: list[str | None], spark_type: str, show=None) -> list[object]:
    frame = spark.createDataFrame([(v,) for v in values], "a string")
    typed = decode.cast_text(F.col("a"), spark_type)
    return [r[0] for r in frame.select((show or (lambda c: c))(typed)).collect()]


def test_dates_keep_their_day_bc_and_after_9999(spark):
    """BC dates become Spark's astronomical years (44 BC is -43), on the same day count as
    PostgreSQL; years past 9999 stay; infinity and text that is not a date do not cast."""
    values = ["0044-03-15 BC", "0001-12-31 BC", "4713-01-01 BC", "1582-10-04", "0044-03-15",
              "12345-01-01", "5874897-12-31", "infinity", "-infinity", "2024-01-01 x"]  # fmt: skip
    days = _cast(spark, values, "date", F.unix_date)
    assert days == [-735160, -719163, -2440550, -141438, -703383, 3789391, 2145042905,
                    None, None, None]  # fmt: skip


def test_timestamptz_keep_their_instant_bc_and_after_9999(spark):
    """timestamptz text (+HH, +HH:MM:SS offsets, json's T form, BC) gives PostgreSQL's
    instant; infinity and the years Spark cannot hold do not cast."""
    values = ["0044-03-15 08:00:00+00 BC", "0044-03-15T08:00:00.5+00:00 BC",
              "1000-01-01 00:00:00+00", "9999-12-31 23:59:59.999999+00",
              "12345-01-01T00:00:00+00:00", "2024-01-01 12:00:00+05:53:28", "infinity",
              "294276-12-31 23:59:59+00"]  # fmt: skip
    micros = _cast(spark, values, "timestamp", F.unix_micros)
    assert micros == [-63517795200000000, -63517795199500000, -30610224000000000,
                      253402300799999999, 327403382400000000, 1704089192000000, None,
                      None]  # fmt: skip


def test_timestamps_without_zone_bc(spark):
    """timestamp (no zone) BC keeps its wall time in the astronomical year."""
    values = [
        "0044-03-15 08:00:00 BC",
        "0044-03-15T08:00:00.5 BC",
        "1000-01-01 00:00:00",
        "infinity",
    ]
    got = _cast(spark, values, "timestamp_ntz", lambda c: c.cast("string"))
    assert got == ["-0043-03-15 08:00:00", "-0043-03-15 08:00:00.5", "1000-01-01 00:00:00", None]


@pytest.mark.parametrize(
    ("spark_type", "text"),
    [
        ("array<date>", "{infinity,2024-01-01}"),
        ("array<timestamp>", '{"2024-01-01 00:00:00+00",-infinity}'),
        ("array<decimal(10,2)>", "{1.5,NaN}"),
        ("array<int>", "[0:1]={1,2}"),
        ("array<int>", "{{1,2},{3,4}}"),
    ],
)
def test_arrays_that_do_not_fit_do_not_cast(spark, spark_type, text):
    """An element that does not fit its type, explicit bounds or a second dimension make the
    whole array not cast (so the event is quarantined), never a NULL element."""
    assert _cast(spark, [text], spark_type) == [None]


def test_array_elements_cast_exactly(spark):
    """NULL elements stay NULL, BC dates inside arrays keep their day, empty arrays stay."""
    got = _cast(spark, ['{"0044-03-15 BC",2024-01-01,NULL}', "{}"], "array<date>",
                lambda c: F.transform(c, F.unix_date))  # fmt: skip
    assert got == [[-735160, 19723, None], []]
