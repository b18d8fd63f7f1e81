"""A batch's events decoded on the driver, over the Arrow rows COPY read: the typed rows
cdc.engines.spark.decode would make in Spark, or no answer.

A Spark decode costs a few Spark jobs whatever its size (a second or more on two cores), and
more per event than Arrow's kernels. The events of a batch read with COPY are on the driver
already, so they are decoded there (cdc.pipeline.apply: small batches everywhere, every such
batch on a local master):

- events of one shape (their format's ``driver_shape``: the same names in the same order,
  spelled as the trigger spells them) are matched by one regular expression over the Arrow
  column and read column by column (json by Arrow's JSON reader, urlenc split at ``&``), up
  to MAX_SHAPES shapes per table and batch;
- the others, at most ONE_BY_ONE, one by one: their format's ``driver_op`` and
  ``driver_map`` make the column -> text map;
- ``cast_column`` makes each column of texts the values Spark's cast (decode.cast_text)
  makes: one Arrow cast where every text is in a form that cast reads as Spark does, else
  value by value (``cast``).

Only where the answer is certainly Spark's. Anything else is undecided, and the whole table
is decoded by Spark as before (which quarantines the bad events):

- a bad event of any kind (unknown type, undecodable payload, a missing key, a column the
  source lacks, a value that does not cast), a TRUNCATE and the marker of a table re-created
  under its name (formats.RECREATED), which empty the target (the driver's path takes none);
- more than ONE_BY_ONE events of no shape (sql events, which sqlglot parses one by one);
- a target column whose type differs from the source's (schema_drift's source_types);
- a value in a form PostgreSQL does not write (``" 12"``, ``"1e5"`` for an integer,
  ``"yes"`` for a boolean), a date or timestamp outside years 1-9999 or BC, an offset with
  seconds, a decimal with more digits than its type keeps, a float4 text halfway between
  two floats: each would need Spark's own rules for the exact answer.

tests/spark/test_driver_decode.py holds every answer equal to Spark's over the type sweep
and hostile events; tests/unit/test_driver_shapes.py every shape's answer equal to the
one-by-one decoder's.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import struct
from collections.abc import Callable
from decimal import Context, Decimal
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cdc import formats
from cdc.formats.spec import Shape, Undecided
from cdc.pg import pgarray, pgtypes
from cdc.pg.pgtypes import DECIMAL_TYPE, Column
from cdc.rows import meta, present, value

if TYPE_CHECKING:
    from cdc.targets.schema_drift import Drift

__all__ = ["Undecided", "arrow_type", "cast", "decode"]

log = logging.getLogger("cdc.decode")

INTEGER_TEXT = re.compile(r"-?[0-9]+")
INTEGER_RANGE = {"short": 16, "int": 32, "long": 64}  # bits
FLOAT_TEXT = re.compile(r"-?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?|NaN|-?Infinity")
DECIMAL_TEXT = re.compile(r"-?([0-9]+)(?:\.([0-9]+))?")
DATE_TEXT = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
TIMESTAMP_TEXT = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[ T]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,6}))?"
)
OFFSET_TEXT = re.compile(r"([+-])([0-9]{2})(?::([0-9]{2}))?")
BINARY_TEXT = re.compile(r"\\x((?:[0-9A-Fa-f]{2})*)")
BOOLEAN_TEXT = {"t": True, "true": True, "f": False, "false": False}
UTC = dt.UTC
INFINITY = float("inf")
MAX_SHAPES = 8  # shapes tried per table and batch; events of other shapes decode one by one
# events decoded one by one at most per table and batch (sqlglot parses a sql event in about
# 100 µs: Spark decodes more at once)
ONE_BY_ONE = 10_000


def arrow_type(spark_type: str) -> pa.DataType:
    """pgtypes.arrow_type, undecided for a type without one."""
    try:
        return pgtypes.arrow_type(spark_type)
    except ValueError as exc:
        raise Undecided(str(exc)) from None


def _integer(text: str, bits: int) -> int:
    if not INTEGER_TEXT.fullmatch(text):
        raise Undecided(f"integer text {text[:20]!r}")
    number = int(text)
    if not -(2 ** (bits - 1)) <= number < 2 ** (bits - 1):
        raise Undecided(f"integer {text[:20]!r} out of range")
    return number


def _double(text: str) -> float:
    if not FLOAT_TEXT.fullmatch(text):
        raise Undecided(f"float text {text[:20]!r}")
    number = float(text)  # correctly rounded, as Java's Double.parseDouble
    if number in (INFINITY, -INFINITY) and not text.endswith("Infinity"):
        raise Undecided(f"float {text[:20]!r} beyond float8")
    return number


def _float(text: str) -> float:
    """The float4 nearest the text, as Java's Float.parseFloat: the double nearest it,
    rounded to float4, checked to be nearer the text than either neighbour (rounding twice
    may miss by one near a halfway point: undecided then)."""
    number = _double(text)
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
        if neighbour in (INFINITY, -INFINITY):
            neighbour = 2.0**128 if neighbour > 0 else -(2.0**128)  # where rounding overflows
        if abs(exact - Fraction(neighbour)) <= mine:
            raise Undecided(f"float {text[:20]!r} near halfway between two float4")
    return single


def _decimal(text: str, precision: int, scale: int) -> Decimal:
    found = DECIMAL_TEXT.fullmatch(text)
    if not found:
        raise Undecided(f"numeric text {text[:20]!r}")
    whole, fraction = found[1].lstrip("0"), found[2] or ""
    if len(fraction) > scale or len(whole) > precision - scale:
        raise Undecided(f"numeric {text[:20]!r} does not fit decimal({precision},{scale})")
    # exact: no more digits than the type holds, and a context that holds them all
    return Decimal(text).quantize(Decimal(1).scaleb(-scale), context=Context(prec=precision))


def _date(text: str) -> dt.date:
    found = DATE_TEXT.fullmatch(text)
    if not found:
        raise Undecided(f"date text {text[:20]!r}")
    try:
        return dt.date(int(found[1]), int(found[2]), int(found[3]))
    except ValueError:  # year 0, 31 February
        raise Undecided(f"date {text[:20]!r}") from None


def _timestamp(text: str, with_offset: bool) -> dt.datetime:
    found = TIMESTAMP_TEXT.match(text)
    if not found:
        raise Undecided(f"timestamp text {text[:40]!r}")
    rest = text[found.end() :]
    zone = None
    if with_offset:
        offset = OFFSET_TEXT.fullmatch(rest)
        if not offset or int(offset[2]) > 15:
            raise Undecided(f"timestamp offset {rest[:20]!r}")
        minutes = int(offset[2]) * 60 + int(offset[3] or 0)
        zone = dt.timezone(dt.timedelta(minutes=-minutes if offset[1] == "-" else minutes))
    elif rest:
        raise Undecided(f"timestamp text {text[:40]!r}")
    micros = int((found[7] or "").ljust(6, "0"))
    try:
        stamp = dt.datetime(*(int(found[i]) for i in range(1, 7)), micros, tzinfo=zone)
        return stamp.astimezone(UTC) if zone is not None else stamp
    except (ValueError, OverflowError):  # out of range, or past year 1-9999 once in UTC
        raise Undecided(f"timestamp {text[:40]!r}") from None


def _binary(text: str) -> bytes:
    found = BINARY_TEXT.fullmatch(text)
    if not found:
        raise Undecided("bytea text that is not \\x hex")
    return bytes.fromhex(found[1])


def _boolean(text: str) -> bool:
    if text not in BOOLEAN_TEXT:
        raise Undecided(f"boolean text {text[:20]!r}")
    return BOOLEAN_TEXT[text]


def caster(spark_type: str) -> Callable[[str], Any]:
    """The function of one text to its value of spark_type, as decode.cast_text makes it
    (raising Undecided where that is not certain, and where cast_text gives null)."""
    if spark_type.startswith("array<"):
        element = caster(spark_type[len("array<") : -1])

        def array(text: str) -> list[Any]:
            try:
                items = pgarray.parse(text)
            except pgarray.ArrayLiteralError as exc:
                raise Undecided(str(exc)) from None
            return [None if item is None else element(item) for item in items]

        return array
    decimal = DECIMAL_TYPE.fullmatch(spark_type)
    if decimal:
        precision, scale = int(decimal[1]), int(decimal[2])
        return lambda text: _decimal(text, precision, scale)
    if spark_type in INTEGER_RANGE:
        bits = INTEGER_RANGE[spark_type]
        return lambda text: _integer(text, bits)
    casts: dict[str, Callable[[str], Any]] = {
        "string": lambda text: text,
        "float": _float,
        "double": _double,
        "boolean": _boolean,
        "binary": _binary,
        "date": _date,
        "timestamp_ntz": lambda text: _timestamp(text, False),
        "timestamp": lambda text: _timestamp(text, True),
    }
    if spark_type not in casts:
        raise Undecided(f"no driver-side cast to {spark_type}")
    return casts[spark_type]


def cast(text: str | None, spark_type: str) -> Any:
    """One text value as cdc.engines.spark.decode.cast_text casts it (None for None)."""
    return None if text is None else caster(spark_type)(text)


# per Spark type, the texts an Arrow cast reads as Spark's cast does (anchored, RE2): the
# forms PostgreSQL writes; a column with any other text is cast value by value (``caster``)
ARROW_TEXT = {
    **dict.fromkeys(INTEGER_RANGE, f"^{INTEGER_TEXT.pattern}$"),
    **dict.fromkeys(("float", "double"), f"^({FLOAT_TEXT.pattern})$"),
    "boolean": r"^(true|false)$",
    # years 0001-9999 (not 0000: Arrow reads year 0, Spark's cast nothing)
    "date": r"^([0-9]{3}[1-9]|[0-9]{2}[1-9][0-9]|[0-9][1-9][0-9]{2}|[1-9][0-9]{3})"
    r"-[0-9]{2}-[0-9]{2}$",
    "timestamp_ntz": f"^{TIMESTAMP_TEXT.pattern}$",
    # offsets as _timestamp takes them: hours up to 15, minutes, no seconds
    "timestamp": f"^{TIMESTAMP_TEXT.pattern}" r"[+-](0[0-9]|1[0-5])(:[0-9]{2})?$",
}
# 0001-01-01 00:00:00 and 9999-12-31 23:59:59.999999, in microseconds from 1970
FIRST_MICROS, LAST_MICROS = -62_135_596_800_000_000, 253_402_300_799_999_999
DECIMAL_ARROW_TEXT = f"^{DECIMAL_TEXT.pattern}$"


def cast_column(texts: pa.Array | pa.ChunkedArray, spark_type: str) -> pa.Array:
    """A column of texts cast as ``cast`` casts each (nulls stay null), by one Arrow cast
    when every text is in a form it reads as Spark does (``ARROW_TEXT``; Arrow refuses a
    value out of range, a decimal with digits lost, an impossible date), else value by
    value; Undecided as ``cast``."""
    kind = arrow_type(spark_type)
    if spark_type == "string":
        return texts
    pattern = (
        DECIMAL_ARROW_TEXT if DECIMAL_TYPE.fullmatch(spark_type) else ARROW_TEXT.get(spark_type)
    )
    if (
        pattern is not None
        and pc.all(pc.match_substring_regex(texts, pattern)).as_py() is not False
    ):
        try:
            typed = pc.cast(texts, kind)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise Undecided(f"{spark_type}: {exc}") from None
        if spark_type in ("float", "double"):  # past the type's range: Arrow gives infinity
            spelled = pc.ends_with(texts, "Infinity")
            if pc.any(pc.and_(pc.is_inf(typed), pc.invert(spelled))).as_py():
                raise Undecided(f"{spark_type}: a value beyond the type's range")
        if spark_type in ("timestamp_ntz", "timestamp"):
            # years 1-9999 (in UTC too), as ``cast``: delta-rs' statistics overflow beyond
            micros = pc.min_max(typed.cast(pa.timestamp("us")).cast(pa.int64()))
            if micros["min"].is_valid and not (
                micros["min"].as_py() >= FIRST_MICROS and micros["max"].as_py() <= LAST_MICROS
            ):
                raise Undecided(f"{spark_type}: a value outside years 1-9999")
        return typed
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


def _formats(ev_types: pa.Array | pa.ChunkedArray) -> list[formats.Format | None]:
    """Each event's format, the first whose ev_type shape matches (registry order); None
    for no match."""
    found: list[formats.Format | None] = [None] * len(ev_types)
    for fmt in reversed(formats.FORMATS):
        for row, hit in enumerate(fmt.ev_type.arrow(ev_types).to_pylist()):
            if hit:
                found[row] = fmt
    return found


def _kv(fmt: formats.Format | None, ev_type: str | None, ev_data: str | None) -> tuple[str, dict]:
    """(op, column -> text) of one row event."""
    op = _op(fmt, ev_type)
    if ev_data is None:
        raise Undecided(f"op {op} without ev_data")
    assert fmt is not None and fmt.driver_map is not None
    return op, fmt.driver_map(op, ev_data)


def _op(fmt: formats.Format | None, ev_type: str | None) -> str:
    """The op (I, U, D) of one row event's ev_type, in a format that decodes on the driver."""
    if ev_type is None or ev_type in formats.TRUNCATE_TYPES or ev_type == formats.RECREATED:
        raise Undecided("a TRUNCATE, a table re-created, or an event without a type")
    if fmt is None or fmt.driver_op is None or fmt.driver_map is None:
        raise Undecided(f"ev_type {ev_type[:40]!r}: no driver-side decoder")
    op = fmt.driver_op(ev_type)
    if op not in ("I", "U", "D"):
        raise Undecided(f"op {op} of ev_type {ev_type[:40]!r}")
    return op


