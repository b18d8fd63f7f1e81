"""`cdc sql`'s text (cdc.ops.query_text): one plain form of every value whichever engine
answered (Arrow from DataFusion or Spark's toArrow, Python values from Spark's collect), the
three output formats, and the statements of interactive input."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pyarrow as pa
import pytest

from cdc.errors import ConfigError
from cdc.ops import query_text
from cdc.ops.query_text import Result, from_arrow, from_rows, render, split

UTC = dt.UTC
US_PER_DAY = 86_400_000_000
BEFORE_1 = -719_162 - 367  # days since 1970 of 2 BC, 31 December (ISO 8601 year -1)
BC_US = BEFORE_1 * US_PER_DAY + 12 * 3_600_000_000  # that day at noon


def test_timestamps_show_in_utc_without_an_offset_in_any_year() -> None:
    """A timestamp (zoned or not) shows as Python shows a naive one, also BC and past 9999."""
    values = [0, 1_500, 253_402_300_799_999_999, 253_402_300_800_000_000, None]
    zoned = pa.table({"t": pa.array(values, pa.timestamp("us", tz="UTC"))})
    naive = pa.table({"t": pa.array(values, pa.timestamp("us"))})
    want = [
        "1970-01-01 00:00:00",
        "1970-01-01 00:00:00.001500",
        "9999-12-31 23:59:59.999999",
        "10000-01-01 00:00:00",
        None,
    ]
    assert [r[0] for r in from_arrow(zoned).rows] == want
    assert [r[0] for r in from_arrow(naive).rows] == want
    python = [dt.datetime(1970, 1, 1, tzinfo=UTC), dt.datetime(1970, 1, 1, 0, 0, 0, 1500)]
    assert [r[0] for r in from_rows(["t"], [[v] for v in python]).rows] == want[:2]


def test_dates_bc_and_binary_and_nested_values() -> None:
    """Dates in any year, bytes as \\x hex, a list of timestamps, a struct, a map."""
    table = pa.table(
        {
            "d": pa.array([BEFORE_1, 0, 2_932_897], pa.date32()),
            "b": pa.array([b"\x00\xff", b"", None], pa.binary()),
            "ts": pa.array([[BC_US, 0], [], None], pa.list_(pa.timestamp("us", tz="UTC"))),
            "s": pa.array(
                [{"a": 1, "d": 0}, None, {"a": None, "d": None}],
                pa.struct([("a", pa.int32()), ("d", pa.date32())]),
            ),
            "m": pa.array([[("k", "v")], None, []], pa.map_(pa.string(), pa.string())),
        }
    )
    rows = from_arrow(table).rows
    assert rows[0] == (
        "-0001-12-31",
        "\\x00ff",
        ["-0001-12-31 12:00:00", "1970-01-01 00:00:00"],
        {"a": 1, "d": "1970-01-01"},
        {"k": "v"},
    )
    assert rows[1] == ("1970-01-01", "\\x", [], None, None)
    assert rows[2] == ("10000-01-01", None, None, {"a": None, "d": None}, {})


def test_python_values_take_the_same_forms() -> None:
    """Spark's collected values (bytearray, Row, date, decimal) render as Arrow's do."""

    class Row(tuple):
        def asDict(self, recursive: bool = False) -> dict:  # pyspark's name
            return {"a": self[0]}

    rows = from_rows(
        ["b", "r", "d", "n"],
        [[bytearray(b"\x01"), Row((dt.date(2024, 2, 29),)), dt.date(1, 1, 1), Decimal("1.50")]],
    ).rows
    assert rows == [("\\x01", {"a": "2024-02-29"}, "0001-01-01", Decimal("1.50"))]
    arrow = pa.table({"d": pa.array([dt.date(1, 1, 1)]), "n": pa.array([Decimal("1.50")])})
    assert from_arrow(arrow).rows == [("0001-01-01", Decimal("1.50"))]


def test_the_three_formats() -> None:
    """table (NULL, a row count), JSON lines (decimals as strings), CSV (NULL empty)."""
    result = Result(["id", "v", "tags"], [(1, None, ["a", "é"]), (2, Decimal("2.50"), [])])
    assert render(result, "table").splitlines() == [
        "id  v     tags      ",
        "--  ----  ----------",
        '1   NULL  ["a", "é"]',
        "2   2.50  []        ",
        "(2 rows)",
    ]
    lines = [json.loads(line) for line in render(result, "json").splitlines()]
    assert lines == [{"id": 1, "v": None, "tags": ["a", "é"]}, {"id": 2, "v": "2.50", "tags": []}]
    assert render(result, "csv").splitlines() == ["id,v,tags", '1,,"[""a"", ""é""]"', "2,2.50,[]"]
    assert render(Result([], []), "table") == ""  # DDL, SET: nothing to show
    assert render(Result(["n"], []), "table").splitlines()[-1] == "(0 rows)"


def test_an_unknown_format_is_refused() -> None:
    """--format is checked before any engine starts."""
    with pytest.raises(ConfigError, match="--format must be one of table, json, csv"):
        query_text.check_format("xml")


def test_path_targets_are_named_by_their_target() -> None:
    """``/`` and other characters become ``_``; the case stays (DataFusion folds it)."""
    assert query_text.view_name("sales/Orders-2024") == "sales_Orders_2024"


@pytest.mark.parametrize(
    ("text", "backslash", "statements", "rest"),
    [
        ("select 'a\\'; select 1;", True, [], "select 'a\\'; select 1;"),
        ("select 'a\\'; select 1;", False, ["select 'a\\'", "select 1"], ""),
        ("select 'it''s;'; x", False, ["select 'it''s;'"], " x"),
    ],
)
def test_backslashes_escape_only_in_spark_sql(
    text: str, backslash: bool, statements: list[str], rest: str
) -> None:
    """Spark SQL's quotes take backslash escapes, DataFusion's only a doubled quote."""
    assert split(text, backslash) == (statements, rest)
