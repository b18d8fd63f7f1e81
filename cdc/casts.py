"""The casts from PostgreSQL's text output to each column's Spark type, as data: one entry
per type family, from which both engines' casts are rendered.

An event carries each value as PostgreSQL's text output (and a snapshot chunk reads it so);
the decoders turn it into the column's Spark type (cdc.pg.pgtypes). Two engines do it: Spark
(cdc.engines.spark.decode.cast_text renders an entry to a Column expression) and the driver
(cdc.engines.arrow.casts renders it to one Arrow cast over a column, and to a Python cast of
one value). The driver must give Spark's answer or none (``Undecided``: Spark decodes then,
and quarantines what does not cast), so both renderings read the same entry:

- ``forms``: the texts PostgreSQL writes for the type, an anchored regular expression that
  Python's ``re`` and RE2 (Arrow) read alike. The driver decides exactly these (less what a
  check refuses); any other text is left to Spark. ``forms(spark_type)`` gives the exact
  pattern of one type (a decimal's digits are part of it);
- ``checks``: what the driver verifies besides the form (``CHECKS`` says what each means);
  a value failing one is left to Spark;
- ``bc``: PostgreSQL writes a year before 1 as ``N BC``. Spark reads it as the astronomical
  year 1 - N (cdc.engines.spark.decode.astronomical); the forms never hold it (the driver
  leaves such a value to Spark);
- ``arrow``: how the driver casts a column whose texts are all in the forms (``ARROW_CASTS``);
- ``arrow_json``: the JSON value pyarrow's JSON reader reads straight into the type's Arrow
  type, giving for each text in the forms the value the ``arrow`` cast gives (``ARROW_JSON``);
  None: a JSON value of the type is read as text, then cast;
- ``spark``: the Spark function that casts (``SPARK_CASTS``), after ``spark_rewrite`` (a
  regexp_replace of the text), and only where the text matches ``spark_forms`` (a Java
  regular expression, None: Spark's cast alone decides). Spark accepts more than the forms
  (BC years, years past 9999, and what its casts read: ``" 12"`` as an int): those texts
  PostgreSQL never writes, or writes only for values the driver leaves to Spark.

tests/unit/test_casts.py holds the table complete over the types pgtypes makes and the
Arrow rendering equal to the forms; tests/spark/test_driver_decode.py both engines equal,
bit for bit, over every text PostgreSQL writes and hostile ones.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Literal

from cdc.pg.pgtypes import DECIMAL_TYPE

__all__ = [
    "ARROW_CASTS",
    "ARROW_JSON",
    "CASTS",
    "CHECKS",
    "INTEGER_BITS",
    "SPARK_CASTS",
    "Cast",
    "element_type",
    "entry",
    "forms",
    "pattern",
]

ArrowCast = Literal["as_is", "cast", "starts_with_t", "per_value", "none"]
ArrowJson = Literal["number", "boolean", "string"]
SparkCast = Literal["as_is", "try_cast", "try_to_timestamp", "hex", "elements"]
Check = Literal["bits", "finite", "float4", "digits", "calendar", "utc_years"]

ARROW_CASTS: dict[ArrowCast, str] = {
    "as_is": "the text itself",
    "cast": "pyarrow.compute.cast to the type's Arrow type (cdc.pg.pgtypes.arrow_type)",
    "starts_with_t": "true where the text starts with t (t, true), false elsewhere (f, false)",
    "per_value": "no Arrow kernel: the one-value Python cast, value by value",
    "none": "no driver-side cast: every value is left to Spark",
}
# pyarrow's JSON reader reads no date32 and no float from a JSON string; it reads a timestamp
# without an offset into timestamp[us, UTC] as UTC (the forms hold none) and "1e3" as a
# decimal (nor that): what it reads outside the forms does not matter, the forms decide
ARROW_JSON: dict[ArrowJson, str] = {
    "number": "a JSON integer (it refuses one past the type's bits, as the cast does)",
    "boolean": "true or false",
    "string": "a JSON string of a text in the forms, without an escape",
}
SPARK_CASTS: dict[SparkCast, str] = {
    "as_is": "the text itself",
    "try_cast": "text.try_cast(type): null where it does not cast",
    "try_to_timestamp": "try_to_timestamp(text): an instant, the offset applied",
    "hex": "try_to_binary of the hex digits after the prefix, where the text has it",
    "elements": "the literal parsed (cdc.pg.pgarray) and each element cast; null if one fails",
}
CHECKS: dict[Check, str] = {
    "bits": "the integer fits the type's bits (INTEGER_BITS); Arrow's checked cast refuses",
    "finite": "a value past the type's range (Arrow and Java give infinity) is spelled Infinity",
    "float4": "one value in Python: the float4 nearest the text, not near a halfway point",
    "digits": "no more whole and fraction digits than decimal(p,s) keeps (in forms())",
    "calendar": "a day that exists (not 31 February, not 24:00:00); Arrow's cast refuses",
    # the forms hold years 1-9999 (Python's datetime holds no other, delta-rs' statistics
    # overflow past them); an offset may take an instant past them
    "utc_years": "years 1-9999 in UTC too, once the offset is applied",
}

INTEGER_BITS = {"short": 16, "int": 32, "long": 64}
# the first and last microsecond of years 1-9999, from 1970
FIRST_MICROS, LAST_MICROS = -62_135_596_800_000_000, 253_402_300_799_999_999

FLOAT_FORMS = r"^(-?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?|NaN|-?Infinity)$"
# PostgreSQL's ISO output (DateStyle ISO; json's with a "T") of years 0001-9999 (year 0 is
# never written: 1 BC is), microseconds at most
YEAR = r"([0-9]{3}[1-9]|[0-9]{2}[1-9][0-9]|[0-9][1-9][0-9]{2}|[1-9][0-9]{3})"
DATE_FORMS = f"^{YEAR}-([0-9]{{2}})-([0-9]{{2}})$"
STAMP = (
    f"{YEAR}-([0-9]{{2}})-([0-9]{{2}})[ T]([0-9]{{2}}):([0-9]{{2}}):([0-9]{{2}})"
    r"(?:\.([0-9]{1,6}))?"
)
# the offset as PostgreSQL writes it: +HH or +HH:MM (hours up to 15); with seconds
# (+05:53:28, local mean time before 1900) it is left to Spark
OFFSET = r"([+-])(0[0-9]|1[0-5])(?::([0-5][0-9]))?"
BINARY_PREFIX = "\\x"  # bytea's hex output (bytea_output = hex), two digits a byte
BINARY_FORMS = f"^{re.escape(BINARY_PREFIX)}((?:[0-9A-Fa-f]{{2}})*)$"

# Spark's guards (Java regular expressions) before its casts, which accept more: anything
# after the date (so "0044-03-15 BC" would read as 44 AD). Years of 4 digits or more, BC
# ones made astronomical (negative) first; offsets +HH, +HH:MM, +HH:MM:SS
SPARK_DATE = r"^-?\d{4,}-\d\d-\d\d$"
SPARK_STAMP = r"^-?\d{4,}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d{1,6})?"
SPARK_OFFSET = r"[+-]\d\d(:\d\d){0,2}$"


@dataclass(frozen=True)
class Cast:
    """How the values of one Spark type family are read from PostgreSQL's text (see the
    module docstring for each field)."""

    family: str
    forms: str | None  # None: any text (string), or an array literal (array)
    arrow: ArrowCast
    spark: SparkCast
    checks: tuple[Check, ...] = ()
    bc: bool = False
    spark_forms: str | None = None
    spark_rewrite: tuple[str, str] | None = None  # (pattern, replacement), Java's syntax
    arrow_json: ArrowJson | None = None


CASTS: dict[str, Cast] = {
    cast.family: cast
    for cast in (
        Cast("integer", r"^-?[0-9]+$", "cast", "try_cast", ("bits",), arrow_json="number"),
        Cast("float", FLOAT_FORMS, "cast", "try_cast", ("finite", "float4")),
        Cast("double", FLOAT_FORMS, "cast", "try_cast", ("finite",)),
        Cast(
            "decimal",
            r"^-?([0-9]+)(?:\.([0-9]+))?$",
            "cast",
            "try_cast",
            ("digits",),
            arrow_json="string",
        ),
        Cast("boolean", r"^(t|true|f|false)$", "starts_with_t", "try_cast", arrow_json="boolean"),
        Cast("string", None, "as_is", "as_is"),
        Cast("binary", BINARY_FORMS, "per_value", "hex"),
        Cast(
            "date",
            DATE_FORMS,
            "cast",
            "try_cast",
            ("calendar",),
            bc=True,
            spark_forms=SPARK_DATE,
        ),
        Cast(
            "timestamp_ntz",
            f"^{STAMP}$",
            "cast",
            "try_cast",
            ("calendar",),
            bc=True,
            spark_forms=SPARK_STAMP + "$",
            arrow_json="string",
        ),
        Cast(
            "timestamp",
            f"^{STAMP}{OFFSET}$",
            "cast",
            "try_to_timestamp",
            ("calendar", "utc_years"),
            bc=True,
            spark_forms=SPARK_STAMP + SPARK_OFFSET,
            # Spark reads +HH:MM, PostgreSQL writes a whole hour as +HH
            spark_rewrite=(r"([+-]\d\d)$", "$1:00"),
            arrow_json="string",
        ),
        # one-dimensional, lower bound 1 (cdc.pg.pgarray), each element in its own forms
        Cast("array", None, "per_value", "elements"),
        # a type pgtypes does not make (a target's own, under schema drift): Spark's cast
        Cast("other", None, "none", "try_cast"),
    )
}


# the scalar Spark type names pgtypes makes, and their family (decimal(p,s) and array<...>
# aside)
FAMILIES = {
    **dict.fromkeys(INTEGER_BITS, "integer"),
    **{name: name for name in ("float", "double", "boolean", "string", "binary", "date")},
    "timestamp_ntz": "timestamp_ntz",
    "timestamp": "timestamp",
}


def element_type(spark_type: str) -> str | None:
    """The element type of an array type, None for another."""
    if spark_type.startswith("array<") and spark_type.endswith(">"):
        return spark_type[len("array<") : -1]
    return None


def entry(spark_type: str) -> Cast:
    """The entry of a Spark type name (``other`` for one pgtypes does not make)."""
    if element_type(spark_type) is not None:
        return CASTS["array"]
    if DECIMAL_TYPE.fullmatch(spark_type):
        return CASTS["decimal"]
    return CASTS[FAMILIES.get(spark_type, "other")]


def decimal_forms(precision: int, scale: int) -> str:
    """The texts of decimal(precision, scale) the driver decides: no more whole digits than
    precision - scale (leading zeros aside), no more fraction digits than scale (PostgreSQL
    writes exactly scale of them), so that no digit is lost."""
    whole = precision - scale
    digits = "0+" if whole == 0 else f"0*[0-9]{{1,{whole}}}"
    fraction = f"(?:\\.[0-9]{{1,{scale}}})?" if scale else ""
    return f"^-?{digits}{fraction}$"


@cache
def forms(spark_type: str) -> str | None:
    """The exact forms of one type: its entry's (a decimal's with its digits)."""
    decimal = DECIMAL_TYPE.fullmatch(spark_type)
    if decimal:
        return decimal_forms(int(decimal[1]), int(decimal[2]))
    return entry(spark_type).forms


@cache
def pattern(spark_type: str) -> re.Pattern[str] | None:
    """forms(spark_type), compiled for Python."""
    found = forms(spark_type)
    return None if found is None else re.compile(found)
