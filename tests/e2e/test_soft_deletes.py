"""Mirror targets that keep deleted rows (``deletes = "soft"``, cdc.targets.mirror): a delete
marks the row (``__deleted`` true, ``__deleted_at`` the source time of the delete, the
deleting transaction's ``now()``), a later insert of the key revives it, a TRUNCATE marks
every row at its time; on each route (drain.engine arrow: the driver's fold and delta-rs'
MERGE; spark; arrow+spark: the driver's fold, Spark's MERGE), across batches and within one.
``cdc verify`` compares the unmarked rows, ``cdc maintain --purge-deleted-older-than`` deletes
the old marked ones, quarantine replay marks what it deletes, a snapshot and ``cdc resync``
write unmarked rows and keep the marked ones, a drain killed between the table commits of a
batch and run again applies each change once, and a source column named as a soft-delete
column is refused; an existing target given soft deletes gets the columns, its rows
unmarked. Real PostgreSQL, Spark and Delta."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest
from pyspark.sql import functions as F

from cdc.config import Pipeline
from cdc.errors import ConfigError
from cdc.ops import maintain, status
from cdc.pg import capture
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Queue
from cdc.pipeline import replay, resync, snapshot, verify
from cdc.pipeline.drain import Drain
from tests.support import drainkit

pytestmark = pytest.mark.spark

ENGINES = ["arrow", "spark", "arrow+spark"]
SOFT = {"source": "public.a", "target": "a", "deletes": "soft"}
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _micros(at: dt.datetime) -> int:
    return (at - EPOCH) // dt.timedelta(microseconds=1)


def _queue(conn: psycopg.Connection, *tables: str, fmt: str = "json") -> None:
    """Queue q, consumer delta, and each table (id int key, v text, n int) captured."""
    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()
    for table in tables:
        conn.execute(f"create table {table} (id int primary key, v text, n int)")
        capture.attach(conn, f"public.{table}", CaptureOptions(queue="q", format=fmt))


def _pipeline(dsn: str, root: Path, engine: str | None, tables: list[dict] | None = None):
    pipe = drainkit.pipeline(dsn, str(root), tables or [SOFT])
    return replace(pipe, drain=replace(pipe.drain, engine=engine))


def _tx(conn: psycopg.Connection, *statements: str) -> int:
    """Runs the statements in one transaction; its now() (its events' ev_time), in
    microseconds since 1970."""
    with conn.transaction():
        for statement in statements:
            conn.execute(statement)
        return _micros(conn.execute("select now()").fetchone()[0])


def _drain(pipe: Pipeline, spark) -> list[dict]:
    """One drain; the route each batch's commit of the target records (cdc.decode,
    cdc.write), for the batches that wrote it."""
    from deltalake import DeltaTable

    with Drain(pipe, spark) as drain:
        before = _version(pipe)
        drain.run()
    if _version(pipe) == before:
        return []
    history = DeltaTable(pipe.location("a")).history()
    return [
        json.loads(h["userMetadata"])
        for h in history
        if h["version"] > before and h.get("userMetadata")
    ]


def _version(pipe: Pipeline) -> int:
    from deltalake import DeltaTable

    location = pipe.location("a")
    return DeltaTable(location).version() if DeltaTable.is_deltatable(location) else -1


def _target(spark, location: str) -> dict[int, tuple]:
    """id -> (v, n, __deleted, __deleted_at in microseconds), one row per key."""
    frame = spark.read.format("delta").load(location)
    at = F.unix_micros(F.col("__deleted_at")).alias("at")
    rows = [tuple(r) for r in frame.select("id", "v", "n", "__deleted", at).collect()]
    assert len({r[0] for r in rows}) == len(rows), "one row per key"
    return {r[0]: r[1:] for r in rows}


def _live(conn: psycopg.Connection, table: str = "a") -> dict[int, tuple]:
    """The source's rows as the target holds them unmarked."""
    rows = conn.execute(f"select id, v, n from {table}").fetchall()
    return {r[0]: (r[1], r[2], False, None) for r in rows}


def _written_by(routes: list[dict], engine: str) -> None:
    """Each batch's commit was written on the engine's route (drain.engine)."""
    want = {"arrow": "arrow", "spark": "spark", "arrow+spark": "spark"}[engine]
    assert routes and all(r["cdc.write"] == want for r in routes), routes


