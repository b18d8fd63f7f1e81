"""Text values cast on the driver, as cdc.engines.spark.decode.cast_text casts them in Spark,
rendered from the entries of cdc.casts: a column at once by its entry's Arrow cast
(``cast_column``), or one value at a time by a Python cast (``caster``, ``cast``).

Each decides exactly the texts in its entry's forms that pass its checks, and gives Spark's
value for them; any other text raises ``Undecided`` (the caller leaves the table, or the
chunk, to Spark, which also quarantines what does not cast). The Python cast of a float4
is more careful still: it leaves a text near a halfway point between two float4 to Spark
(rounding through a double may miss by one there), where Arrow's parse rounds once, as
Java's does.
"""

from __future__ import annotations

import datetime as dt
import logging
import struct
from collections.abc import Callable
from decimal import Context, Decimal
from fractions import Fraction
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from cdc import casts
from cdc.formats.spec import Undecided
from cdc.pg import pgarray, pgtypes
from cdc.pg.pgtypes import DECIMAL_TYPE, Column

__all__ = ["Undecided", "arrow_type", "cast", "cast_column", "cast_rows", "caster", "checked"]

log = logging.getLogger("cdc.decode")

UTC = dt.UTC
INFINITY = float("inf")
OneValue = Callable[[str], Any]


def arrow_type(spark_type: str) -> pa.DataType:
    """pgtypes.arrow_type, undecided for a type without one."""
    try:
        return pgtypes.arrow_type(spark_type)
    except ValueError as exc:
        raise Undecided(str(exc)) from None


def _matched(spark_type: str, text: str) -> Any:
    """The match of text in the forms of spark_type; Undecided when it is not one."""
    forms = casts.pattern(spark_type)
    found = forms.fullmatch(text) if forms is not None else None
    if not found:
        raise Undecided(f"{spark_type} text {text[:40]!r}")
    return found


def _integer(spark_type: str) -> OneValue:
    bits = casts.INTEGER_BITS[spark_type]

    def one(text: str) -> int:
        _matched(spark_type, text)
        number = int(text)
        if not -(2 ** (bits - 1)) <= number < 2 ** (bits - 1):
            raise Undecided(f"integer {text[:20]!r} out of range")
        return number

    return one


def _double(spark_type: str) -> OneValue:
    def one(text: str) -> float:
        _matched(spark_type, text)
        number = float(text)  # correctly rounded, as Java's Double.parseDouble
        if number in (INFINITY, -INFINITY) and not text.endswith("Infinity"):
            raise Undecided(f"float {text[:20]!r} beyond float8")
        return number

    return one


def _float(spark_type: str) -> OneValue:
    """The float4 nearest the text, as Java's Float.parseFloat: the double nearest it,
    rounded to float4, checked to be nearer the text than either neighbour (rounding twice
    may miss by one near a halfway point: undecided then)."""
    double = _double(spark_type)

    def one(text: str) -> float:
        number = double(text)
        try:
            single = struct.unpack("<f", struct.pack("<f", number))[0]
        except OverflowError:
            raise Undecided(f"float {text[:20]!r} beyond float4") from None
        if number != number or number in (INFINITY, -INFINITY) or number == 0.0:
            return number  # NaN, ±Infinity, ±0: exact
        bits = struct.unpack("<I", struct.pack("<f", single))[0]
        if single == 0.0 or bits & 0x7F800000 == 0x7F800000:
            raise Undecided(f"float {text[:20]!r} is zero or infinite as float4")
        exact = Fraction(Decimal(text))
        mine = abs(exact - Fraction(single))
        for neighbour_bits in (bits - 1, bits + 1):
            neighbour = struct.unpack("<f", struct.pack("<I", neighbour_bits))[0]
            if neighbour in (INFINITY, -INFINITY):  # where rounding overflows
                neighbour = 2.0**128 if neighbour > 0 else -(2.0**128)
            if abs(exact - Fraction(neighbour)) <= mine:
                raise Undecided(f"float {text[:20]!r} near halfway between two float4")
        return single

    return one


def _decimal(spark_type: str) -> OneValue:
    decimal = DECIMAL_TYPE.fullmatch(spark_type)
    assert decimal is not None
    precision, scale = int(decimal[1]), int(decimal[2])
    step, context = Decimal(1).scaleb(-scale), Context(prec=precision)

    def one(text: str) -> Decimal:
        _matched(spark_type, text)  # no more digits than the type holds
        return Decimal(text).quantize(step, context=context)  # exact: the context holds all

    return one


def _boolean(spark_type: str) -> OneValue:
    return lambda text: _matched(spark_type, text)[0].startswith("t")  # t, true


def _string(spark_type: str) -> OneValue:
    return lambda text: text


def _binary(spark_type: str) -> OneValue:
    return lambda text: bytes.fromhex(_matched(spark_type, text)[1])


def _date(spark_type: str) -> OneValue:
    def one(text: str) -> dt.date:
        found = _matched(spark_type, text)
        try:
            return dt.date(int(found[1]), int(found[2]), int(found[3]))
        except ValueError:  # 31 February
            raise Undecided(f"date {text[:20]!r}") from None

    return one


