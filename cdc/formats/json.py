"""The json format (PgQ's ``jsontriga``): the whole row as a JSON object.

ev_type ``{"op":"INSERT","table":["<schema>","<table>"],"pkey":["<col>",...]}`` (op INSERT,
UPDATE, DELETE or TRUNCATE); ev_data the row (NEW, OLD for a DELETE) as a JSON object, ``{}``
for a TRUNCATE (docs/event-format.md §0, §3.6, §4). The trigger writes integers and booleans
bare, NULL as ``null``, every other value as a JSON string of its text output. Decoded inside
the JVM (``from_json`` into a string map): a string as its content, a bare value as its JSON
text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from cdc import casts
from cdc.formats.spec import (
    Format,
    JsonObject,
    JsonOp,
    KvMap,
    Shape,
    StartsWith,
    Undecided,
    captured,
    re2_literal,
)

if TYPE_CHECKING:
    import pyarrow as pa

# PostgreSQL values reach 1 GB; Jackson's default stops strings at 20 MB
MAX_STRING_LEN = 2**31 - 1


OPS = {"INSERT": "I", "UPDATE": "U", "DELETE": "D", "TRUNCATE": "R"}


def _object(text: str) -> dict[str, Any]:
    """A JSON object as Python's json reads it, refusing what Spark's parser (Jackson) might
    read otherwise: NaN and Infinity, non-integral numbers (Jackson writes them back in its
    own form), repeated names, trailing text, anything but an object."""

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        found = dict(items)
        if len(found) != len(items):
            raise Undecided("a name repeats in a JSON object")
        return found

    def refuse(token: str) -> None:
        raise Undecided(f"JSON number {token[:20]!r}")

    try:
        found = json.loads(text, object_pairs_hook=pairs, parse_constant=refuse, parse_float=refuse)
    except (ValueError, TypeError) as exc:  # JSONDecodeError, too many digits
        raise Undecided(f"not JSON as Python reads it: {exc}") from None
    if not isinstance(found, dict):
        raise Undecided("not a JSON object")
    return found


def _text(value: Any) -> str | None:
    """A JSON value as from_json's string map holds it: a string's content, null as null,
    true, false and an integer as their JSON text; anything else is undecided."""
    if value is None:
        return None
    if isinstance(value, str):
        return _utf8(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and -(2**63) <= value < 2**63:
        return str(value)  # a longer one may pass Jackson's number length limit
    raise Undecided(f"a JSON {type(value).__name__} value")


def _utf8(text: str) -> str:
    """text, when it has a UTF-8 form (a JSON escape may make a lone surrogate, \\ud800)."""
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise Undecided("a JSON string holds a lone surrogate") from None
    return text


def driver_op(ev_type: str) -> str:
    """op on the driver: I, U, D from the ``op`` INSERT, UPDATE, DELETE; R for TRUNCATE."""
    op = _object(ev_type).get("op")
    found = OPS.get(op) if isinstance(op, str) else None
    if found is None:
        raise Undecided("a json ev_type without a known op")
    return found


def driver_map(op: str, ev_data: str) -> KvMap:
    """jvm_map on the driver: the JSON object as column -> text."""
    return {_utf8(name): _text(value) for name, value in _object(ev_data).items()}


# one JSON value as the trigger writes it: a string (no control character; escapes valid, none
# of a surrogate or of U+0000), an integer without leading zeros that fits in 64 bits (18
# digits), true, false, null. Other values (-0, longer numbers, surrogate escapes: the
# trigger writes none of them) are decoded one by one (driver_map).
ESCAPE = (
    r'\\["\\/bfnrt]'
    r"|\\u(?:[1-9A-Ca-cEeFf][0-9A-Fa-f]{3}|[Dd][0-7][0-9A-Fa-f]{2}|0[1-9A-Fa-f][0-9A-Fa-f]{2}"
    r"|00[1-9A-Fa-f][0-9A-Fa-f]|000[1-9A-Fa-f])"
)
INTEGER = r"-?[1-9][0-9]{0,17}|0"
VALUE = rf'"(?:[^"\\\x00-\x1f]|{ESCAPE})*"|{INTEGER}|true|false|null'
SAMPLE = 100  # events whose values say each column's JSON type (Arrow's reader needs one)
READ_BLOCK = 1 << 20  # bytes of lines Arrow's JSON reader parses at a time (its default)


def driver_shape(ev_data: str) -> Shape | None:
    """The Shape of the JSON objects with this one's names, in its order and spelling (as
    json.dumps spells them, as the trigger does: other spellings do not match, and are
    decoded one by one), no space between the tokens; each value any of ``VALUE``, read
    as text. Its ``typed`` gives the same shape with typed values."""
    try:
        names = tuple(_utf8(name) for name in _object(ev_data))
    except Undecided:
        return None
    return _shape(names, (None,) * len(names))


def _shape(names: tuple[str, ...], types: tuple[str | None, ...]) -> Shape:
    """The shape of these names, each value of the JSON form of its type (``_typed_value``)
    where it has one, else any of VALUE."""
    pairs = [
        re2_literal(json.dumps(name, ensure_ascii=False))
        + f":(?P<g{k}>{VALUE if kind is None else 'null|' + _typed_value(kind)})"
        for k, (name, kind) in enumerate(zip(names, types, strict=True))
    ]
    pattern = "^\\{" + ",".join(pairs) + "\\}$"
    if any(types):
        return Shape(pattern, names, partial(_read_typed, names, types), types)
    return Shape(pattern, names, partial(_read, pattern, names), typed=partial(_typed, names))


def _typed(names: tuple[str, ...], spark_types: Mapping[str, str]) -> Shape | None:
    """Shape.typed: the shape whose columns of a type that pyarrow's JSON reader reads
    straight (cdc.casts' ``arrow_json``) hold only the JSON form of that type's forms (and
    null); None when no column has such a type."""
    found = spark_types.get
    types = tuple(
        kind if kind is not None and casts.entry(kind).arrow_json else None
        for kind in map(found, names)
    )
    return _shape(names, types) if any(types) else None


def _typed_value(spark_type: str) -> str:
    """The JSON values of spark_type that pyarrow's JSON reader reads into the value the
    Arrow cast makes of their text (cdc.casts.ARROW_JSON): an integer as VALUE holds it (no
    leading zero, no -0: each has a form of the integer forms), true or false, or a string
    of a text in the type's forms (no escape: the forms hold no backslash, no quote), their
    groups made non-capturing."""
    kind = casts.entry(spark_type).arrow_json
    if kind == "number":
        return INTEGER
    if kind == "boolean":
        return "true|false"
    forms = casts.forms(spark_type)
    assert kind == "string" and forms is not None and forms[0] == "^" and forms[-1] == "$"
    return '"' + re.sub(r"\((?!\?)", "(?:", forms[1:-1]) + '"'


def _read(
    pattern: str, names: tuple[str, ...], ev_data: pa.Array | pa.ChunkedArray
) -> list[pa.Array]:
    """Shape.read: the objects, one per line, read by Arrow's JSON reader into a column per
    name, each of the JSON type its first values in the first SAMPLE events have (strings
    when they are all null); integers and booleans then written as text as the JSON has
    them. Where a value is of another type, the columns are read from the pattern's capture
    groups instead."""
    import pyarrow as pa

    try:
        table = _read_json(ev_data, names, _sampled(ev_data, names))
    except (pa.ArrowInvalid, OverflowError):
        return captured(ev_data, pattern, len(names), texts)
    return [table.column(name).combine_chunks().cast(pa.string()) for name in names]


def _read_typed(
    names: tuple[str, ...], types: tuple[str | None, ...], ev_data: pa.Array | pa.ChunkedArray
) -> list[pa.Array]:
    """Shape.read of a typed shape: the columns with a type read straight into its Arrow type
    (cdc.pg.pgtypes.arrow_type), the others as ``_read`` reads them, as text; Undecided
    where the reader refuses a value (an integer past its type's bits, 30 February: the
    untyped shape's texts, cast, decide then)."""
    import pyarrow as pa

    from cdc.pg.pgtypes import arrow_type

    kinds = _sampled(ev_data, names)
    kinds.update({name: arrow_type(t) for name, t in zip(names, types, strict=True) if t})
    try:
        table = _read_json(ev_data, names, kinds)
    except (pa.ArrowInvalid, OverflowError) as exc:
        raise Undecided(f"pyarrow's JSON reader: {exc}") from None
    return [
        table.column(name).combine_chunks().cast(pa.string() if t is None else kinds[name])
        for name, t in zip(names, types, strict=True)
    ]


def _sampled(ev_data: pa.Array | pa.ChunkedArray, names: tuple[str, ...]) -> dict[str, Any]:
    """Each name's Arrow type as the reader would read it, from its first non-null value in
    the first SAMPLE events (a string where all are null)."""
    import pyarrow as pa

    kinds: dict[str, pa.DataType] = {}
    for text in ev_data[:SAMPLE].to_pylist():
        for name, found in json.loads(text).items():
            if found is not None and name not in kinds:
                kinds[name] = _arrow_type(found)
    return {name: kinds.get(name, pa.string()) for name in names}


def _read_json(
    ev_data: pa.Array | pa.ChunkedArray, names: tuple[str, ...], kinds: dict[str, Any]
) -> pa.Table:
    """The objects, one per line, read by Arrow's JSON reader into these types, in blocks of
    READ_BLOCK (or the longest line) parsed by Arrow's threads: its pool has a thread per
    core, shared by the tables the drain decodes at once, so they take no more cores than
    the machine has, and a table alone takes them all."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pj

    schema = pa.schema([(name, kinds[name]) for name in names])
    options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error")
    lines = _lines(ev_data)
    longest = pc.max(pc.binary_length(ev_data)).as_py() or 0
    read = pj.ReadOptions(use_threads=True, block_size=max(READ_BLOCK, 2 * longest + 2))
    return pj.read_json(pa.BufferReader(lines), read_options=read, parse_options=options)


def _arrow_type(found: object) -> pa.DataType:
    """The Arrow type Arrow's JSON reader reads a value like this one into."""
    import pyarrow as pa

    if isinstance(found, bool):
        return pa.bool_()
    return pa.int64() if isinstance(found, int) else pa.string()


def _lines(ev_data: pa.Array | pa.ChunkedArray) -> pa.Buffer:
    """The texts as one buffer, each followed by a newline."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(ev_data, pa.ChunkedArray):
        ev_data = ev_data.combine_chunks()
    ended = pc.binary_join_element_wise(ev_data, pa.scalar("", pa.string()), "\n")
    offsets = np.frombuffer(ended.buffers()[1], dtype=np.int32)
    first, last = offsets[ended.offset], offsets[ended.offset + len(ended)]
    return ended.buffers()[2][int(first) : int(last)]


def texts(tokens: pa.Array | pa.ChunkedArray) -> pa.Array:
    """JSON value tokens (of ``VALUE``) as driver_map's texts: a string's content, null as
    null, an integer, true and false as they are written; a string with an escape is read
    by json, one by one."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(tokens, pa.ChunkedArray):
        tokens = tokens.combine_chunks()
    is_string = pc.starts_with(tokens, '"')
    out = pc.if_else(is_string, pc.utf8_slice_codeunits(tokens, 1, -1), tokens)
    out = pc.if_else(pc.equal(tokens, "null"), pa.scalar(None, pa.string()), out)
    escaped = pc.and_(is_string, pc.match_substring(tokens, "\\"))
    if pc.any(escaped).as_py():
        read = [_utf8(json.loads(token)) for token in tokens.filter(escaped).to_pylist()]
        out = pc.replace_with_mask(out, escaped, pa.array(read, pa.string()))
    return out


FORMAT = Format(
    name="json",
    pgq_trigger="pgq.jsontriga",
    ev_type=StartsWith("{"),
    full_row=True,
    op=JsonOp("$.op", truncate="TRUNCATE"),  # I, U, D from the first letter; R for TRUNCATE
    jvm_map=JsonObject(MAX_STRING_LEN),
    driver_op=driver_op,
    driver_map=driver_map,
    driver_shape=driver_shape,
)
