"""The casts table (cdc.casts) and its Arrow rendering (cdc.engines.arrow.casts), with no
Spark: every type pgtypes makes has an entry; a column cast by Arrow decides exactly the
texts its entry's forms hold (as the one-value Python cast does, with the same values);
Spark's guards let every such text through. Spark's answers are
tests/spark/test_driver_decode.py's."""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from cdc import casts
from cdc.engines.arrow import casts as arrow_casts
from cdc.formats.spec import Undecided
from cdc.pg import pgtypes
from tests.support.exact import bits

PG_TYPES = [*pgtypes._SCALAR, "numeric", "text", "uuid", "box", "interval"]
NUMERIC_TYPMODS = [-1] + [((p << 16) | s) + 4 for p in (1, 4, 10, 38, 39) for s in (0, 2, p)]


def _spark_types() -> set[str]:
    """Every Spark type pgtypes makes of these PostgreSQL types and their arrays."""
    found = set()
    for pg_type in PG_TYPES:
        for typmod in NUMERIC_TYPMODS if pg_type == "numeric" else [-1]:
            found.add(pgtypes.spark_type(pg_type, typmod))
            found.add(pgtypes.spark_type(pg_type + "[]", typmod))
    return found


def test_the_table_needs_neither_spark_nor_arrow():
    """cdc.casts is data: importing it loads neither pyspark nor pyarrow."""
    code = (
        "import sys, cdc.casts;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'pyarrow')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_type_pgtypes_makes_has_an_entry():
    """Each has its family's entry (none falls to ``other``), an Arrow type, and names only
    renderings and checks that exist; every family but ``other`` is reached."""
    families = set()
    for spark_type in _spark_types():
        entry = casts.entry(spark_type)
        assert entry.family != "other", spark_type
        families.add(entry.family)
        arrow_casts.arrow_type(spark_type)
        assert entry.arrow in casts.ARROW_CASTS and entry.spark in casts.SPARK_CASTS
        assert set(entry.checks) <= set(casts.CHECKS)
        assert (casts.forms(spark_type) is None) == (entry.family in ("string", "array"))
    assert families == set(casts.CASTS) - {"other"}
    assert casts.entry("byte").family == "other"
    with pytest.raises(Undecided):
        arrow_casts.cast("1", "byte")


TYPES = ["short", "int", "long", "float", "double", "boolean", "binary", "string", "date"]
TYPES += ["timestamp_ntz", "timestamp", "decimal(10,2)", "decimal(4,4)", "decimal(5,0)"]
TYPES += ["decimal(38,10)", "array<int>", "array<date>", "array<decimal(6,2)>"]
EDGE_TEXTS = [
    *["", " ", "0", "-0", "+0", "12", " 12", "12 ", "00012", "-", "1_000", "0x1F", "١٢"],
    *["32767", "32768", "-32768", "-32769", "2147483647", "2147483648", "-2147483649"],
    *["9223372036854775807", "9223372036854775808", "-9223372036854775808", "1.0", "1e2"],
    *["1.5", "0.1", ".5", "5.", "1e-45", "1e-50", "3.4028235e+38", "3.5e38", "1e308", "1e400"],
    *["-1e400", "5e-324", "NaN", "nan", "Infinity", "-Infinity", "inf", "+1.5", "1.5f"],
    *["1.0000001788139343261718749", "1.000000178813934326171875", "7.006492e-46"],
    *["t", "f", "true", "false", "TRUE", "yes", "1", " t", "T"],
    *["0.00", "-12345678.99", "12345678.99", "123456789.00", "1.555", "1.50", "0.1234"],
    *["0.12345", "1.0000", "-0.9999", "12345", "123456", "012345", "0.0", "1."],
    *["2024-02-29", "2023-02-29", "0001-01-01", "0000-01-01", "9999-12-31", "10000-01-01"],
    *["2024-1-2", "0044-03-15 BC", "infinity", "2024-13-01", "2024-01-32"],
    *["2024-01-02 03:04:05", "2024-01-02T03:04:05.123456", "0001-01-01 00:00:00"],
    *["9999-12-31 23:59:59.999999", "2024-01-02 24:00:00", "2024-01-02 23:60:00"],
    *["2024-01-02 23:59:60", "2024-01-02 03:04:05.1234567", "0044-03-15 00:00:00 BC"],
    *["2024-01-02 03:04", "2024-01-02 03:04:05+00", "2024-01-02 03:04:05.5+05:30"],
    *["2024-01-02 03:04:05-08", "2024-01-02 03:04:05+05:30:15", "2024-01-02 03:04:05 +05"],
    *["0001-01-01 00:00:00+05", "0001-01-01 12:00:00+05", "9999-12-31 23:59:59-01"],
    *["0000-12-31 23:00:00-05", "2024-01-02 03:04:05Z", "2024-01-02 03:04:05+5"],
    *["2024-01-02 03:04:05+15", "2024-01-02 03:04:05+16", "2024-01-02 03:04:05+15:59"],
    *["2024-01-02 03:04:05+05:60", "2024-01-02 03:04:05+05:99", "2024-01-02T03:04:05-08:00"],
    *["\\x", "\\x00ff10", "\\xDEADbeef", "\\x0", "\\xzz", "00ff", "\\\\x00", "\\X00"],
    *["{}", "{1,NULL,-3}", "{1,{2}}", "[0:1]={1,2}", "{1,x}", "{2024-01-01,NULL}", "{1.50}"],
    *["x\ny", "12\n", "2024-01-02\n", "t\n"],
]


def _decided(cast: Any, *args: Any) -> tuple[bool, Any]:
    """(whether the cast decides, its value)."""
    try:
        return True, cast(*args)
    except Undecided:
        return False, None


@pytest.mark.parametrize("spark_type", TYPES)
def test_arrow_decides_exactly_the_texts_in_the_forms(spark_type):
    """Per edge text: Python's re and RE2 read the forms alike; a text outside them is
    undecided by the column cast and the one-value cast; both decide alike otherwise, with
    the same value, but for a float4 near a halfway point, which only the one-value cast
    leaves to Spark (Arrow rounds once, as Java does)."""
    forms = casts.forms(spark_type)
    kind = arrow_casts.arrow_type(spark_type)
    for text in EDGE_TEXTS:
        column = pa.array([text, None], pa.string())
        if forms is not None:
            in_forms = re.fullmatch(forms, text) is not None
            in_re2 = pc.match_substring_regex(column, forms)[0].as_py()
            assert in_forms == in_re2, f"{spark_type}: {text!r}"
        else:
            in_forms = True
        by_arrow, arrow_value = _decided(arrow_casts.cast_column, column, spark_type)
        by_python, python_value = _decided(arrow_casts.cast, text, spark_type)
        assert by_python <= in_forms and by_arrow <= in_forms, f"{spark_type}: {text!r}"
        if spark_type == "float" and by_arrow and not by_python:
            continue
        assert by_arrow == by_python, f"{spark_type}: {text!r}"
        if by_arrow:
            typed = pa.array([python_value, None], kind).to_pylist()
            assert bits(arrow_value.to_pylist()) == bits(typed), f"{spark_type}: {text!r}"


@pytest.mark.parametrize("spark_type", TYPES)
def test_spark_guards_let_every_text_in_the_forms_through(spark_type):
    """Spark's forms (after its rewrite of an offset) hold every text the driver decides:
    the driver never decides a value Spark's guard would refuse."""
    entry = casts.entry(spark_type)
    if entry.spark_forms is None:
        return
    for text in EDGE_TEXTS:
        if re.fullmatch(casts.forms(spark_type) or "", text):
            if entry.spark_rewrite is not None:
                pattern, replacement = entry.spark_rewrite
                text = re.sub(pattern, replacement.replace("$1", r"\1"), text)
            assert re.search(entry.spark_forms, text, re.ASCII), f"{spark_type}: {text!r}"


@pytest.mark.parametrize(("precision", "scale"), [(1, 0), (4, 4), (5, 0), (10, 2), (38, 10)])
def test_decimal_forms_count_the_digits_the_type_keeps(precision, scale):
    """decimal_forms holds a text exactly when its whole digits (less leading zeros) and its
    fraction digits fit decimal(precision, scale)."""
    texts = [f"{w}{f}" for w in ("0", "00", "7", "0012", "1" * 9, "-3", "-0") for f in ("", ".")]
    texts += [
        f"{w}.{f}" for w in ("0", "1", "-12", "1" * (precision - scale)) for f in ("0", "05", "123")
    ]
    texts += ["1" * 40, ".5", "-", "1e2", "0" * 50 + "1"]
    for text in texts:
        found = re.fullmatch(r"-?([0-9]+)(?:\.([0-9]+))?", text)
        fits = bool(found) and (
            len(found[1].lstrip("0")) <= precision - scale and len(found[2] or "") <= scale
        )
        assert bool(re.fullmatch(casts.decimal_forms(precision, scale), text)) == fits, text
