"""Capture triggers: attach / detach, options, and where we deliberately differ from PgQ."""

from __future__ import annotations

import json

import psycopg
import pytest

from cdc import cli, errors
from cdc.pg import capture
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Queue

TABLE = "create table public.t (id int primary key, name text, qty int)"


@pytest.fixture
def db(conn: psycopg.Connection) -> psycopg.Connection:
    """A database with queue q and table public.t(id, name, qty)."""
    Queue(conn, "q").create()
    conn.execute(TABLE)
    return conn


def events(conn: psycopg.Connection) -> list[tuple[str, str, str | None, str | None]]:
    """Every event so far: ev_type, ev_data, ev_extra1, ev_extra2."""
    return conn.execute(
        "select ev_type, ev_data, ev_extra1, ev_extra2 from cdc.event order by ev_id"
    ).fetchall()


def triggers_on(conn: psycopg.Connection, table: str = "public.t") -> list[str]:
    rows = conn.execute(
        "select tgname from pg_trigger where tgrelid = %s::regclass and not tgisinternal"
        " order by 1",
        (table,),
    )
    return [r[0] for r in rows]


def test_attach_writes_events_for_each_operation(db):
    """INSERT, UPDATE, DELETE and TRUNCATE each write an event in PgQ's json format."""
    capture.attach(db, "public.t", CaptureOptions(queue="q"))
    db.execute("insert into t values (1, 'a', 2)")
    db.execute("update t set qty = 3")
    db.execute("delete from t")
    db.execute("truncate t")
    ev = events(db)
    assert [json.loads(e[0])["op"] for e in ev] == ["INSERT", "UPDATE", "DELETE", "TRUNCATE"]
    assert ev[0][1] == '{"id":1,"name":"a","qty":2}'
    assert ev[1][1] == '{"id":1,"name":"a","qty":3}'
    assert ev[3][1] == "{}"
    assert {e[2] for e in ev} == {"public.t"}


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        (
            "json",
            [
                (
                    '{"op":"DELETE","table":["public","t"],"pkey":["id"]}',
                    '{"id":1,"name":"a","qty":2}',
                ),
                (
                    '{"op":"INSERT","table":["public","t"],"pkey":["id"]}',
                    '{"id":5,"name":"a","qty":2}',
                ),
            ],
        ),
        ("urlenc", [("D:id", "id=1&name=a&qty=2"), ("I:id", "id=5&name=a&qty=2")]),
        ("sql", [("D", "id='1'"), ("I", "(id,name,qty) values ('5','a','2')")]),
    ],
)
def test_primary_key_update_is_a_delete_then_an_insert(db, fmt, expected):
    """A key change, which PgQ refuses, is captured as a delete of the old key then an insert."""
    db.execute("insert into t values (1, 'a', 2)")
    capture.attach(db, "public.t", CaptureOptions(queue="q", format=fmt))
    db.execute("update t set id = 5")
    assert [(e[0], e[1]) for e in events(db)] == expected


def test_table_without_primary_key_is_refused_unless_pkey_given(db):
    """A table without a primary key is refused at attach; with --pkey it is captured."""
    db.execute("create table nokey (a int, b text)")
    with pytest.raises(errors.NoPrimaryKey, match="has no primary key"):
        capture.attach(db, "public.nokey", CaptureOptions(queue="q"))
    assert triggers_on(db, "public.nokey") == []
    capture.attach(db, "public.nokey", CaptureOptions(queue="q", format="urlenc", pkey=("a",)))
    db.execute("insert into nokey values (1, 'x')")
    db.execute("update nokey set b = 'y'")
    assert [(e[0], e[1]) for e in events(db)] == [("I:a", "a=1&b=x"), ("U:a", "a=1&b=y")]


@pytest.mark.parametrize("role", ["replica", "local"])
def test_session_replication_role_silences_capture(db, role):
    """Changes applied with session_replication_role replica or local write no event."""
    capture.attach(db, "public.t", CaptureOptions(queue="q"))
    db.execute(f"set session_replication_role = {role}")
    db.execute("insert into t values (1, 'a', 2)")
    db.execute("set session_replication_role = origin")
    db.execute("insert into t values (2, 'b', 3)")
    assert [json.loads(e[1])["id"] for e in events(db)] == [2]


def test_attach_again_replaces_the_triggers(db):
    """Attaching again with other options replaces the earlier triggers and function."""
    capture.attach(db, "public.t", CaptureOptions(queue="q", format="json"))
    capture.attach(db, "public.t", CaptureOptions(queue="q", format="sql", ignore=("qty",)))
    assert triggers_on(db) == ["cdc_capture_1", "cdc_capture_1_truncate"]
    db.execute("insert into t values (1, 'a', 2)")
    assert [(e[0], e[1]) for e in events(db)] == [("I", "(id,name) values ('1','a')")]
    rows = db.execute("select queue_name, format from cdc.get_capture_info()").fetchall()
    assert rows == [("q", "sql")]


