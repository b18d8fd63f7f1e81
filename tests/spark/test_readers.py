"""Targets get column mapping only where a column name needs it (cdc.targets.delta_table),
and each reader of cdc.targets.readers does with each table feature the drain gives a table
what its verdict says: reads it right, refuses it, or (delta-rs' pyarrow reads of mapped
columns) reads NULL. The same readers on tables the drain wrote, plain ones among them:
tests/e2e/test_readers.py."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest

from cdc.targets import delta_table, readers
from cdc.targets.delta_table import LocalTable
from cdc.targets.table import TableRef
from tests.support import readers as reading

COLUMNS = [("id", "int"), ("v", "string"), ("n", "decimal(10,2)")]
ROWS = [{"id": 1, "v": "a", "n": Decimal("1.50")}, {"id": 2, "v": None, "n": Decimal("-2.25")}]
ALL_SAFE = dict.fromkeys(readers.READERS, readers.SAFE)
PYARROW = ("delta-rs to_pyarrow_table", "delta-rs to_pyarrow_dataset", "delta-rs to_pandas")


def _insert(spark, ref: TableRef, rows: list[dict]) -> None:
    """rows appended, by column name, with the table's types."""
    schema = delta_table.schema(spark, ref)
    frame = spark.createDataFrame([tuple(r.get(f.name) for f in schema) for r in rows], schema)
    delta_table.append(frame, ref)


def _plain(spark, ref: TableRef) -> list[dict]:
    delta_table.ensure(spark, ref, COLUMNS, ["id"])
    _insert(spark, ref, ROWS)
    return ROWS


def _created_mapped(spark, ref: TableRef) -> list[dict]:
    """Created with a name Parquet refuses: mapped from the start, every column."""
    delta_table.ensure(spark, ref, [*COLUMNS, ("Mixed Case", "int")], ["id"])
    rows = [{**r, "Mixed Case": r["id"] * 10} for r in ROWS]
    _insert(spark, ref, rows)
    return rows


def _upgraded(spark, ref: TableRef) -> list[dict]:
    """Created plain; a column "a,b" added later turns mapping on in place."""
    _plain(spark, ref)
    assert not LocalTable.open(ref).is_mapped()
    delta_table.add_columns(spark, ref, [("a,b", "int")])
    _insert(spark, ref, [{"id": 3, "v": "c", "n": Decimal("3.00"), "a,b": 7}])
    return [
        *[{**r, "a,b": None} for r in ROWS],
        {"id": 3, "v": "c", "n": Decimal("3.00"), "a,b": 7},
    ]


def _deletion_vectors(spark, ref: TableRef) -> list[dict]:
    """A row deleted by a deletion vector (the drain's MERGE of a large target)."""
    rows = _plain(spark, ref)
    delta_table.enable_deletion_vectors(spark, ref)
    delta_table.spark_table(spark, ref).delete("id = 2")
    return rows[:1]


def _type_widening(spark, ref: TableRef) -> list[dict]:
    rows = _plain(spark, ref)
    delta_table.retype(spark, ref, "n", "decimal(12,4)", {})
    return [{**r, "n": r["n"].quantize(Decimal("0.0001"))} for r in rows]


def _mapping_turned_off(spark, ref: TableRef) -> list[dict]:
    """A target mapped by an earlier version, its names plain: mode none rewrites its files
    under their own names (docs/operations.md)."""
    delta_table.ensure(spark, ref, COLUMNS, ["id"])
    delta_table.set_properties(spark, ref, {delta_table.COLUMN_MAPPING: "name"})
    _insert(spark, ref, ROWS)
    assert LocalTable.open(ref).is_mapped()
    delta_table.set_properties(spark, ref, {delta_table.COLUMN_MAPPING: "none"})
    return ROWS


CASES: dict[str, tuple[Callable, dict[str, str]]] = {
    "created mapped": (
        _created_mapped,
        {**ALL_SAFE, **dict.fromkeys(PYARROW, readers.WRONG), "polars read_delta": readers.REFUSES},
    ),
    "upgraded": (
        _upgraded,
        {**ALL_SAFE, **dict.fromkeys(PYARROW, readers.WRONG), "polars read_delta": readers.REFUSES},
    ),
    "deletion vectors": (
        _deletion_vectors,
        {**ALL_SAFE, **dict.fromkeys(PYARROW, readers.REFUSES)},
    ),
    "type widening": (
        _type_widening,
        {
            **dict.fromkeys(readers.READERS, readers.REFUSES),
            "Spark": readers.SAFE,
        },
    ),
    "mapping turned off": (
        _mapping_turned_off,
        {**ALL_SAFE, "polars read_delta": readers.REFUSES},  # by the protocol, still 2
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_each_reader_reads_a_table_as_its_verdict_says(spark, tmp_path: Path, case: str) -> None:
    """The table's features give the verdicts expected, and every reader but Spark gives the
    table's values (SAFE), raises (REFUSES) or NULL in each mapped column (WRONG)."""
    build, expected_verdicts = CASES[case]
    ref = TableRef(str(tmp_path / "t"))
    expected = build(spark, ref)
    table = LocalTable.open(ref)
    assert table.is_mapped() == (case in ("created mapped", "upgraded"))
    found = readers.verdicts(table)
    assert found == expected_verdicts
    for reader, verdict in found.items():
        if reader != "Spark":  # Spark's reads of the drain's tables: tests/e2e/test_readers.py
            reading.reads_as_told(reader, verdict, spark, ref.location, expected)
