"""json events read straight into their columns' types by a typed shape (Shape.typed,
cdc.formats.json: integers, booleans, decimals and timestamps by pyarrow's JSON reader) give
the values the texts cast one by one give, or are left to Spark alike.

Two levels, no Spark (the one-by-one decoder's equality with Spark is
tests/spark/test_driver_decode.py's):

- one value: each edge text of each type (test_casts' and the edges of each typed pattern:
  integer limits, decimals with exactly p-s whole and s fraction digits and one more,
  offsets +HH and +HH:MM, years 0001 and 9999) in its JSON form, through the typed shape's
  pattern and read, against cdc.engines.arrow.casts.cast_column of its text;
- whole batches: the edge values, nulls, missing names, names in another order, repeated
  names, escapes and non-ASCII text, decoded at once (cdc.engines.arrow.decode) against the
  same events decoded one by one.
"""

from __future__ import annotations

import json
import random
import re

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdc import casts
from cdc.engines.arrow import casts as arrow_casts
from cdc.engines.arrow import decode as driver_decode
from cdc.formats import json as json_format
from cdc.formats.spec import Undecided
from cdc.pg.batch import EVENT_SCHEMA
from cdc.pg.pgtypes import Column
from tests.support.exact import bits
from tests.unit.test_casts import EDGE_TEXTS

TYPED = ["short", "int", "long", "boolean", "timestamp", "timestamp_ntz"]
TYPED += ["decimal(12,2)", "decimal(5,5)", "decimal(5,0)", "decimal(1,0)", "decimal(38,10)"]
# per type, the edges of its typed pattern (texts; a JSON form is made of each)
EDGES = {
    "short": ["32767", "-32768", "32768", "-32769", "0", "-0", "007", "1.0"],
    "int": ["2147483647", "-2147483648", "2147483648", "-2147483649"],
    "long": ["999999999999999999", "-999999999999999999", "1000000000000000000"],
    "decimal(12,2)": ["1234567890.12", "12345678901.12", "1.255", "1.2", "1", "-0.00"],
    "decimal(5,5)": ["0.12345", "0.123456", "-0.00001", "00.1"],
    "decimal(5,0)": ["12345", "123456", "-99999", "0.0", "00000000000000000000012345"],
    "decimal(1,0)": ["9", "-9", "10", "0"],
    "decimal(38,10)": ["9" * 28 + "." + "9" * 10, "9" * 29 + ".0"],
    "timestamp": [
        *["2024-01-01T00:00:01+00:00", "2024-01-01 00:00:01+05", "2024-06-30T12:00:00.5-05:30"],
        *["0001-01-01T00:00:00+00", "9999-12-31T23:59:59.999999+00", "0001-01-01T00:00:00+01"],
        *["9999-12-31T23:59:59-01", "2024-02-30T00:00:00+00", "2024-01-01T24:00:00+00"],
        *["2024-01-01T00:00:01", "2024-01-01T00:00:01Z", "2024-01-01T00:00:01+15:59"],
        *["2024-01-01T23:59:60+00", "2023-02-29T00:00:00+00", "2024-02-29T00:00:00-01"],
    ],
    "timestamp_ntz": [
        *["2024-01-01T00:00:01", "2024-01-01 00:00:01.5", "0001-01-01T00:00:00"],
        *["9999-12-31T23:59:59.999999", "2024-01-01T00:00:01+00", "2023-02-29T00:00:00"],
    ],
    "boolean": ["true", "false", "t", "f"],
}


def _json_forms(text: str) -> list[str]:
    """The JSON values that could carry text: a JSON string of it, and the bare token too
    where text is one."""
    forms = [json.dumps(text)]
    try:
        json.loads(text)
        forms.append(text)
    except ValueError:
        pass
    return forms


def _decided(cast, *args):
    try:
        return True, cast(*args)
    except Undecided:
        return False, None


@pytest.mark.parametrize("spark_type", TYPED)
def test_a_typed_value_reads_as_its_text_casts(spark_type: str):
    """A JSON value the typed pattern admits holds a text in the type's forms; the reader
    decides it exactly when the Arrow cast of that text does, with the same value."""
    shape = json_format.driver_shape('{"v":null}')
    assert shape is not None and shape.typed is not None
    typed = shape.typed({"v": spark_type})
    assert typed is not None and typed.types == (spark_type,)
    forms = casts.forms(spark_type)
    assert forms is not None
    admitted = 0
    for text in [*EDGE_TEXTS, *EDGES.get(spark_type, [])]:
        for token in _json_forms(text):
            ev_data = pa.array(['{"v":' + token + "}"])
            if not pc.match_substring_regex(ev_data, typed.pattern)[0].as_py():
                continue
            admitted += 1
            assert re.fullmatch(forms, json.loads(token) if token[0] == '"' else token), token
            by_reader, read = _decided(lambda e: typed.read(e)[0], ev_data)
            if by_reader:
                by_reader, read = _decided(arrow_casts.checked, read, spark_type)
            by_cast, cast = _decided(arrow_casts.cast_column, pa.array([text]), spark_type)
            assert by_reader == by_cast, f"{spark_type}: {token}"
            if by_cast:
                assert read.type == cast.type
                assert bits(read.to_pylist()) == bits(cast.to_pylist()), f"{spark_type}: {token}"
    assert admitted >= 2


