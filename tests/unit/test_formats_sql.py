"""The sql format's Python decoder (cdc.formats.sql.python_map) on sqltriga's shapes
(docs/event-format.md §3), with no Spark and no server."""

from __future__ import annotations

import pytest

from cdc.formats import sql


@pytest.mark.parametrize(
    ("op", "data", "expected"),
    [
        # no-op UPDATE: the first key column set to its old value
        ("U", "id='1' where id='1'", {"id": "1"}),
        # only changed columns, and the key from the WHERE
        ("U", "a='z' where id='1'", {"id": "1", "a": "z"}),
        ("U", "v='w' where b='2' and a='1'", {"a": "1", "b": "2", "v": "w"}),
        ("U", "na='{1.00}' where id='1'", {"id": "1", "na": "{1.00}"}),
        ("D", "b='2' and a='1'", {"a": "1", "b": "2"}),
        ("I", "(id,name,val) values ('2',null,null)", {"id": "2", "name": None, "val": None}),
        ("I", "(id,a) values ('1','x&y')", {"id": "1", "a": "x&y"}),
    ],
)
def test_row_events_decode(op, data, expected):
    """sqltriga's INSERT, UPDATE and DELETE shapes give column -> text, NULL as None."""
    assert sql.python_map(op, data) == expected


@pytest.mark.parametrize(
    ("op", "data"),
    [
        ("R", ""),  # a TRUNCATE is not decoded: its map is empty, made in Spark
        ("I", None),
        (None, "(a) values ('1')"),
        ("U", "b='q' where "),  # pkey= naming no column: an empty WHERE (§3.5)
        ("D", ""),  # the same for a DELETE
        ("I", "(a,b) values ('1')"),
        ("U", "a=1 where id='1'"),  # values are always quoted
    ],
)
def test_undecodable_events_give_none(op, data):
    """What is not one of the three shapes decodes to None (the event goes to quarantine),
    never an exception."""
    assert sql.python_map(op, data) is None


def test_an_update_under_a_custom_key_carries_the_changed_real_key():
    """With pkey=name, changing the real key id is allowed: the WHERE names the custom key,
    the SET list the new id (§3.5)."""
    assert sql.python_map("U", "id='11' where name='n'") == {"name": "n", "id": "11"}
