"""A queue event as a row of the stream (cdc.stream.events): op, key and columns of each
capture format as its triggers write them, TRUNCATEs, markers, signals and bad events."""

from __future__ import annotations

import datetime as dt

import pytest

from cdc import formats
from cdc.stream.events import SCHEMA, SIGNAL, RawEvent, decode, format_of, row

T0 = dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
T1 = T0 + dt.timedelta(seconds=3)
JSON_I = '{"op":"INSERT","table":["public","t"],"pkey":["id"]}'
JSON_D = '{"op":"DELETE","table":["public","t"],"pkey":["id"]}'


def event(ev_type: str | None, ev_data: str | None, table: str | None = "public.t") -> RawEvent:
    return RawEvent(41, T0, 900, ev_type, ev_data, table)


def keys(table: str) -> tuple[str, ...] | None:
    return {"public.t": ("id",), "public.two": ("a", "b")}.get(table)


@pytest.mark.parametrize(
    ("ev_type", "ev_data", "op", "columns"),
    [
        (
            JSON_I,
            '{"id":1,"name":"a b","ok":true,"n":null}',
            "I",
            {"id": "1", "name": "a b", "ok": "true", "n": None},
        ),
        (JSON_D, '{"id":1,"name":"x"}', "D", {"id": "1", "name": "x"}),
        ('{"op":"TRUNCATE","table":["public","t"],"pkey":["id"]}', "{}", "R", {}),
        ("I:id", "id=1&name=a+b%26c&n", "I", {"id": "1", "name": "a b&c", "n": None}),
        ("U:id", "id=1&name=", "U", {"id": "1", "name": ""}),
        ("R", "", "R", {}),
        ("I", "(id,name) values ('1','x''y')", "I", {"id": "1", "name": "x'y"}),
        ("U", "name='z' where id='1'", "U", {"name": "z", "id": "1"}),
        ("D", "id='1'", "D", {"id": "1"}),
        (formats.RECREATED, None, "X", {}),
    ],
)
def test_each_format_decodes(ev_type, ev_data, op, columns):
    """The op and the column texts, as the drain's decoders give them."""
    found = decode(ev_type, ev_data)
    assert (found.op, found.columns, found.reason) == (op, columns, None)


@pytest.mark.parametrize(
    ("ev_type", "ev_data", "reason"),
    [
        (None, "x", "without an ev_type"),
        ("Q:id", "id=1", "unknown event type"),
        (JSON_I, '{"id":1,"id":2}', "undecodable json payload"),
        ("I:id", "id=%zz", "undecodable urlenc payload"),
        ("U", "this is not sql", "undecodable sql payload"),
        (JSON_I, None, "json event without ev_data"),
        ('{"op":"MERGE"}', "{}", "undecodable json event type"),
    ],
)
def test_bad_events_say_why(ev_type, ev_data, reason):
    """An event that does not decode has a reason and no columns."""
    found = decode(ev_type, ev_data)
    assert found.columns is None
    assert reason in (found.reason or "")


def test_formats_are_told_by_their_ev_type_shape():
    assert [format_of(t).name for t in (JSON_I, "D:a,b", "U")] == ["json", "urlenc", "sql"]
    assert format_of("cdc.snapshot") is None


def test_a_row_carries_the_key_and_the_ticks():
    """A row in SCHEMA's order: the key from the table's key columns, the batch's tick."""
    found = row(event(JSON_I, '{"id":7,"v":"x"}'), 12, T1, keys)
    names = [part.strip().split(" ")[0].strip("`") for part in _top_level(SCHEMA)]
    assert dict(zip(names, found, strict=True)) == {
        "table": "public.t",
        "op": "I",
        "key": {"id": "7"},
        "columns": {"id": "7", "v": "x"},
        "ev_id": 41,
        "ev_txid": 900,
        "ev_time": T0,
        "tick_id": 12,
        "tick_time": T1,
        "reason": None,
        "raw": None,
    }


def test_keys_of_a_sql_update_and_delete_come_from_the_event():
    """sql carries the key in its WHERE: the key's texts are the event's."""
    assert row(event("U", "v='y' where id='7'"), 12, T1, keys)[2] == {"id": "7"}
    assert row(event("D", "a='1' and b='2'", "public.two"), 12, T1, keys)[2] == {"a": "1", "b": "2"}


def test_no_key_where_there_is_none():
    """A TRUNCATE has no key; neither has a table whose key cannot be read now."""
    assert row(event("R", ""), 12, T1, keys)[2] is None
    assert row(event(JSON_I, '{"id":1}', "public.dropped"), 12, T1, keys)[2] is None


def test_a_bad_event_keeps_its_raw_text():
    found = row(event("I:id", "id=%zz"), 12, T1, keys)
    assert found[3] is None and "urlenc" in found[9]
    assert found[10] == ("I:id", "id=%zz")


def test_snapshot_signals_are_not_rows():
    assert row(event(SIGNAL, "{}"), 12, T1, keys) is None


def _top_level(ddl: str) -> list[str]:
    """SCHEMA's fields, split at the commas outside <...>."""
    parts, depth, current = [], 0, ""
    for ch in ddl:
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    return [*parts, current]
