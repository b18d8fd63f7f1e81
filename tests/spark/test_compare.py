"""cdc.pipeline.compare's Delta side: column names are quoted as Spark SQL identifiers, so a
name holding a backtick reads like any other."""

from __future__ import annotations

import datetime as dt

from cdc.pg.pgtypes import Column
from cdc.pipeline import compare

COLUMNS = [
    Column("k`ey", "integer", "int", True),
    Column("we``ird`", "text", "string", False),
    Column("d`", "date", "date", False),
]


def test_delta_rows_read_columns_whose_names_hold_backticks(spark, tmp_path) -> None:
    """Key and value columns named with backticks are read, ordered by key, in normal form."""
    frame = spark.createDataFrame(
        [(2, "two", dt.date(1970, 1, 3)), (1, "one", None)],
        "`k``ey` int, `we````ird``` string, `d``` date",
    )
    path = str(tmp_path / "t")
    frame.write.format("delta").save(path)
    assert compare.delta_rows(spark, path, COLUMNS) == [(1, "one", None), (2, "two", "2")]