@pytest.mark.parametrize(
    ("opts", "exc", "fragment"),
    [
        (CaptureOptions(queue="q", when="nosuch > 1"), errors.InvalidExpression, "unknown column"),
        (CaptureOptions(queue="q", when="(select 1) = 1"), errors.InvalidExpression, "subqueries"),
        (
            CaptureOptions(queue="q", when="true; drop table t"),
            errors.InvalidExpression,
            "one expression",
        ),
        (CaptureOptions(queue="q", when="qty + 1"), errors.InvalidExpression, "must be boolean"),
        (CaptureOptions(queue="q", when="x.qty > 1"), errors.InvalidExpression, "not allowed"),
        (CaptureOptions(queue="q", extra={1: "name ||| 1"}), errors.InvalidExpression, "extra1"),
        (CaptureOptions(queue="q", ignore=("nope",)), errors.ConfigError, "nope"),
        (CaptureOptions(queue="q", pkey=("nope",)), errors.ConfigError, "nope"),
        (CaptureOptions(queue="nosuch"), errors.QueueNotFound, "nosuch"),
    ],
)
def test_bad_options_are_clear_errors_and_leave_nothing(db, opts, exc, fragment):
    """A bad option is a typed error naming the problem; no trigger or function is left."""
    with pytest.raises(exc, match=fragment):
        capture.attach(db, "public.t", opts)
    assert triggers_on(db) == []
    assert db.execute("select count(*) from cdc.capture").fetchone()[0] == 0
    assert (
        db.execute(
            "select count(*) from pg_proc"
            " where pronamespace = 'cdc'::regnamespace and proname ~ '^_cap_[0-9]'"
        ).fetchone()[0]
        == 0
    )
    db.execute("insert into t values (1, 'a', 2)")  # the table still works


def test_when_extra_and_ev_type_expressions(db):
    """when skips events; extra and ev_type expressions use the row (OLD on DELETE)."""
    opts = CaptureOptions(
        queue="q",
        format="urlenc",
        when="qty > 0",
        extra={3: "upper(name)", 4: "OLD.qty"},
        ev_type="'custom:' || id",
    )
    capture.attach(db, "public.t", opts)
    db.execute("insert into t values (1, 'a', 0), (2, 'b', 5)")
    db.execute("update t set qty = 6 where id = 2")
    db.execute("delete from t where id = 2")
    rows = db.execute(
        "select ev_type, ev_extra3, ev_extra4 from cdc.event order by ev_id"
    ).fetchall()
    assert rows == [("custom:2", "B", None), ("custom:2", "B", "5"), ("custom:2", "B", "6")]


def test_skip_queues_the_event_and_skips_the_change(db):
    """With skip, the event is queued and the row change does not happen."""
    capture.attach(db, "public.t", CaptureOptions(queue="q", skip=True))
    db.execute("insert into t values (1, 'a', 2)")
    assert db.execute("select count(*) from t").fetchone()[0] == 0
    assert len(events(db)) == 1


def test_deny_refuses_changes_and_queues_nothing(db):
    """With deny, every change to the table is refused with a clear error."""
    capture.attach(db, "public.t", CaptureOptions(queue="q", deny=True))
    with pytest.raises(psycopg.Error, match="denied"):
        db.execute("insert into t values (1, 'a', 2)")
    assert events(db) == []


def test_detach_removes_triggers_and_function(db):
    """detach leaves the table as it was; detaching again is a typed error."""
    capture.attach(db, "public.t", CaptureOptions(queue="q"))
    assert capture.detach(db, "public.t") == 1
    assert triggers_on(db) == []
    db.execute("insert into t values (1, 'a', 2)")
    assert events(db) == []
    with pytest.raises(errors.NotCaptured):
        capture.detach(db, "public.t")


def test_print_runs_nothing(db):
    """generated_sql shows the DDL without running it."""
    text = capture.generated_sql(db, "public.t", CaptureOptions(queue="q", format="sql"))
    assert "create trigger cdc_capture_1 after insert or update or delete on public.t" in text
    assert triggers_on(db) == []


def test_added_column_makes_the_trigger_stale_until_attached_again(db):
    """Without the event trigger (no superuser at install), a changed table is reported stale
    until attached again."""
    capture.attach(db, "public.t", CaptureOptions(queue="q"))
    db.execute("alter event trigger cdc_capture_ddl disable")
    db.execute("alter table t add column note text")
    assert [r["current"] for r in capture.captures(db)] == [False]
    capture.attach(db, "public.t", CaptureOptions(queue="q"))
    assert [r["current"] for r in capture.captures(db)] == [True]
    db.execute("insert into t values (1, 'a', 2, 'n')")
    assert events(db)[-1][1] == '{"id":1,"name":"a","qty":2,"note":"n"}'