@pytest.mark.parametrize("engine", ENGINES)
def test_deletes_are_marked_and_inserts_revive(conn, dsn, spark, tmp_path, engine):
    """Across batches and within one: a delete marks the row with its values and the
    delete's time; a delete then an insert of a key revives it; an insert then a delete of
    a new key keeps it marked; an insert and delete within one transaction leaves nothing; a
    later insert of a marked key revives it with the new row, an update of another marks
    nothing; verify passes with the marked rows present."""
    _queue(conn, "a")
    pipe = _pipeline(dsn, tmp_path, engine)
    conn.execute("insert into a select g, 'v' || g, g from generate_series(1, 6) g")
    _written_by(_drain(pipe, spark), engine)  # appended: the target holds none of the keys
    assert _target(spark, pipe.location("a")) == _live(conn)

    deleted_1 = _tx(conn, "delete from a where id = 1")
    _tx(conn, "update a set v = 'u2' where id = 2")
    _tx(conn, "delete from a where id = 3")
    _tx(conn, "insert into a values (3, 'back', 33)")
    _tx(conn, "insert into a values (7, 'seven', 7)")
    _tx(conn, "update a set n = 77 where id = 7")
    deleted_7 = _tx(conn, "delete from a where id = 7")
    _tx(conn, "insert into a values (8, 'transient', 8)", "delete from a where id = 8")
    _written_by(_drain(pipe, spark), engine)
    expected = {
        **_live(conn),
        1: ("v1", 1, True, deleted_1),
        7: ("seven", 77, True, deleted_7),
    }
    assert _target(spark, pipe.location("a")) == expected

    _tx(conn, "insert into a values (1, 'again', 100)")
    deleted_2 = _tx(conn, "delete from a where id = 2")
    _tx(conn, "update a set v = 'u4' where id = 4")
    _written_by(_drain(pipe, spark), engine)
    expected = {**_live(conn), 2: ("u2", 2, True, deleted_2), 7: expected[7]}
    assert _target(spark, pipe.location("a")) == expected

    # a marked key deleted again after a row lived in it within one transaction: the row's
    # last values and time, as two batches would leave it
    _tx(conn, "delete from a where id = 5")
    again_5 = _tx(conn, "insert into a values (5, 'brief', 55)", "delete from a where id = 5")
    _written_by(_drain(pipe, spark), engine)
    expected[5] = ("brief", 55, True, again_5)
    assert _target(spark, pipe.location("a")) == expected

    [verdict] = verify.Verifier(pipe, spark).run(["public.a"])
    assert verdict.state == verify.OK, verdict.as_dict()
    assert verdict.delta_rows == len(_live(conn)) == 4


@pytest.mark.parametrize("engine", ENGINES)
def test_a_truncate_marks_every_row_at_its_time(conn, dsn, spark, tmp_path, engine):
    """A TRUNCATE marks the rows not marked yet at its time (a row marked before keeps its
    own), then what follows it in the batch applies: a re-inserted key revives, a new key is
    inserted, one inserted and deleted after it is kept marked. The part is Spark's on every
    route (the Arrow decoder leaves a TRUNCATE to it)."""
    _queue(conn, "a")
    pipe = _pipeline(dsn, tmp_path, engine)
    conn.execute("insert into a select g, 'v' || g, g from generate_series(1, 4) g")
    _drain(pipe, spark)
    deleted_4 = _tx(conn, "delete from a where id = 4")
    _drain(pipe, spark)
    truncated = _tx(conn, "truncate a")
    _tx(conn, "insert into a values (2, 'new', 22), (9, 'nine', 9), (10, 'ten', 10)")
    deleted_10 = _tx(conn, "delete from a where id = 10")
    routes = _drain(pipe, spark)
    assert [r["cdc.write"] for r in routes] == ["spark"], routes
    assert _target(spark, pipe.location("a")) == {
        1: ("v1", 1, True, truncated),
        2: ("new", 22, False, None),
        3: ("v3", 3, True, truncated),
        4: ("v4", 4, True, deleted_4),
        9: ("nine", 9, False, None),
        10: ("ten", 10, True, deleted_10),
    }
    [verdict] = verify.Verifier(pipe, spark).run(["public.a"])
    assert verdict.state == verify.OK, verdict.as_dict()


def _backdate(conn: psycopg.Connection, statement: str, days: int) -> int:
    """Runs the statement in its own transaction, then moves its events' ev_time back by
    days in the queue (as if it had been committed then); that time, in microseconds."""
    with conn.transaction():
        conn.execute(statement)
        txid = conn.execute("select txid_current()").fetchone()[0]
    conn.execute(
        "update cdc.event set ev_time = ev_time - make_interval(days => %s) where ev_txid = %s",
        (days, txid),
    )
    at = conn.execute("select min(ev_time) from cdc.event where ev_txid = %s", (txid,))
    return _micros(at.fetchone()[0])


