"""SCD type 2 targets (cdc.targets.scd2) drained by each engine: one version per source
transaction that changes a key, in place for untracked columns, deletes closing (and, with
tombstones, marking) a key, key changes, TRUNCATE closing every version; exactly once across
a rerun."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from cdc.pg import capture
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Queue
from cdc.pipeline.drain import Drain
from cdc.targets import delta_table
from tests.support import drainkit

pytestmark = pytest.mark.spark

ENGINES = ["arrow", "spark"]


def _pipeline(dsn: str, path: str, engine: str, **options: Any):
    pipeline = drainkit.pipeline(
        dsn, path, [{"source": "public.c", "target": "c", "mode": "scd2", **options}]
    )
    return replace(pipeline, drain=replace(pipeline.drain, engine=engine))


@pytest.fixture
def source(conn):
    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()
    conn.execute("create table c (id int primary key, name text, status text, seen int)")
    capture.attach(conn, "public.c", CaptureOptions(queue="q"))
    return conn


def _txn(conn, *statements: str) -> int:
    """Runs the statements in one transaction; its now() in microseconds since the epoch."""
    with conn.transaction():
        for statement in statements:
            conn.execute(statement)
        (now,) = conn.execute("select (extract(epoch from now()) * 1000000)::bigint").fetchone()
    return now


def _writers(pipeline) -> list[str]:
    """The engine that wrote each commit of the target (its commitInfo's route)."""
    found = []
    for path in sorted((Path(pipeline.location("c")) / "_delta_log").glob("*.json")):
        for line in path.read_text().splitlines():
            info = json.loads(line).get("commitInfo", {})
            if "userMetadata" in info:
                found.append(json.loads(info["userMetadata"])["cdc.write"])
    return found


def _versions(spark, pipeline) -> dict[int, list[tuple]]:
    """Per key, its versions in start order: (name, status, seen, start, end, current[,
    deleted]), times as microseconds since the epoch."""
    frame = delta_table.read(spark, pipeline.table("c"))
    extra = ["__deleted"] if "__deleted" in frame.columns else []
    rows = frame.select(
        "id",
        "name",
        "status",
        "seen",
        F.unix_micros("__start_at").alias("s"),
        F.unix_micros("__end_at").alias("e"),
        "__current",
        *extra,
    ).collect()
    out: dict[int, list[tuple]] = {}
    for r in sorted(rows, key=lambda r: (r.id, r.s, r.e is None)):
        out.setdefault(r.id, []).append(tuple(r)[1:])
    return out


@pytest.mark.parametrize("engine", ENGINES)
def test_each_transaction_is_a_version(source, dsn, spark, tmp_path, engine):
    conn = source
    pipeline = _pipeline(dsn, str(tmp_path), engine, track_history_except_columns=["seen"])
    t1 = _txn(conn, "insert into c values (1, 'a', 'new', 0)")
    t2 = _txn(
        conn, "insert into c values (2, 'b', 'new', 0)", "insert into c values (3, 'c', 'new', 0)"
    )
    with Drain(pipeline, spark) as drain:
        drain.run()
        assert _versions(spark, pipeline) == {
            1: [("a", "new", 0, t1, None, True)],
            2: [("b", "new", 0, t2, None, True)],
            3: [("c", "new", 0, t2, None, True)],
        }
        u1 = _txn(conn, "update c set status = 'paid' where id = 1")
        u2 = _txn(conn, "update c set status = 'sent' where id = 1")
        _txn(conn, "update c set seen = seen + 1 where id = 2")  # untracked: in place
        u4 = _txn(
            conn,
            "update c set status = 'x' where id = 2",
            "update c set status = 'y' where id = 2",  # one transaction: its end state only
        )
        d3 = _txn(conn, "delete from c where id = 3")
        i4 = _txn(conn, "insert into c values (4, 'd', 'new', 0)")
        k4 = _txn(conn, "update c set id = 5 where id = 4")  # a key change
        drain.run()
        assert _versions(spark, pipeline) == {
            1: [
                ("a", "new", 0, t1, u1, False),
                ("a", "paid", 0, u1, u2, False),
                ("a", "sent", 0, u2, None, True),
            ],
            2: [("b", "new", 1, t2, u4, False), ("b", "y", 1, u4, None, True)],
            3: [("c", "new", 0, t2, d3, False)],
            4: [("d", "new", 0, i4, k4, False)],
            5: [("d", "new", 0, k4, None, True)],
        }
        r3 = _txn(conn, "insert into c values (3, 'c2', 'back', 0)")
        drain.run()
        assert _versions(spark, pipeline)[3] == [
            ("c", "new", 0, t2, d3, False),
            ("c2", "back", 0, r3, None, True),
        ]
        before = delta_table.version(spark, pipeline.table("c"))
    assert set(_writers(pipeline)) == {engine}
    # a rerun of committed batches writes nothing (the batch's commit identity)
    with Drain(pipeline, spark) as drain:
        drain.run()
    assert delta_table.version(spark, pipeline.table("c")) == before


@pytest.mark.parametrize("engine", ENGINES)
def test_tombstones_and_truncate(source, dsn, spark, tmp_path, engine):
    conn = source
    pipeline = _pipeline(dsn, str(tmp_path), engine, tombstones=True)
    t1 = _txn(conn, "insert into c values (1, 'a', 'new', 0), (2, 'b', 'new', 0)")
    d1 = _txn(conn, "delete from c where id = 1")
    with Drain(pipeline, spark) as drain:
        drain.run()
        assert _versions(spark, pipeline) == {
            1: [
                ("a", "new", 0, t1, d1, False, False),
                (None, None, None, d1, None, True, True),
            ],
            2: [("b", "new", 0, t1, None, True, False)],
        }
        r1 = _txn(conn, "insert into c values (1, 'a2', 'back', 0)")
        i3 = _txn(conn, "insert into c values (3, 'c', 'new', 0)")
        tr = _txn(conn, "truncate c")
        i2 = _txn(conn, "insert into c values (2, 'b2', 'again', 0)")
        drain.run()
        assert _versions(spark, pipeline) == {
            1: [
                ("a", "new", 0, t1, d1, False, False),
                (None, None, None, d1, r1, False, True),
                ("a2", "back", 0, r1, tr, False, False),
            ],
            2: [("b", "new", 0, t1, tr, False, False), ("b2", "again", 0, i2, None, True, False)],
            3: [("c", "new", 0, i3, tr, False, False)],
        }


@pytest.mark.parametrize("engine", ENGINES)
def test_snapshot_seeds_versions_and_verify_compares_the_current(
    source, dsn, spark, tmp_path, engine
):
    from cdc.pipeline import snapshot, verify

    conn = source
    conn.execute("insert into c select g, 'n' || g, 'new', 0 from generate_series(1, 50) g")
    pipeline = _pipeline(dsn, str(tmp_path), engine, tombstones=True)
    snapshot.Snapshot(pipeline, spark, False).run("public.c")
    seeded = _versions(spark, pipeline)
    assert sorted(seeded) == list(range(1, 51))
    assert all(len(v) == 1 and v[0][4:] == (None, True, False) for v in seeded.values())
    # the events the snapshot already shows add no version; later ones do
    u1 = _txn(conn, "update c set status = 'paid' where id = 1")
    d2 = _txn(conn, "delete from c where id = 2")
    with Drain(pipeline, spark) as drain:
        drain.run()
    found = _versions(spark, pipeline)
    assert [v[1] for v in found[1]] == ["new", "paid"] and found[1][1][3] == u1
    assert found[2][-1] == (None, None, None, d2, None, True, True)
    assert all(len(found[k]) == 1 for k in range(3, 51))
    # verify compares the current versions (not the closed ones, not the tombstones)
    [verdict] = verify.Verifier(pipeline, spark).run()
    assert verdict.ok, verdict
    # a snapshot again over the same rows changes nothing but refreshes in place
    snapshot.Snapshot(pipeline, spark, False).run("public.c")
    assert _versions(spark, pipeline) == found
    # a current version that differs from its source row is found by verify
    delta_table.spark_table(spark, pipeline.table("c")).update(
        "id = 7 and __current", {"status": "'tampered'"}
    )
    [verdict] = verify.Verifier(pipeline, spark).run()
    assert not verdict.ok


def test_resync_closes_what_the_source_lost_and_keeps_the_past(source, dsn, spark, tmp_path):
    """cdc resync (Spark's, for every kind) after changes the capture missed: each key's
    versions before stay; a changed row opens a version, a lost one is closed (and marked)."""
    from cdc.pipeline import resync, verify

    conn = source
    pipeline = _pipeline(
        dsn, str(tmp_path), "arrow", tombstones=True, track_history_except_columns=["seen"]
    )
    t1 = _txn(conn, "insert into c select g, 'n' || g, 'new', 0 from generate_series(1, 5) g")
    u1 = _txn(conn, "update c set status = 'paid' where id = 1")
    with Drain(pipeline, spark) as drain:
        drain.run()
    before = _versions(spark, pipeline)
    with conn.transaction():  # changes the capture does not see
        conn.execute("set local session_replication_role = replica")
        conn.execute("update c set status = 'lost' where id = 2")
        conn.execute("update c set seen = 9 where id = 4")  # untracked: in place
        conn.execute("delete from c where id = 3")
        conn.execute("insert into c values (6, 'n6', 'new', 0)")
    resync.resync(pipeline, spark, "public.c", progress=False)
    found = _versions(spark, pipeline)
    at = found[6][0][3]
    assert (
        found[1]
        == before[1]
        == [
            ("n1", "new", 0, t1, u1, False, False),
            ("n1", "paid", 0, u1, None, True, False),
        ]
    )
    assert found[2] == [
        ("n2", "new", 0, t1, at, False, False),
        ("n2", "lost", 0, at, None, True, False),
    ]
    assert found[3] == [
        ("n3", "new", 0, t1, at, False, False),
        (None, None, None, at, None, True, True),
    ]
    assert found[4] == [("n4", "new", 9, t1, None, True, False)]
    assert found[5] == before[5]
    assert found[6] == [("n6", "new", 0, at, None, True, False)]
    [verdict] = verify.Verifier(pipeline, spark).run()
    assert verdict.ok, verdict
