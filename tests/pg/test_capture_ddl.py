"""Schema changes on captured tables never break the application's DML (event triggers)."""

from __future__ import annotations

import threading

import psycopg
import pytest

from cdc.pg import capture
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Queue


@pytest.fixture
def db(conn: psycopg.Connection) -> psycopg.Connection:
    """Queue q and table t(id, a, b) captured in json."""
    Queue(conn, "q").create()
    conn.execute("create table t (id int primary key, a text, b int)")
    capture.attach(conn, "public.t", CaptureOptions(queue="q"))
    return conn


def last_data(conn: psycopg.Connection) -> str:
    return conn.execute("select ev_data from cdc.event order by ev_id desc limit 1").fetchone()[0]


DDL_CASES = [
    (
        "alter table t add column c text",
        "insert into t values (1, 'x', 2, 'c')",
        '{"id":1,"a":"x","b":2,"c":"c"}',
    ),
    ("alter table t drop column a", "insert into t values (1, 2)", '{"id":1,"b":2}'),
    (
        "alter table t rename column a to z",
        "insert into t values (1, 'x', 2)",
        '{"id":1,"z":"x","b":2}',
    ),
    (
        "alter table t alter column b type text",
        "insert into t values (1, 'x', '2')",
        '{"id":1,"a":"x","b":"2"}',
    ),
    (
        "alter table t alter column b type bigint",
        "insert into t values (1, 'x', 2)",
        '{"id":1,"a":"x","b":2}',
    ),
]
DDL_IDS = ["add", "drop", "rename", "retype-to-text", "retype-to-bigint"]


@pytest.mark.parametrize(("ddl", "dml", "expected"), DDL_CASES, ids=DDL_IDS)
def test_dml_right_after_ddl_in_the_same_transaction(db, ddl, dml, expected):
    """Right after ADD / DROP / RENAME COLUMN or a type change, DML works and loses no column."""
    with db.transaction():
        db.execute(ddl)
        db.execute(dml)
    assert last_data(db) == expected
    assert [r["current"] for r in capture.captures(db)] == [True]


def test_update_and_delete_after_ddl(db):
    """UPDATE and DELETE after a committed ALTER TABLE still capture the whole row."""
    db.execute("insert into t values (1, 'x', 2)")
    db.execute("alter table t add column c int default 7")
    db.execute("update t set a = 'y'")
    assert last_data(db) == '{"id":1,"a":"y","b":2,"c":7}'
    db.execute("delete from t")
    assert last_data(db) == '{"id":1,"a":"y","b":2,"c":7}'


def test_dropping_a_column_an_expression_needs_fails_the_alter(conn):
    """A DDL that would break an option expression fails with a clear message; DML goes on."""
    Queue(conn, "q").create()
    conn.execute("create table t (id int primary key, a text, b int)")
    capture.attach(conn, "public.t", CaptureOptions(queue="q", when="b > 0"))
    with pytest.raises(psycopg.Error, match=r"when expression .* no longer fits"):
        conn.execute("alter table t drop column b")
    conn.execute("insert into t values (1, 'x', 2)")
    assert conn.execute("select count(*) from cdc.event").fetchone()[0] == 1


def test_dropping_the_table_forgets_its_capture(db):
    """DROP TABLE removes the capture record and its generated function."""
    db.execute("drop table t")
    assert capture.captures(db) == []
    assert (
        db.execute(
            "select count(*) from pg_proc where pronamespace = 'cdc'::regnamespace"
            " and proname ~ '^_cap_[0-9]'"
        ).fetchone()[0]
        == 0
    )


@pytest.fixture
def unguarded(conn: psycopg.Connection) -> psycopg.Connection:
    """As `db`, but attached while no event trigger runs (a non-superuser install)."""
    Queue(conn, "q").create()
    conn.execute("alter event trigger cdc_capture_ddl disable")
    conn.execute("create table t (id int primary key, a text, b int)")
    return conn


@pytest.mark.parametrize("mode", ["row", "statement"])
@pytest.mark.parametrize(("ddl", "dml", "expected"), DDL_CASES, ids=DDL_IDS)
def test_without_event_trigger_the_guard_regenerates_before_dml(
    unguarded, mode, ddl, dml, expected
):
    """Without an event trigger, the first statement after ALTER TABLE regenerates the capture
    function (in its own transaction) before its rows reach it: the DML works, no column lost."""
    db = unguarded
    capture.attach(db, "public.t", CaptureOptions(queue="q", mode=mode))
    guards = db.execute(
        "select count(*) from pg_trigger where tgrelid = 't'::regclass and tgname like '%\\_guard'"
    ).fetchone()[0]
    assert guards == 1
    with db.transaction():
        db.execute(ddl)
        assert [r["current"] for r in capture.captures(db)] == [False]
        db.execute(dml)
    assert last_data(db) == expected
    assert [r["current"] for r in capture.captures(db)] == [True]
    db.execute("update t set id = 2")
    db.execute("delete from t")
    assert db.execute("select count(*) from cdc.event").fetchone()[0] == 4


def test_with_the_event_trigger_there_is_no_guard(db):
    """The per-statement guard exists only where no event trigger keeps capture current."""
    count = db.execute(
        "select count(*) from pg_trigger where tgrelid = 't'::regclass and tgname like '%\\_guard'"
    ).fetchone()[0]
    assert count == 0


def test_guarded_regeneration_from_two_sessions(unguarded, connect):
    """Two sessions whose first statements after an ALTER TABLE race: both succeed, and the
    capture is regenerated once."""
    db = unguarded
    capture.attach(db, "public.t", CaptureOptions(queue="q"))
    db.execute("alter table t drop column a")
    other = connect()
    with db.transaction():
        db.execute("insert into t values (1, 2)")
        created = db.execute("select cap_created from cdc.capture").fetchone()[0]
        # the other session waits on the advisory lock until this transaction commits
        thread_error: list[BaseException] = []

        def insert_other() -> None:
            try:
                other.execute("insert into t values (2, 3)")
            except psycopg.Error as exc:
                thread_error.append(exc)

        worker = threading.Thread(target=insert_other)
        worker.start()
        worker.join(0.5)
    worker.join(10)
    assert not thread_error
    assert db.execute("select cap_created from cdc.capture").fetchone()[0] == created
    rows = db.execute("select ev_data from cdc.event order by ev_id").fetchall()
    assert rows == [('{"id":1,"b":2}',), ('{"id":2,"b":3}',)]
