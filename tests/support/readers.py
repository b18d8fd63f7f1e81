"""Every reader cdc.targets.readers knows, reading a Delta table into rows (column -> value,
ordered by ``id``), and the check that a reader does what its verdict says."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

from cdc.targets import readers

Rows = list[dict[str, Any]]


def _spark(spark: Any, path: str) -> Rows:
    return [r.asDict() for r in spark.read.format("delta").load(path).collect()]


def _query(spark: Any, path: str) -> Rows:
    from deltalake import DeltaTable, QueryBuilder

    found = QueryBuilder().register("t", DeltaTable(path)).execute("select * from t").read_all()
    return pa.table(found).to_pylist()


def _pyarrow(spark: Any, path: str) -> Rows:
    from deltalake import DeltaTable

    return DeltaTable(path).to_pyarrow_table().to_pylist()


def _dataset(spark: Any, path: str) -> Rows:
    from deltalake import DeltaTable

    return DeltaTable(path).to_pyarrow_dataset().to_table().to_pylist()


def _pandas(spark: Any, path: str) -> Rows:
    from deltalake import DeltaTable

    rows = DeltaTable(path).to_pandas().to_dict("records")
    # pandas holds a missing number as NaN (the tables here hold no NaN of their own)
    return [
        {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()}
        for row in rows
    ]


def _polars(spark: Any, path: str) -> Rows:
    import polars as pl

    return pl.read_delta(path).to_dicts()


READ: dict[str, Callable[[Any, str], Rows]] = {
    "Spark": _spark,
    "delta-rs QueryBuilder": _query,
    "delta-rs to_pyarrow_table": _pyarrow,
    "delta-rs to_pyarrow_dataset": _dataset,
    "delta-rs to_pandas": _pandas,
    "polars read_delta": _polars,
}
assert set(READ) == set(readers.READERS)


def read(reader: str, spark: Any, path: str, columns: list[str]) -> Rows:
    """The table's rows as reader reads them, only columns, ordered by id."""
    rows = READ[reader](spark, path)
    picked = [{c: row[c] for c in columns} for row in rows]
    return sorted(picked, key=lambda r: (r["id"] is None, r["id"] or 0))  # id may read NULL


def mapped_columns(path: str) -> set[str]:
    """The columns stored under another name in the table's files."""
    from deltalake import DeltaTable

    return {
        f.name
        for f in DeltaTable(path).schema().fields
        if (f.metadata or {}).get("delta.columnMapping.physicalName", f.name) != f.name
    }


def reads_as_told(reader: str, verdict: str, spark: Any, path: str, expected: Rows) -> None:
    """The reader gives expected (SAFE), raises (REFUSES), or gives the right rows with NULL
    in every mapped column (WRONG)."""
    columns = list(expected[0])
    if verdict == readers.REFUSES:
        with pytest.raises(Exception):  # noqa: B017 - each reader raises its own error
            read(reader, spark, path, columns)
        return
    got = read(reader, spark, path, columns)
    if verdict == readers.SAFE:
        assert got == expected, reader
        return
    assert verdict == readers.WRONG
    mapped = mapped_columns(path)
    assert mapped & set(columns), "a WRONG verdict on a table without mapped columns"
    blanked = [{c: None if c in mapped else v for c, v in row.items()} for row in expected]
    assert got == blanked, reader