@pytest.mark.parametrize("engine", ["arrow", "spark"])
def test_maintain_purges_only_the_rows_marked_longer_ago(conn, dsn, spark, tmp_path, engine):
    """--purge-deleted-older-than 30d deletes the rows marked 40 days ago, keeps those marked
    5 days ago and now, and the unmarked ones; it counts what it purged per target, and a
    pipeline without such a target is told so."""
    _queue(conn, "a", "b")
    tables = [SOFT, {"source": "public.b", "target": "b"}]
    pipe = _pipeline(dsn, tmp_path, engine, tables)
    conn.execute("insert into a select g, 'v' || g, g from generate_series(1, 6) g")
    conn.execute("insert into b select g, 'v' || g, g from generate_series(1, 3) g")
    _drain(pipe, spark)
    _backdate(conn, "delete from a where id in (1, 2)", 40)
    five_days = _backdate(conn, "delete from a where id = 3", 5)
    now = _tx(conn, "delete from a where id = 4")
    _drain(pipe, spark)
    assert maintain.parse_age("30d") == dt.timedelta(days=30)
    # the purge alone (OPTIMIZE and VACUUM are tests/e2e/test_maintain.py's)
    done = maintain.maintain(
        pipe, spark, optimize=False, vacuum=False, purge_older_than=dt.timedelta(days=30)
    )
    assert {m.target: m.purged for m in done} == {"a": 2, "b": None}  # no quarantine yet
    assert _target(spark, pipe.location("a")) == {
        **_live(conn),
        3: ("v3", 3, True, five_days),
        4: ("v4", 4, True, now),
    }
    done = maintain.maintain(
        pipe, spark, ["a"], optimize=False, vacuum=False, purge_older_than=dt.timedelta(days=30)
    )
    assert [m.purged for m in done] == [0]
    with pytest.raises(ConfigError, match='deletes = "soft"'):
        maintain.maintain(pipe, spark, ["b"], purge_older_than=dt.timedelta(days=1))
    [verdict] = verify.Verifier(pipe, spark).run(["public.a"])
    assert verdict.state == verify.OK, verdict.as_dict()


def test_a_source_column_named_as_a_soft_delete_column_is_refused(conn, dsn, spark, tmp_path):
    """A source column __deleted, or __deleted_at added later, fails its table (the reason
    names the columns and the fix); the other table goes on; with deletes = "hard" the same
    names are plain columns."""
    _queue(conn, "ok")
    conn.execute("create table c (id int primary key, __deleted boolean)")
    capture.attach(conn, "public.c", CaptureOptions(queue="q", format="json"))
    conn.execute("create table d (id int primary key, v text)")
    capture.attach(conn, "public.d", CaptureOptions(queue="q", format="json"))
    conn.execute("create table h (id int primary key, __deleted_at text)")
    capture.attach(conn, "public.h", CaptureOptions(queue="q", format="json"))
    tables = [
        {"source": "public.c", "target": "c", "deletes": "soft"},
        {"source": "public.d", "target": "d", "deletes": "soft"},
        {"source": "public.h", "target": "h"},
        {"source": "public.ok", "target": "ok", "deletes": "soft"},
    ]
    pipe = _pipeline(dsn, tmp_path, None, tables)
    for table in ("c", "d", "h", "ok"):
        conn.execute(f"insert into {table} (id) values (1)")
    with Drain(pipe, spark) as drain:
        drain.run()
        conn.execute("alter table d add column __deleted_at text")
        conn.execute("insert into d values (2, 'x', 'y')")
        conn.execute("insert into ok (id) values (2)")
        drain.run()
    state = {t.target: t for t in status.collect(pipe).tables}
    for name, column in (("c", "__deleted"), ("d", "__deleted_at")):
        reason = state[name].failing_reason
        assert state[name].failing and f"source column(s) {column} have the names" in reason
        assert 'deletes = "hard"' in reason, reason
    assert not state["ok"].failing and not state["h"].failing
    assert spark.read.format("delta").load(pipe.location("ok")).count() == 2
    assert [tuple(r) for r in spark.read.format("delta").load(pipe.location("h")).collect()] == [
        (1, None)
    ]