def decode(raw: pa.Table, columns: list[Column], drift: Drift | None = None) -> pa.Table | None:
    """The typed rows of one table's raw events (cdc.pg.batch.EVENT_SCHEMA): meta op,
    ev_id and ev_txid, then value(i) and present(i) per column, as decode.decode_table's
    rows hold them; None when any answer is undecided (see the module docstring)."""
    try:
        return _decode(raw, columns, drift)
    except Undecided as why:
        log.debug("decoded by Spark: %s", why)
        return None
    except pa.ArrowException as exc:  # a capacity limit (a column past 2 GB), say
        log.warning("decoded by Spark: Arrow could not decode on the driver: %s", exc)
        return None


def _decode(raw: pa.Table, columns: list[Column], drift: Drift | None) -> pa.Table:
    """Events of a shape its format knows (Format.driver_shape) decoded at once, shape by
    shape (at most MAX_SHAPES), the rest one by one (``_decode_each``)."""
    if drift is not None and drift.source_types:
        raise Undecided("a target column's type differs from the source's")
    if raw.num_rows == 0:
        return _decode_each(raw, columns, drift)
    if raw.column("ev_data").null_count:
        raise Undecided("an event without ev_data")
    kinds, ops = _ops(raw.column("ev_type"))
    known = {c.name for c in columns}
    ev_data = raw.column("ev_data")
    todo = np.ones(raw.num_rows, dtype=bool)  # not decoded yet
    alone = np.zeros(raw.num_rows, dtype=bool)  # to be decoded one by one
    parts = []
    for _ in range(MAX_SHAPES):
        pending = np.flatnonzero(todo & ~alone)
        if not len(pending):
            break
        row = int(pending[0])
        fmt = formats.FORMATS[kinds[row]]
        shape = fmt.driver_shape(ev_data[row].as_py()) if fmt.driver_shape else None
        if shape is None or not set(shape.names) <= known:
            alone[row] = True
            continue
        same = todo & (kinds == kinds[row])
        rows = np.flatnonzero(same)
        hits = pc.match_substring_regex(ev_data.take(rows), shape.pattern)
        same[rows] = pc.fill_null(hits, False).to_numpy(zero_copy_only=False)
        if not same[row]:  # spelled otherwise than the shape spells it
            alone[row] = True
            continue
        chosen = pa.array(same)
        part = raw.filter(chosen)
        parts.append(_decode_shape(part, ops.filter(chosen), fmt, shape, columns, drift))
        todo &= ~same
    if todo.any():
        if todo.sum() > ONE_BY_ONE:
            raise Undecided(f"{todo.sum():,} events of no shape decoded at once")
        parts.append(_decode_each(raw.filter(pa.array(todo)), columns, drift))
    if len(parts) == 1:
        return parts[0]
    return pa.concat_tables(parts).sort_by(meta("ev_id"))