def test_types_without_a_reading_stay_text():
    """A column of a type pyarrow's reader does not read as the Arrow cast does (float,
    date, string, binary, arrays) keeps the untyped value; none typed: no typed shape."""
    shape = json_format.driver_shape('{"a":1,"b":2}')
    assert shape is not None and shape.typed is not None
    for other in ["float", "double", "date", "string", "binary", "array<int>", "byte"]:
        assert casts.entry(other).arrow_json is None
        assert shape.typed({"a": other, "b": other}) is None
    mixed = shape.typed({"a": "date", "b": "int"})
    assert mixed is not None and mixed.types == (None, "int")


# ---------------------------------------------------------------- whole batches

COLUMNS = [
    Column("id", "bigint", "long", True),
    Column("s", "smallint", "short", False),
    Column("i", "integer", "int", False),
    Column("n", "numeric", "decimal(12,2)", False),
    Column("z", "numeric", "decimal(5,5)", False),
    Column("t", "timestamp with time zone", "timestamp", False),
    Column("u", "timestamp without time zone", "timestamp_ntz", False),
    Column("b", "boolean", "boolean", False),
    Column("x", "text", "string", False),
    Column("d", "date", "date", False),
    Column("f", "double precision", "double", False),
]
JSON_TYPE = '{{"op":"{}","table":["public","t"],"pkey":["id"]}}'
OPS = {"I": "INSERT", "U": "UPDATE", "D": "DELETE"}
# values as the trigger writes them (JSON tokens), per column
GOOD = {
    "s": ["0", "-32768", "32767", "null"],
    "i": ["12", "-2147483648", "2147483647", "null"],
    "n": ['"1.25"', '"-1234567890.12"', '"0.5"', '"7"', "null"],
    "z": ['"0.12345"', '"-0.1"', '"0"', "null"],
    "t": ['"2024-01-01T00:00:01+00:00"', '"2024-06-30T23:59:59.123456-05:30"', "null"],
    "u": ['"2024-01-01T00:00:01"', '"0001-01-01T00:00:00"', "null"],
    "b": ["true", "false", "null"],
    "x": ['"a"', '"é"', '"\\u00e9\\n\\""', '"😀"', '""', "null"],
    "d": ['"2024-02-29"', "null"],
    "f": ['"1.5"', '"NaN"', '"-Infinity"', "null"],
}
# values the typed pattern refuses, or the reader, or both decoders
EDGE = {
    "s": ["32768", "-0", '"12"', "1.0"],
    "i": ["2147483648", '"-5"'],
    "n": ['"12345678901.12"', '"1.255"', "1.25", "12", '"1e3"', '"NaN"', '"\\u0031.25"'],
    "z": ['"0.123456"', '"1"'],
    "t": ['"0001-01-01T00:00:00+01"', '"2024-02-30T00:00:00+00"', '"2024-01-01T00:00:01"'],
    "u": ['"2024-01-01T00:00:01+00"', '"2023-02-29T00:00:00"'],
    "b": ['"t"', '"true"', "1"],
    "x": ["42", "true", '"\\ud800"'],
}


def _event(rnd: random.Random, key: int, edge: tuple[str, str] | None) -> str:
    """One row's ev_data, as the trigger writes it, with the edge value where asked."""
    values = {c.name: rnd.choice(GOOD[c.name]) for c in COLUMNS[1:]}
    if edge is not None:
        values[edge[0]] = edge[1]
    return "{" + ",".join(f'"{n}":{v}' for n, v in {"id": str(key), **values}.items()) + "}"


