"""The formats' driver-side decoders (driver_op, driver_map) and the driver's casts, without
Spark: what they read, and what they leave to Spark (Undecided). Their equality with the
Spark decoders is tests/spark/test_driver_decode.py's."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from cdc import formats
from cdc.engines.arrow import decode as driver_decode
from cdc.formats.spec import Undecided

JSON = formats.by_name("json")
URLENC = formats.by_name("urlenc")
SQL = formats.by_name("sql")


def test_every_format_decodes_on_the_driver():
    assert all(f.driver_op and f.driver_map for f in formats.FORMATS)


def test_json_values_read_as_from_json_holds_them():
    row = JSON.driver_map("I", '{"id": 5, "ok": true, "no": false, "s": "a\\"b", "z": null}')
    assert row == {"id": "5", "ok": "true", "no": "false", "s": 'a"b', "z": None}
    assert JSON.driver_op('{"op":"UPDATE","table":["public","t"]}') == "U"
    assert JSON.driver_op('{"op":"TRUNCATE"}') == "R"


@pytest.mark.parametrize(
    "data",
    [
        '{"a": 1, "a": 2}',
        '{"a": 1.5}',
        '{"a": 1e3}',
        '{"a": NaN}',
        '{"a": [1]}',
        '{"a": {"b": 1}}',
        '{"a": 1} x',
        "[1]",
        '"text"',
        '{"a": "\\udc00"}',
        '{"a": 123456789012345678901}',
        "",
    ],
)
def test_json_the_driver_is_unsure_of_is_left_to_spark(data):
    with pytest.raises(Undecided):
        JSON.driver_map("I", data)


@pytest.mark.parametrize("ev_type", ['{"op": "MERGE"}', '{"op": 1}', "{", '{"op":["I"]}'])
def test_json_ops_the_driver_does_not_know(ev_type):
    with pytest.raises(Undecided):
        JSON.driver_op(ev_type)


def test_urlenc_pairs_are_decoded_as_try_url_decode_does():
    row = URLENC.driver_map("I", "id=1&s=a+b%26c%3D&u=%C3%BC&n&e=")
    assert row == {"id": "1", "s": "a b&c=", "u": "ü", "n": None, "e": ""}
    assert URLENC.driver_op("U:id") == "U"


@pytest.mark.parametrize("data", ["id=1&id=2", "id=%zz", "id=%C3", "id=1&&s=2", "=1", "id=%4"])
def test_urlenc_the_driver_is_unsure_of_is_left_to_spark(data):
    with pytest.raises(Undecided):
        URLENC.driver_map("I", data)


def test_sql_events_use_the_parser_spark_runs():
    assert SQL.driver_map("U", "v='x' where id='1'") == {"v": "x", "id": "1"}
    with pytest.raises(Undecided):
        SQL.driver_map("U", "v=x")


@pytest.mark.parametrize(
    ("text", "spark_type", "expected"),
    [
        ("-32768", "short", -32768),
        ("t", "boolean", True),
        ("12.50", "decimal(10,2)", Decimal("12.50")),
        ("1.5", "decimal(10,2)", Decimal("1.50")),
        ("2024-02-29", "date", dt.date(2024, 2, 29)),
        ("2024-01-02T03:04:05.5", "timestamp_ntz", dt.datetime(2024, 1, 2, 3, 4, 5, 500000)),
        (
            "2024-01-02 03:04:05-02:30",
            "timestamp",
            dt.datetime(2024, 1, 2, 5, 34, 5, tzinfo=dt.UTC),
        ),
        ("\\x00ff", "binary", b"\x00\xff"),
        ('{1,NULL,"3"}', "array<long>", [1, None, 3]),
        ("0.1", "float", 0.10000000149011612),
    ],
)
def test_casts(text, spark_type, expected):
    assert driver_decode.cast(text, spark_type) == expected


@pytest.mark.parametrize(
    ("text", "spark_type"),
    [
        ("32768", "short"),
        (" 1", "int"),
        ("yes", "boolean"),
        ("1.555", "decimal(10,2)"),
        ("NaN", "decimal(10,2)"),
        ("0044-03-15 BC", "date"),
        ("infinity", "date"),
        ("10000-01-01", "date"),
        ("2024-01-02 03:04:05+05:30:15", "timestamp"),
        ("0001-01-01 00:00:00+01", "timestamp"),
        ("2024-01-02 03:04:05+05:60", "timestamp"),
        ("1e400", "double"),
        ("1e-50", "float"),
        ("{{1}}", "array<int>"),
        ("x", "interval"),
    ],
)
def test_casts_left_to_spark(text, spark_type):
    with pytest.raises(Undecided):
        driver_decode.cast(text, spark_type)
