"""A source table's schema changing under its Delta table (cdc.targets.schema_drift): retyped,
dropped, added and re-keyed columns, names Delta cannot hold; real PostgreSQL, Spark, Delta.
Renames and the type_changes option: tests/e2e/test_schema_changes.py."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from cdc.ops import status
from cdc.pg import capture
from cdc.pg.capture import CaptureOptions
from cdc.pg.pgtypes import Column
from cdc.pg.queue import Consumer, Queue
from cdc.pipeline.drain import Drain
from cdc.targets import schema_drift
from tests.support import drainkit

# ---------------------------------------------------------------- pure parts


@pytest.mark.parametrize(
    ("old", "new", "ok"),
    [
        ("int", "long", True),
        ("short", "int", True),
        ("long", "int", False),
        ("int", "double", True),
        ("long", "double", False),  # not every bigint is a double
        ("int", "decimal(10,0)", True),
        ("int", "decimal(12,4)", False),  # 8 integer digits: not every int fits
        ("int", "decimal(14,4)", True),
        ("decimal(10,2)", "decimal(12,4)", True),
        ("decimal(10,2)", "decimal(11,4)", False),
        ("decimal(10,2)", "decimal(10,1)", False),
        ("float", "double", True),
        ("double", "float", False),
        ("date", "timestamp_ntz", True),
        ("date", "timestamp", False),
        ("int", "string", False),
        ("string", "int", False),
    ],
)
def test_which_retypes_widen(old, new, ok):
    """Only Delta's lossless type widenings are applied to a column; the rest keep it."""
    assert schema_drift.widens(old, new) is ok


def test_delta_type_names_in_pgtypes_words():
    """Delta's simple type strings compare with cdc.pg.pgtypes' names."""
    assert schema_drift.canonical("array<bigint>") == "array<long>"
    assert schema_drift.canonical("smallint") == "short"


def test_case_clash_names_both_columns():
    """Two columns equal but for case are found, others not."""
    cols = [Column(n, "text", "string", False) for n in ("id", "Name", "name", "x")]
    assert schema_drift.case_clash(cols) == ["Name", "name"]
    assert schema_drift.case_clash(cols[:2]) == []


# ---------------------------------------------------------------- with a database


def drain_stats(dsn: str, root: Path, spark, tables: list[dict[str, str]]):
    """One drain run until caught up; the stats of its batches."""
    seen = []
    pipe = drainkit.pipeline(dsn, str(root), tables)
    with Drain(pipe, spark) as drain:
        drain.run(on_batch=seen.append)
    return pipe, seen


def delta(spark, root: Path, table: str):
    return spark.read.format("delta").load(str(root / table))


def quarantined(spark, root: Path) -> list[tuple[str, str]]:
    path = root / "_quarantine"
    if not path.exists():
        return []
    return sorted((r.ev_extra1, r.reason) for r in delta(spark, root, "_quarantine").collect())


def setup_queue(conn: psycopg.Connection) -> None:
    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()


@pytest.mark.spark
@pytest.mark.parametrize("fmt", ["json", "sql"])
def test_a_retyped_column_widens_or_its_values_are_checked(conn, dsn, spark, tmp_path, fmt):
    """numeric(10,2) -> numeric(12,4) and int -> bigint widen the Delta column (1.2345 and 5e9
    arrive exactly); int -> text keeps the Delta int column: '42' is written, 'abc' goes to
    quarantine with the reason (before: 1.23 was stored, and 'abc' failed every MERGE)."""
    setup_queue(conn)
    conn.execute("create table r (id int primary key, p numeric(10,2), x int, y int)")
    capture.attach(conn, "public.r", CaptureOptions(queue="q", format=fmt))
    conn.execute("insert into r values (1, 1.25, 1, 1)")
    tables = [{"source": "public.r", "target": "r"}]
    drain_stats(dsn, tmp_path, spark, tables)
    conn.execute("alter table r alter p type numeric(12,4), alter x type bigint")
    conn.execute("alter table r alter y type text")
    conn.execute("insert into r values (2, 1.2345, 5000000000, '42'), (3, 0.0001, 7, 'abc')")
    conn.execute("update r set p = 2.5 where id = 1")
    drain_stats(dsn, tmp_path, spark, tables)
    frame = delta(spark, tmp_path, "r")
    types = {f.name: f.dataType.simpleString() for f in frame.schema.fields}
    assert types == {"id": "int", "p": "decimal(12,4)", "x": "bigint", "y": "int"}
    rows = sorted(tuple(r) for r in frame.collect())
    assert [(r[0], str(r[1]), r[2], r[3]) for r in rows] == [
        (1, "2.5000", 1, 1),
        (2, "1.2345", 5000000000, 42),
    ]
    assert quarantined(spark, tmp_path) == [
        (
            "public.r",
            "column y is int in Delta but string in the source, and this value does not fit"
            " the Delta column: resync the table",
        )
    ]