def _raw(events: list[tuple[str, str]]) -> pa.Table:
    rows = [
        {"ev_id": 10 + i, "ev_txid": 100 + i // 3, "ev_type": t, "ev_data": d}
        for i, (t, d) in enumerate(events)
    ]
    return pa.Table.from_pylist(rows, EVENT_SCHEMA)


def _same_as_one_by_one(raw: pa.Table) -> pa.Table | None:
    try:
        expected = driver_decode._decode_each(raw, COLUMNS, None)
    except Undecided:
        expected = None
    got = driver_decode.decode(raw, COLUMNS)
    if expected is None:
        assert got is None
    else:
        assert got is not None
        assert _exact(got) == _exact(expected)
    return got


def _exact(rows: pa.Table) -> list[dict]:
    """Rows compared exactly: floats by their bits (NaN equal to NaN)."""
    return [{name: bits(v) for name, v in row.items()} for row in rows.to_pylist()]


@pytest.mark.parametrize(("name", "token"), [(n, t) for n, tokens in EDGE.items() for t in tokens])
def test_an_edge_value_among_typed_events(name: str, token: str):
    """Typed events with one edge value, first, in the middle or last: decoded at once as
    one by one (the events the typed shape refuses by the untyped shape or one by one)."""
    rnd = random.Random(f"{name}{token}")
    for at in (0, 3, 7):
        events = [_event(rnd, k, (name, token) if k == at else None) for k in range(8)]
        _same_as_one_by_one(_raw([(JSON_TYPE.format("UPDATE"), e) for e in events]))


def test_events_as_the_trigger_writes_them_read_typed(monkeypatch: pytest.MonkeyPatch):
    """Clean events take the typed shape: each typed column read in its type, checked
    (cdc.engines.arrow.casts.checked), never cast from text."""
    rnd = random.Random(7)
    raw = _raw(
        [(JSON_TYPE.format(OPS[rnd.choice("IUD")]), _event(rnd, k, None)) for k in range(60)]
    )
    checked: list[str] = []
    original = driver_decode.checked

    def spy(values: pa.Array, spark_type: str) -> pa.Array:
        checked.append(spark_type)
        return original(values, spark_type)

    monkeypatch.setattr(driver_decode, "checked", spy)
    assert _same_as_one_by_one(raw) is not None
    assert sorted(checked) == sorted(c.spark_type for c in COLUMNS[:8])


# hostile spellings of a whole object: repeated names (Arrow's reader refuses them, Spark's
# from_json keeps one: the shape never matches them), names in another order, spaces, a
# name missing or unknown
HOSTILE = [
    '{"id":1,"s":1,"s":2}',
    '{"s":3,"id":2}',
    '{"id": 3}',
    '{"id":4}',
    '{"id":5,"nosuch":1}',
    '{"id":6,"i":1,"i":1}',
]


@st.composite
def _batches(draw: st.DrawFn) -> list[tuple[str, str]]:
    rnd = random.Random(draw(st.integers(0, 2**32)))
    events = []
    for k in range(draw(st.integers(1, 30))):
        edge = None
        if rnd.random() < 0.05:
            name = rnd.choice(sorted(EDGE))
            edge = (name, rnd.choice(EDGE[name]))
        ev_data = _event(rnd, k, edge)
        if rnd.random() < 0.1:  # the same names in another order: a shape of its own
            found = json.loads(ev_data)
            names = list(found)
            rnd.shuffle(names)
            ev_data = json.dumps({n: found[n] for n in names}, separators=(",", ":"))
        if rnd.random() < 0.1:  # a row without a column
            found = json.loads(ev_data)
            found.pop(rnd.choice(COLUMNS[1:]).name)
            ev_data = json.dumps(found, separators=(",", ":"))  # a lone surrogate escaped
        events.append((JSON_TYPE.format(OPS[rnd.choice("IIUUD")]), ev_data))
    if draw(st.booleans()):
        events.insert(
            rnd.randrange(len(events) + 1), (JSON_TYPE.format("UPDATE"), rnd.choice(HOSTILE))
        )
    return events


@settings(max_examples=200, deadline=None)
@given(events=_batches())
def test_typed_shapes_decode_as_one_by_one(events: list[tuple[str, str]]):
    _same_as_one_by_one(_raw(events))


def test_an_event_longer_than_the_reader_block(monkeypatch: pytest.MonkeyPatch):
    """An event past Arrow's block (READ_BLOCK: the reader refuses an object that straddles
    two blocks) among short ones: the block grows to hold it, the events still read by
    their shape."""
    rnd = random.Random(3)
    events = [_event(rnd, k, None) for k in range(40)]
    events[17] = _event(rnd, 17, ("x", json.dumps("é" * json_format.READ_BLOCK)))
    monkeypatch.setattr(json_format, "captured", None)  # the slow read: not taken
    got = _same_as_one_by_one(_raw([(JSON_TYPE.format("INSERT"), e) for e in events]))
    assert got is not None