def _ops(ev_types: pa.ChunkedArray) -> tuple[np.ndarray, pa.Array]:
    """Per event, the position of its format in formats.FORMATS (a numpy array) and its op;
    Undecided when an event has no driver-side decoder, or is a TRUNCATE."""
    distinct = pc.unique(ev_types)
    found = _formats(distinct)
    ops = pa.array([_op(f, t) for f, t in zip(found, distinct.to_pylist(), strict=True)])
    where = pc.index_in(ev_types, distinct).to_numpy(zero_copy_only=False)
    kinds = np.array([formats.FORMATS.index(f) for f in found])  # type: ignore[arg-type]
    return kinds[where], ops.take(pa.array(where))


def _decode_shape(
    raw: pa.Table,
    ops: pa.Array,
    fmt: formats.Format,
    shape: Shape,
    columns: list[Column],
    drift: Drift | None,
) -> pa.Table:
    """Events whose ev_data all match shape.pattern, decoded column by column."""
    n = raw.num_rows
    texts = dict(zip(shape.names, shape.read(raw.column("ev_data")), strict=True))
    nowhere = pa.array(np.zeros(n, dtype=bool))
    present_in = dict.fromkeys(texts, pa.array(np.ones(n, dtype=bool)))
    filled = pc.equal(ops, "I")
    if fmt.full_row:
        filled = pc.or_(filled, pc.equal(ops, "U"))
    for i, text in (drift.missing if drift else {}).items():
        name = columns[i].name
        if name not in texts:
            texts[name] = pc.if_else(filled, pa.scalar(text, pa.string()), None)
            present_in[name] = filled
    for c in columns:
        if c.is_key and (c.name not in texts or texts[c.name].null_count):
            raise Undecided("an event without a value for a key column")
    out: dict[str, pa.Array | pa.ChunkedArray] = {
        meta("op"): ops,
        meta("ev_id"): raw.column("ev_id"),
        meta("ev_txid"): raw.column("ev_txid"),
    }
    for i, c in enumerate(columns):
        kind = arrow_type(c.spark_type)
        out[value(i)] = (
            cast_column(texts[c.name], c.spark_type) if c.name in texts else pa.nulls(n, kind)
        )
    for i, c in enumerate(columns):
        out[present(i)] = present_in.get(c.name, nowhere)
    return pa.table(out)