@pytest.mark.spark
@pytest.mark.parametrize("fmt", ["json", "urlenc", "sql"])
def test_an_event_of_a_dropped_column_is_quarantined(conn, dsn, spark, tmp_path, fmt):
    """A column dropped while an INSERT naming it waits in the queue: the INSERT goes to
    quarantine saying so (it landed with the column NULL before), later events apply; the
    Delta column stays, NULL in the rows inserted after (a rename is followed instead:
    tests/e2e/test_schema_changes.py)."""
    setup_queue(conn)
    conn.execute("create table n (id int primary key, a text, v int)")
    capture.attach(conn, "public.n", CaptureOptions(queue="q", format=fmt))
    conn.execute("insert into n values (1, 'one', 1)")
    tables = [{"source": "public.n", "target": "n"}]
    drain_stats(dsn, tmp_path, spark, tables)
    conn.execute("insert into n values (2, 'two', 2)")
    conn.execute("alter table n drop column a")
    conn.execute("insert into n values (3, 3)")
    drain_stats(dsn, tmp_path, spark, tables)
    rows = sorted(tuple(r) for r in delta(spark, tmp_path, "n").select("id", "a", "v").collect())
    assert rows == [(1, "one", 1), (3, None, 3)]
    assert quarantined(spark, tmp_path) == [
        (
            "public.n",
            "column(s) a not in the source table (renamed or dropped while the event waited in"
            " the queue): resync the table",
        )
    ]


@pytest.mark.spark
def test_a_column_added_with_a_default_is_backfilled(conn, dsn, spark, tmp_path):
    """ADD COLUMN status text NOT NULL DEFAULT 'new': the Delta rows that predate it get
    'new' (they stayed NULL, and sql UPDATEs kept them NULL), so do rows inserted before the
    ALTER in the same batch; rows inserted after keep their own value."""
    setup_queue(conn)
    conn.execute("create table s (id int primary key, v text)")
    capture.attach(conn, "public.s", CaptureOptions(queue="q", format="sql"))
    conn.execute("insert into s values (1, 'a'), (2, 'b')")
    tables = [{"source": "public.s", "target": "s"}]
    drain_stats(dsn, tmp_path, spark, tables)
    conn.execute("insert into s values (3, 'c')")
    conn.execute("alter table s add column status text not null default 'new'")
    conn.execute("insert into s values (4, 'd', 'done')")
    conn.execute("update s set v = 'A' where id = 1")
    drain_stats(dsn, tmp_path, spark, tables)
    got = sorted(tuple(r) for r in delta(spark, tmp_path, "s").collect())
    assert got == sorted(conn.execute("select id, v, status from s").fetchall())
    assert got[0] == (1, "A", "new")


