"""Events decoded at once by their shape (Format.driver_shape, cdc.engines.arrow.decode)
against the same events decoded one by one (driver_map): random rows in the forms the
triggers write and in hostile forms (spaces, other orders, repeated or missing names, numbers
the trigger never writes, escapes of every kind), mixed in one batch. Either both decide and
give the same rows, or neither decides. No Spark: the one-by-one decoder's equality with
Spark is tests/spark/test_driver_decode.py's."""

from __future__ import annotations

import json
import random
from urllib.parse import quote_plus

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdc.engines.arrow import decode as driver_decode
from cdc.formats.spec import Undecided
from cdc.pg.batch import EVENT_SCHEMA
from cdc.pg.pgtypes import Column
from cdc.targets.schema_drift import Drift

COLUMNS = [
    Column("id", "bigint", "long", True),
    Column("s", "text", "string", False),
    Column("n", "integer", "int", False),
    Column("b", "boolean", "boolean", False),
    Column("d", "date", "date", False),
    Column('we ird"=&%+é', "text", "string", False),
]
JSON_TYPE = '{{"op":"{}","table":["public","t"],"pkey":["id"]}}'
OPS = {"I": "INSERT", "U": "UPDATE", "D": "DELETE"}

# texts a text column may hold: plain, spaces, escapes of every kind, non-ASCII, emoji
TEXTS = st.one_of(
    st.sampled_from(["", "a b", "x+y", "50%", "%41", "a&b=c", '"q"', "back\\slash", "\n\t\x01"]),
    st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00")),
)


def _json_row(values: dict[str, object]) -> str:
    # as jsontriga writes it: compact, non-ASCII raw, integers and booleans bare
    return json.dumps(values, separators=(",", ":"), ensure_ascii=False)


def _urlenc_row(values: dict[str, object]) -> str:
    def text(v: object) -> str:
        return {True: "t", False: "f"}.get(v, str(v)) if isinstance(v, bool) else str(v)

    return "&".join(
        quote_plus(name, safe="") + ("" if v is None else "=" + quote_plus(text(v), safe=""))
        for name, v in values.items()
    )


HOSTILE_JSON = [
    '{"id": 1, "s": "spaced"}',
    '{"s":"x","id":2}',  # another order
    '{"id":3,"id":4}',
    '{"id":-0,"n":1}',
    '{"id":1234567890123456789}',  # 19 digits
    '{"id":5,"n":1.0}',
    '{"id":6,"s":"\\ud83d\\ude00"}',  # a surrogate pair, escaped
    '{"id":7,"s":"\\ud800"}',
    '{"id":8,"s":"\\u0000"}',
    '{"id":9,"s":"\\u00e9\\/\\b"}',
    '{"id":10,"s":"raw\ttab"}',
    '{"id":11,"n":"12"}',  # a number as a string
    '{"id":12,"b":"true"}',
    '{"id":13,"nosuch":1}',
    '{"id":14}',
    '{"id":007}',
    "{}",
]
HOSTILE_URLENC = [
    "s=x&id=2",  # another order
    "id=3&id=4",
    "id=5&s=%zz",
    "id=6&s=%C3",
    "id=7&s=%c3%a9%3A",
    "id=8&&s=x",
    "id=9&nosuch=1",
    "id=10&s=a=b",
    "%69d=11",  # a name spelled otherwise
    "id=12&b=yes",
]


@st.composite
def _batches(draw: st.DrawFn) -> tuple[list[tuple[str, str]], bool]:
    rnd = random.Random(draw(st.integers(0, 2**32)))
    fmt = draw(st.sampled_from(["json", "urlenc"]))
    events = []
    for i in range(draw(st.integers(1, 40))):
        op = rnd.choice("IIUUD")
        values: dict[str, object] = {"id": i}
        for c in COLUMNS[1:]:
            if c.name == "n":
                values[c.name] = rnd.choice([None, 0, -5, 2**31 - 1])
            elif c.name == "b":
                values[c.name] = rnd.choice([None, True, False])
            elif c.name == "d":
                values[c.name] = rnd.choice([None, "2024-02-29", "0001-01-01", "1999-12-31"])
            elif rnd.random() < 0.9:
                values[c.name] = rnd.choice([None, draw(TEXTS)])
        if rnd.random() < 0.2:  # a row without a column (written before it was added)
            values.pop(rnd.choice(COLUMNS[1:]).name, None)
        if fmt == "json":
            events.append((JSON_TYPE.format(OPS[op]), _json_row(values)))
        else:
            events.append((f"{op}:id", _urlenc_row(values)))
    hostile = draw(st.booleans())
    if hostile:
        bad = draw(st.sampled_from(HOSTILE_JSON if fmt == "json" else HOSTILE_URLENC))
        op_type = JSON_TYPE.format("UPDATE") if fmt == "json" else "U:id"
        events.insert(rnd.randrange(len(events) + 1), (op_type, bad))
    return events, hostile


