"""A table captured under the name of a dropped captured table is another table: its capture
begins with a marker event, after every event of the dropped table and before its own, so
that the drain keeps none of the dropped table's rows (cdc._cap_succeed,
triggers/capture/functions/cdc.capture_ddl.sql). With the event trigger on DROP, and without
it (a non-superuser install)."""

from __future__ import annotations

import json

import psycopg
import pytest
from psycopg import sql

from cdc.pg import capture, capture_rules, install
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Queue
from tests.pg.test_install import owned_db  # noqa: F401  (a fixture)

HOSTILE = 'we"ird.t $x$'  # a quote, a dot, a space and a dollar quote in one name
RECREATED = "cdc.recreated"


@pytest.fixture
def db(conn: psycopg.Connection) -> psycopg.Connection:
    """A database with queue q and schema s."""
    Queue(conn, "q").create()
    conn.execute("create schema s")
    return conn


def _table(name: str) -> sql.Composable:
    return sql.Identifier("s", name)


def _create(conn: psycopg.Connection, name: str, rows: str = "") -> int:
    """Creates s.<name> (id int primary key, v text), with rows; returns its OID."""
    conn.execute(sql.SQL("create table {} (id int primary key, v text)").format(_table(name)))
    if rows:
        conn.execute(sql.SQL("insert into {} values " + rows).format(_table(name)))
    return conn.execute("select %s::regclass::oid", (f"s.{_quoted(name)}",)).fetchone()[0]


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _events(conn: psycopg.Connection) -> list[tuple[str, str, str | None]]:
    """(op or ev_type, ev_data, ev_extra1) of every event, in ev_id order."""
    rows = conn.execute("select ev_type, ev_data, ev_extra1 from cdc.event order by ev_id")
    return [(json.loads(t)["op"] if t.startswith("{") else t, d, e) for t, d, e in rows.fetchall()]


def _marker(name: str, *dropped: int) -> tuple[str, str, str]:
    data = json.dumps({"table": f"s.{name}", "dropped": list(dropped)})
    return (RECREATED, data, f"s.{name}")


@pytest.mark.parametrize("bodies", ["on", "off"])
def test_a_table_recreated_under_a_rule_begins_with_the_marker(db, bodies):
    """Dropped while its events wait and created again in the same transaction: the rule
    attaches the new table after the marker, which sits between both tables' events; a name
    with a quote, a dot and a dollar quote reaches the marker as capture events spell it,
    whether the session checks function bodies or not."""
    db.execute(sql.SQL("set check_function_bodies = {}").format(sql.SQL(bodies)))
    capture_rules.add(db, "s.*", CaptureOptions(queue="q"))
    old = _create(db, HOSTILE, "(1, 'old')")
    name = sql.Composed([_table(HOSTILE)])
    db.execute(
        sql.SQL("drop table {0}; create table {0} (id int primary key, v text)").format(name)
    )
    db.execute(sql.SQL("insert into {} values (10, 'new')").format(name))
    assert _events(db) == [
        ("INSERT", '{"id":1,"v":"old"}', f"s.{HOSTILE}"),
        _marker(HOSTILE, old),
        ("INSERT", '{"id":10,"v":"new"}', f"s.{HOSTILE}"),
    ]
    assert db.execute("select count(*) from cdc.capture_dropped").fetchone() == (0,)


def test_a_plain_drop_writes_no_event(db):
    """A captured table dropped and not re-created adds nothing to the queue (its target
    stays as it was); the drop is remembered for a table that takes its name later."""
    capture_rules.add(db, "s.*", CaptureOptions(queue="q"))
    old = _create(db, "t")
    db.execute("drop table s.t")
    assert _events(db) == []
    assert db.execute(
        "select drop_schema, drop_name, drop_table from cdc.capture_dropped"
    ).fetchall() == [("s", "t", old)]
    db.execute("create table s.other (id int primary key)")  # another name: no marker
    assert _events(db) == []


def test_an_explicit_attach_again_asks_for_the_rows_the_new_table_holds(db):
    """A table attached explicitly, dropped, created again and filled before it is attached
    again: the marker, then the snapshot signal for the rows its triggers did not see."""
    old = _create(db, "t")
    capture.attach(db, "s.t", CaptureOptions(queue="q"))
    db.execute("drop table s.t")
    _create(db, "t", "(1, 'before the attach')")
    capture.attach(db, "s.t", CaptureOptions(queue="q"))
    assert _events(db) == [
        _marker("t", old),
        ("cdc.snapshot", '{"table": "s.t"}', "s.t"),
    ]
    capture.attach(db, "s.t", CaptureOptions(queue="q"))  # the same table again: nothing
    assert len(_events(db)) == 2


def test_without_a_superuser_the_next_attach_finds_the_gone_capture(owned_db):  # noqa: F811
    """Installed by a role that is not a superuser: no event trigger sees the DROP, so the
    capture of the dropped table stays behind; the sync that attaches the new table of its
    name removes it (and its generated function) and writes the marker, then the snapshot
    signal."""
    install.install(owned_db)
    with psycopg.connect(owned_db, autocommit=True) as db:
        Queue(db, "q").create()
        db.execute("create schema s")
        capture_rules.add(db, "s.*", CaptureOptions(queue="q"))
        old = _create(db, "t")
        capture_rules.sync(db, "q")
        gone = db.execute("select cap_function from cdc.capture").fetchone()[0]
        db.execute("insert into s.t values (1, 'old')")
        db.execute("drop table s.t")
        _create(db, "t", "(10, 'new')")
        capture_rules.sync(db, "q")
        assert _events(db) == [
            ("INSERT", '{"id":1,"v":"old"}', "s.t"),
            _marker("t", old),
            ("cdc.snapshot", '{"table": "s.t"}', "s.t"),
        ]
        captured = db.execute("select cap_table::regclass::text from cdc.capture").fetchall()
        assert captured == [("s.t",)]
        assert db.execute("select to_regproc(%s)", (f"cdc.{gone}",)).fetchone() == (None,)