@pytest.mark.parametrize("engine", ["arrow", "spark"])
def test_snapshot_and_resync_write_unmarked_rows_and_keep_the_marked(
    conn, dsn, spark, tmp_path, engine
):
    """A snapshot revives a marked key the source holds again and leaves the other marked
    rows; cdc resync keeps the marked rows, replaces the others with the source's, and marks
    a row the source no longer holds at the resync's time (its delete, not applied yet, then
    gives it the delete's own time)."""
    _queue(conn, "a")
    pipe = _pipeline(dsn, tmp_path, engine)
    conn.execute("insert into a select g, 'v' || g, g from generate_series(1, 5) g")
    _drain(pipe, spark)
    deleted_2 = _tx(conn, "delete from a where id = 2")
    _tx(conn, "delete from a where id = 3")
    _drain(pipe, spark)
    _tx(conn, "insert into a values (3, 'back', 30)")  # not drained: the snapshot shows it
    snapshot.Snapshot(pipe, spark, False).run("public.a")
    expected = {**_live(conn), 2: ("v2", 2, True, deleted_2)}
    assert _target(spark, pipe.location("a")) == expected
    _drain(pipe, spark)
    assert _target(spark, pipe.location("a")) == expected

    deleted_5 = _tx(conn, "delete from a where id = 5")  # not drained: the resync's gone row
    started = _micros(dt.datetime.now(dt.UTC))
    resync.resync(pipe, spark, "public.a", progress=False)
    got = _target(spark, pipe.location("a"))
    assert got.pop(5)[:3] == ("v5", 5, True) and got[2] == expected[2]
    assert _target(spark, pipe.location("a"))[5][3] >= started
    assert got == {**_live(conn), 2: expected[2]}
    _drain(pipe, spark)
    assert _target(spark, pipe.location("a")) == {**got, 5: ("v5", 5, True, deleted_5)}
    [verdict] = verify.Verifier(pipe, spark).run(["public.a"])
    assert verdict.state == verify.OK, verdict.as_dict()


def test_an_existing_target_given_soft_deletes_marks_from_then_on(conn, dsn, spark, tmp_path):
    """A hard mirror's entry given deletes = "soft": at the next batch the target gets the two
    columns, its rows unmarked, then marks what is deleted; given "hard" again, it deletes
    and soft deletes come back with every row unmarked."""
    _queue(conn, "a")
    hard = {"source": "public.a", "target": "a"}
    conn.execute("insert into a select g, 'v' || g, g from generate_series(1, 4) g")
    conn.execute("delete from a where id = 4")
    _drain(_pipeline(dsn, tmp_path, None, [hard]), spark)
    deleted_1 = _tx(conn, "delete from a where id = 1")
    _drain(_pipeline(dsn, tmp_path, None, [SOFT]), spark)
    assert _target(spark, str(tmp_path / "a")) == {**_live(conn), 1: ("v1", 1, True, deleted_1)}
    _tx(conn, "delete from a where id = 2")
    conn.execute("insert into a values (5, 'five', 5)")
    _drain(_pipeline(dsn, tmp_path, None, [hard]), spark)
    frame = spark.read.format("delta").load(str(tmp_path / "a"))
    assert sorted(r.id for r in frame.collect()) == [1, 3, 5]
    conn.execute("update a set v = 'u3' where id = 3")  # a batch of the table: it is looked at
    _drain(_pipeline(dsn, tmp_path, None, [SOFT]), spark)
    assert _target(spark, str(tmp_path / "a")) == {**_live(conn), 1: ("v1", 1, True, deleted_1)}


def test_a_replayed_delete_marks_the_row(conn, dsn, spark, tmp_path):
    """Events quarantined while the table was not in the configuration, replayed once it is
    with deletes = "soft": the replayed delete marks its row at the delete's time."""
    _queue(conn, "a", "p")
    before = [{"source": "public.p", "target": "p"}]
    conn.execute("insert into a select g, 'v' || g, g from generate_series(1, 4) g")
    deleted_2 = _tx(conn, "delete from a where id = 2")
    conn.execute("insert into p values (1, 'x', 1)")
    with Drain(_pipeline(dsn, tmp_path, None, before), spark) as drain:
        drain.run()
    pipe = _pipeline(dsn, tmp_path, None, [*before, SOFT])
    result = replay.Replayer(pipe, spark).replay("public.a")
    assert (result.replayed, result.failed) == (5, 0)
    assert _target(spark, pipe.location("a")) == {**_live(conn), 2: ("v2", 2, True, deleted_2)}