def _raw(events: list[tuple[str, str]]) -> pa.Table:
    rows = [
        {"ev_id": 10 + i, "ev_txid": 100 + i // 4, "ev_retry": None, "ev_type": t, "ev_data": d}
        | {"ev_time": None, "ev_extra1": "public.t"}
        | {f"ev_extra{k}": None for k in (2, 3, 4)}
        for i, (t, d) in enumerate(events)
    ]
    return pa.Table.from_pylist(rows, EVENT_SCHEMA)


def _one_by_one(raw: pa.Table, drift: Drift | None) -> pa.Table | None:
    try:
        return driver_decode._decode_each(raw, COLUMNS, drift)
    except Undecided:
        return None


@settings(max_examples=300, deadline=None)
@given(batch=_batches(), fill=st.booleans())
def test_shapes_decode_as_one_by_one(batch, fill):
    events, _ = batch
    raw = _raw(events)
    drift = Drift(COLUMNS, missing={1: "before"}) if fill else None
    expected = _one_by_one(raw, drift)
    got = driver_decode.decode(raw, COLUMNS, drift)
    if expected is None:
        assert got is None
    else:
        assert got is not None
        assert got.to_pylist() == expected.to_pylist()


def _shapes_used(raw: pa.Table, monkeypatch: pytest.MonkeyPatch) -> int:
    """How many events decode by shape: the batch without its one-by-one decoder."""
    calls = []
    original = driver_decode._decode_each

    def counting(part: pa.Table, *args: object) -> pa.Table:
        calls.append(part.num_rows)
        return original(part, *args)

    with monkeypatch.context() as patched:
        patched.setattr(driver_decode, "_decode_each", counting)
        assert driver_decode.decode(raw, COLUMNS) is not None
    return raw.num_rows - sum(calls)


@pytest.mark.parametrize("fmt", ["json", "urlenc"])
def test_rows_as_the_trigger_writes_them_decode_by_shape(fmt, monkeypatch):
    rows = [{"id": i, "s": f"r {i} é", "n": i, "b": i % 2 == 0, "d": None} for i in range(50)]
    rows += [{"id": 50, "s": None, "n": None, "b": None, "d": "2024-01-01"}]
    if fmt == "json":
        events = [(JSON_TYPE.format("INSERT"), _json_row(r)) for r in rows]
    else:
        events = [("I:id", _urlenc_row(r)) for r in rows]
    raw = _raw(events)
    assert _shapes_used(raw, monkeypatch) == len(rows)
    assert driver_decode.decode(raw, COLUMNS).to_pylist() == _one_by_one(raw, None).to_pylist()


def test_an_integer_column_null_in_the_first_rows_is_read_by_its_groups():
    # Arrow's JSON reader takes the column as text (no value seen): a bare integer later
    # makes it refuse, and the pattern's capture groups read the shape instead
    rows = [{"id": i, "n": None} for i in range(150)] + [{"id": 150, "n": 42}]
    raw = _raw([(JSON_TYPE.format("INSERT"), _json_row(r)) for r in rows])
    got = driver_decode.decode(raw, COLUMNS[:3])
    assert got is not None
    assert got.column(driver_decode.value(2)).to_pylist() == [None] * 150 + [42]


def test_many_events_of_no_shape_are_left_to_spark():
    events = [("U", f"s='x' where id='{i}'") for i in range(driver_decode.ONE_BY_ONE + 1)]
    assert driver_decode.decode(_raw(events), COLUMNS) is None