def _decode_each(raw: pa.Table, columns: list[Column], drift: Drift | None) -> pa.Table:
    """Events decoded one by one, by their format's driver_map."""
    names = [c.name for c in columns]
    known = set(names)
    keys = [c.name for c in columns if c.is_key]
    missing = {names[i]: text for i, text in (drift.missing if drift else {}).items()}
    casts = [caster(c.spark_type) for c in columns]
    ops: list[str] = []
    values: list[list[Any]] = [[] for _ in columns]
    presence: list[list[bool]] = [[] for _ in columns]
    kinds = _formats(raw.column("ev_type"))
    rows = zip(
        kinds, raw.column("ev_type").to_pylist(), raw.column("ev_data").to_pylist(), strict=True
    )
    for fmt, ev_type, ev_data in rows:
        op, kv = _kv(fmt, ev_type, ev_data)
        assert fmt is not None
        if missing and (op == "I" or (op == "U" and fmt.full_row)):
            kv = {**{n: t for n, t in missing.items() if n not in kv}, **kv}
        if any(kv.get(k) is None for k in keys):
            raise Undecided("an event without a value for a key column")
        if op != "D" and not kv.keys() <= known:
            raise Undecided("a column the source does not have")
        ops.append(op)
        for i, name in enumerate(names):
            text = kv.get(name)
            values[i].append(None if text is None else casts[i](text))
            presence[i].append(name in kv)
    out: dict[str, pa.Array | pa.ChunkedArray] = {
        meta("op"): pa.array(ops, pa.string()),
        meta("ev_id"): raw.column("ev_id"),
        meta("ev_txid"): raw.column("ev_txid"),
    }
    for i, c in enumerate(columns):
        out[value(i)] = pa.array(values[i], arrow_type(c.spark_type))
    for i in range(len(columns)):
        out[present(i)] = pa.array(presence[i], pa.bool_())
    return pa.table(out)