def test_cli_attach_triggers_detach(db, dsn, capsys):
    """The CLI attaches, lists (exit 0 when current) and detaches."""
    assert cli.main(["attach", "public.t", "--queue", "q", "--format", "urlenc", "--dsn", dsn]) == 0
    assert cli.main(["triggers", "--dsn", dsn]) == 0
    out = capsys.readouterr().out
    assert "public.t" in out and "urlenc" in out and "current" in out
    assert cli.main(["attach", "public.t", "--queue", "q", "--when", "nosuch", "--dsn", dsn]) == 1
    assert "unknown column" in capsys.readouterr().err
    assert cli.main(["detach", "public.t", "--dsn", dsn]) == 0
    assert triggers_on(db) == []


STATEMENT_OPTIONS = [
    {},
    {"ignore": ("qty",)},
    {"backup": True},
    {"when": "qty > 1"},
    {"extra": {3: "name", 4: "qty * 2"}, "ev_type": "'t:' || id"},
    {"pkey": ("name",)},
]


@pytest.mark.parametrize("fmt", ["json", "urlenc", "sql"])
@pytest.mark.parametrize("extra", STATEMENT_OPTIONS, ids=lambda o: ",".join(o) or "none")
def test_statement_mode_gives_the_same_events_as_row_mode(db, fmt, extra):
    """Statement mode (transition tables) writes row mode's events, in the same order."""
    db.execute("create table s (like t including all)")
    capture.attach(db, "public.t", CaptureOptions(queue="q", format=fmt, **extra))
    capture.attach(db, "public.s", CaptureOptions(queue="q", format=fmt, mode="statement", **extra))
    for table in ("t", "s"):
        db.execute(f"insert into {table} select g, 'n' || g, g % 3 from generate_series(1, 8) g")
        db.execute(f"update {table} set name = name || 'x' where id % 2 = 0")
        db.execute(f"update {table} set qty = qty + 1 where id < 4")
        db.execute(f"update {table} set id = id + 100 where id in (5, 6)")
        db.execute(f"update {table} set qty = qty")
        db.execute(f"delete from {table} where id > 3 and id < 100")
        db.execute(f"truncate {table}")
    rows = db.execute(
        "select ev_type, ev_data, ev_extra2, ev_extra3, ev_extra4 from cdc.event"
        " where ev_extra1 = 'public.t' order by ev_id"
    ).fetchall()
    stmt = db.execute(
        "select replace(ev_type, '\"s\"', '\"t\"'), ev_data, ev_extra2, ev_extra3, ev_extra4"
        " from cdc.event where ev_extra1 = 'public.s' order by ev_id"
    ).fetchall()
    assert len(rows) > 10
    assert stmt == rows


def test_statement_mode_refuses_row_only_options(db):
    """skip / deny and NEW. / OLD. expressions need row mode: a clear error, nothing attached."""
    with pytest.raises(errors.ConfigError, match="mode 'row'"):
        CaptureOptions(queue="q", mode="statement", skip=True)
    with pytest.raises(errors.InvalidExpression, match="mode 'row'"):
        capture.attach(
            db, "public.t", CaptureOptions(queue="q", mode="statement", when="OLD.qty > 1")
        )
    assert triggers_on(db) == []


@pytest.mark.parametrize("fmt", ["json", "urlenc", "sql"])
@pytest.mark.parametrize("mode", ["row", "statement"])
def test_a_key_whose_type_has_a_cast_to_text_is_captured(conn, fmt, mode):
    """A key column of a type with its own cast to text (compared as text in the generated
    key-change test) attaches and captures a key change as delete then insert, also where the
    session does not check function bodies (a syntax error would surface only at the DML)."""
    conn.execute("set check_function_bodies = off")
    Queue(conn, "q").create()
    conn.execute(
        "create type tag as enum ('a', 'b', 'c');"
        " create function tag_text(tag) returns text language sql immutable"
        " as $$ select 'cast:' || $1::name $$;"
        " create cast (tag as text) with function tag_text(tag);"
        " create table tagged (k tag primary key, v int)"
    )
    conn.execute("insert into tagged values ('a', 1)")
    capture.attach(conn, "public.tagged", CaptureOptions(queue="q", format=fmt, mode=mode))
    conn.execute("update tagged set k = 'b'")
    conn.execute("update tagged set v = 2")
    ops = [e[0] for e in events(conn)]
    assert len(ops) == 3
    payloads = " ".join(e[1] for e in events(conn))
    assert "cast:" not in payloads  # the type's output, as PgQ writes it