def _timestamp(spark_type: str) -> OneValue:
    def one(text: str) -> dt.datetime:
        found = _matched(spark_type, text)
        zone = None
        if spark_type == "timestamp":
            minutes = int(found[9]) * 60 + int(found[10] or 0)
            zone = dt.timezone(dt.timedelta(minutes=-minutes if found[8] == "-" else minutes))
        micros = int((found[7] or "").ljust(6, "0"))
        try:
            stamp = dt.datetime(*(int(found[i]) for i in range(1, 7)), micros, tzinfo=zone)
            return stamp.astimezone(UTC) if zone is not None else stamp
        except (ValueError, OverflowError):  # 24:00:00, or past year 1-9999 once in UTC
            raise Undecided(f"timestamp {text[:40]!r}") from None

    return one


def _array(spark_type: str) -> OneValue:
    element = caster(casts.element_type(spark_type) or "")

    def one(text: str) -> list[Any]:
        try:
            items = pgarray.parse(text)
        except pgarray.ArrayLiteralError as exc:
            raise Undecided(str(exc)) from None
        return [None if item is None else element(item) for item in items]

    return one


def _other(spark_type: str) -> OneValue:
    raise Undecided(f"no driver-side cast to {spark_type}")


# per cdc.casts family, the Python cast of one value of a Spark type
ONE_VALUE: dict[str, Callable[[str], OneValue]] = {
    "integer": _integer,
    "float": _float,
    "double": _double,
    "decimal": _decimal,
    "boolean": _boolean,
    "string": _string,
    "binary": _binary,
    "date": _date,
    "timestamp_ntz": _timestamp,
    "timestamp": _timestamp,
    "array": _array,
    "other": _other,
}


def caster(spark_type: str) -> OneValue:
    """The function of one text to its value of spark_type, as decode.cast_text makes it
    (raising Undecided where that is not certain, and where cast_text gives null)."""
    return ONE_VALUE[casts.entry(spark_type).family](spark_type)


def cast(text: str | None, spark_type: str) -> Any:
    """One text value as cdc.engines.spark.decode.cast_text casts it (None for None)."""
    return None if text is None else caster(spark_type)(text)


def _arrow_cast(texts: pa.Array | pa.ChunkedArray, spark_type: str, entry: casts.Cast) -> Any:
    """Texts all in the forms of spark_type, cast by its entry's Arrow cast and checked."""
    kind = arrow_type(spark_type)
    if entry.arrow == "starts_with_t":
        return pc.starts_with(texts, "t")
    try:
        typed = pc.cast(texts, kind)  # refuses what overflows ("bits") or has no day
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise Undecided(f"{spark_type}: {exc}") from None
    if "finite" in entry.checks:  # past the type's range: Arrow gives infinity
        spelled = pc.ends_with(texts, "Infinity")
        if pc.any(pc.and_(pc.is_inf(typed), pc.invert(spelled))).as_py():
            raise Undecided(f"{spark_type}: a value beyond the type's range")
    return checked(typed, spark_type)


def checked(typed: Any, spark_type: str) -> Any:
    """A column already of its type (cast, or read by pyarrow's JSON reader from the JSON
    form of its type's forms: cdc.casts.ARROW_JSON), after its entry's checks of the values
    themselves: Undecided where one fails."""
    if "utc_years" in casts.entry(spark_type).checks:  # delta-rs' statistics overflow beyond
        micros = pc.min_max(typed.cast(pa.timestamp("us")).cast(pa.int64()))
        if micros["min"].is_valid and not (
            micros["min"].as_py() >= casts.FIRST_MICROS
            and micros["max"].as_py() <= casts.LAST_MICROS
        ):
            raise Undecided(f"{spark_type}: a value outside years 1-9999")
    return typed


def cast_column(texts: pa.Array | pa.ChunkedArray, spark_type: str) -> pa.Array:
    """A column of texts cast as ``cast`` casts each (nulls stay null): by its entry's Arrow
    cast when it has one, every text then in its forms, else value by value; Undecided as
    ``cast``."""
    entry = casts.entry(spark_type)
    kind = arrow_type(spark_type)
    if entry.arrow == "as_is":
        return texts
    if entry.arrow in ("cast", "starts_with_t"):
        forms = casts.forms(spark_type)
        if pc.all(pc.match_substring_regex(texts, forms)).as_py() is False:
            raise Undecided(f"{spark_type}: a text not in the forms PostgreSQL writes")
        return _arrow_cast(texts, spark_type, entry)
    one = caster(spark_type)
    return pa.array([None if t is None else one(t) for t in texts.to_pylist()], kind)


def cast_rows(rows: pa.Table, columns: list[Column]) -> pa.Table | None:
    """A table of text columns (named as columns) cast to their Spark types, as
    cdc.pipeline.chunks.typed casts them; None when any value is undecided (the caller
    casts in Spark then, which also quarantines what does not cast)."""
    try:
        return pa.table({c.name: cast_column(rows.column(c.name), c.spark_type) for c in columns})
    except Undecided as why:
        log.debug("cast by Spark: %s", why)
        return None