@pytest.mark.spark
def test_a_column_added_with_a_volatile_default_asks_for_a_resync(conn, dsn, spark, tmp_path):
    """ADD COLUMN ... DEFAULT clock_timestamp() gives each existing row its own value, which
    no event carries: at its next events the table is marked failing with a reason that says
    to resync it, and the other table of the pipeline is applied."""
    setup_queue(conn)
    conn.execute("create table v (id int primary key)")
    conn.execute("create table w (id int primary key)")
    for t in ("v", "w"):
        capture.attach(conn, f"public.{t}", CaptureOptions(queue="q", format="json"))
        conn.execute(f"insert into {t} values (1)")
    tables = [{"source": "public.v", "target": "v"}, {"source": "public.w", "target": "w"}]
    drain_stats(dsn, tmp_path, spark, tables)
    conn.execute("alter table v add column at timestamptz default clock_timestamp()")
    conn.execute("insert into v (id) values (2)")  # a table without events is not looked at
    conn.execute("insert into w values (2)")
    pipe, _ = drain_stats(dsn, tmp_path, spark, tables)
    state = {t.target: t for t in status.collect(pipe).tables}
    assert state["v"].failing and "volatile default" in state["v"].failing_reason
    assert "resync" in state["v"].failing_reason
    assert not state["w"].failing
    assert sorted(r.id for r in delta(spark, tmp_path, "w").collect()) == [1, 2]


@pytest.mark.spark
def test_columns_equal_but_for_case_fail_their_table_only(conn, dsn, spark, tmp_path):
    """ "Name" and name: the table is marked failing, saying why and what to do; the other
    table goes on."""
    setup_queue(conn)
    conn.execute('create table c (id int primary key, "Name" text, name text)')
    conn.execute("create table ok (id int primary key)")
    for t in ("c", "ok"):
        capture.attach(conn, f"public.{t}", CaptureOptions(queue="q", format="json"))
        conn.execute(f"insert into {t} (id) values (1)")
    tables = [{"source": "public.c", "target": "c"}, {"source": "public.ok", "target": "ok"}]
    pipe, _ = drain_stats(dsn, tmp_path, spark, tables)
    state = {t.target: t for t in status.collect(pipe).tables}
    reason = state["c"].failing_reason
    assert "columns Name, name differ only in case" in reason and "--ignore" in reason
    assert [r.id for r in delta(spark, tmp_path, "ok").collect()] == [1]


@pytest.mark.spark
@pytest.mark.parametrize("fmt", ["json", "sql"])
def test_a_key_moved_to_another_column(conn, dsn, spark, tmp_path, fmt):
    """The primary key moved from a to b, then a dropped: the Delta column a becomes
    nullable (every MERGE failed on its NOT NULL before), rows are matched by b."""
    setup_queue(conn)
    conn.execute("create table k (a int primary key, b int not null unique, v text)")
    capture.attach(conn, "public.k", CaptureOptions(queue="q", format=fmt))
    conn.execute("insert into k values (1, 10, 'x'), (2, 20, 'y')")
    tables = [{"source": "public.k", "target": "k"}]
    drain_stats(dsn, tmp_path, spark, tables)
    conn.execute("alter table k drop constraint k_pkey, add primary key (b)")
    conn.execute("alter table k drop column a")
    conn.execute("insert into k values (30, 'z')")
    conn.execute("update k set v = 'X' where b = 10")
    conn.execute("delete from k where b = 20")
    _, stats = drain_stats(dsn, tmp_path, spark, tables)
    assert not any(s.failing for s in stats)
    frame = delta(spark, tmp_path, "k")
    assert {f.name: f.nullable for f in frame.schema.fields}["a"] is True
    assert sorted(tuple(r) for r in frame.select("b", "v").collect()) == [(10, "X"), (30, "z")]


@pytest.mark.spark
def test_a_key_moved_to_a_column_delta_cannot_match_by(conn, dsn, spark, tmp_path):
    """The key moved to a column the Delta rows do not hold yet (added in the source): the
    table is marked failing, asking for a resync."""
    setup_queue(conn)
    conn.execute("create table m (a int primary key, v text)")
    capture.attach(conn, "public.m", CaptureOptions(queue="q", format="json"))
    conn.execute("insert into m values (1, 'x')")
    tables = [{"source": "public.m", "target": "m"}]
    drain_stats(dsn, tmp_path, spark, tables)
    conn.execute("alter table m add column b int")
    conn.execute("update m set b = a * 10")
    conn.execute("alter table m drop constraint m_pkey, add primary key (b)")
    pipe, _ = drain_stats(dsn, tmp_path, spark, tables)
    reason = {t.target: t for t in status.collect(pipe).tables}["m"].failing_reason
    assert "primary key changed from (a) to (b)" in reason and "resync" in reason
