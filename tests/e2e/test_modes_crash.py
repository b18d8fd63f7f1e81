"""The apply modes across a drain SIGKILLed between the table commits of a batch: an scd2
target with tombstones, a mirror keeping deleted rows (``deletes = "soft"``) and a mirror with
Delta's change data feed, drained from one queue on each forced engine. The first round is
drained in this process (the targets' first commits); the second round's drain is killed
after the batch's first table commit, then run again. Each target then equals, row for row,
the one a second consumer that never crashed writes from the same events (no version, mark
or row lost or doubled), holds as many batch commits, and a downstream Structured Streaming
query reading the feed before and after the crash has seen each change once.

The crash drains are separate processes (tests/e2e/test_drain_crash.py's ``drain``); one
crash covers the three modes, which share the commit identity and differ in their MERGE."""

from __future__ import annotations

import json
import signal
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest

from cdc import config
from cdc.engines import planner
from cdc.pg import capture
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Queue
from cdc.pipeline.drain import Drain
from cdc.targets import delta_table
from cdc.targets.table import TableRef
from tests.e2e.test_change_feed import follow_feed
from tests.e2e.test_drain_crash import drain as drain_process
from tests.support import drainkit

pytestmark = pytest.mark.spark

ENGINES = [planner.ARROW, planner.SPARK]
TABLES = [
    {"source": "public.c", "target": "c", "mode": "scd2", "tombstones": True},
    {"source": "public.s", "target": "s", "deletes": "soft"},
    {"source": "public.f", "target": "f", "change_data_feed": True},
]


@pytest.fixture
def source(conn: psycopg.Connection) -> psycopg.Connection:
    """Queue q with consumers delta (crashed) and clean; c and f in json, s in urlenc."""
    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()
    Consumer(conn, "q", "clean").register()
    conn.execute("create table c (id int primary key, name text, status text)")
    conn.execute("create table s (id int primary key, v text, n int)")
    conn.execute("create table f (k text primary key, x numeric(8,2))")
    for table, fmt in (("c", "json"), ("s", "urlenc"), ("f", "json")):
        capture.attach(conn, f"public.{table}", CaptureOptions(queue="q", format=fmt))
    return conn


def _txn(conn: psycopg.Connection, *statements: str) -> None:
    with conn.transaction():
        for statement in statements:
            conn.execute(statement)


def round_one(conn: psycopg.Connection) -> None:
    _txn(conn, "insert into c select g, 'n' || g, 'new' from generate_series(1, 20) g")
    _txn(conn, "insert into s select g, 'v' || g, g from generate_series(1, 20) g")
    _txn(conn, "insert into f select 'k' || g, g / 4.0 from generate_series(1, 20) g")


def round_two(conn: psycopg.Connection) -> None:
    """Several transactions per key (each an scd2 version), deletes (closed, tombstoned,
    marked), a re-insert, a key change, a key inserted and deleted again."""
    for n in range(3):
        _txn(conn, f"update c set status = 's{n}' where id % 3 = {n}")
        _txn(conn, f"update s set n = n + 1 where id % 2 = {n % 2}")
        _txn(conn, f"update f set x = x + 1 where k like 'k{n + 1}%'")
    _txn(conn, "delete from c where id in (1, 2)", "delete from s where id in (1, 2)")
    _txn(conn, "delete from f where k in ('k1', 'k2')")
    _txn(conn, "insert into c values (1, 'back', 'again')", "insert into s values (1, 'back', 0)")
    _txn(conn, "update c set id = 50 where id = 5", "update f set k = 'k50' where k = 'k5'")
    _txn(conn, "insert into s values (60, 'brief', 0)", "insert into f values ('k60', 6)")
    _txn(conn, "delete from s where id = 60", "delete from f where k = 'k60'")


def _config(tmp_path: Path, dsn: str, root: Path, engine: str) -> Path:
    conf = tmp_path / "pipeline.toml"
    entries = ""
    for table in TABLES:
        entries += "[[tables]]\n" + "".join(
            f"{key} = {json.dumps(value)}\n" for key, value in table.items()
        )
    conf.write_text(
        f"[source]\ndsn = {json.dumps(dsn)}\nqueue = 'q'\nconsumer = 'delta'\n"
        f"[target]\npath = {json.dumps(str(root))}\n[drain]\nengine = {engine!r}\n{entries}"
    )
    return conf


def _rows(spark, location: Path) -> list[str]:
    return sorted(map(repr, delta_table.read(spark, TableRef(str(location))).collect()))


def _batch_commits(location: Path) -> list[dict]:
    """The route of each batch commit of the table (commitInfo.userMetadata), oldest first."""
    found = []
    for path in sorted((location / "_delta_log").glob("*.json")):
        for line in path.read_text().splitlines():
            info = json.loads(line).get("commitInfo")
            if info and info.get("userMetadata"):
                found.append(json.loads(info["userMetadata"]))
    return found


def _feed(spark, location: Path) -> list[tuple[str, str, str]]:
    """A table's whole change feed, as (key, value, change type)."""
    rows = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", 0)
        .load(str(location))
        .collect()
    )
    return sorted((str(r.k), str(r.x), r._change_type) for r in rows)


def _sink(spark, sink: Path) -> list[tuple[str, str, str]]:
    rows = spark.read.format("delta").load(str(sink)).collect()
    return sorted((r.key, r.value, r._change_type) for r in rows)


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("engine", ENGINES)
def test_each_mode_applies_a_batch_once_across_a_sigkill(source, dsn, spark, tmp_path, engine):
    conn = source
    root = tmp_path / "crashed"
    conf = _config(tmp_path, dsn, root, engine)
    sink = tmp_path / "sink_f"
    clean = drainkit.pipeline(dsn, str(tmp_path / "clean"), TABLES, consumer="clean")
    clean = replace(clean, drain=replace(clean.drain, engine=engine))
    round_one(conn)
    for pipeline in (config.load(conf), clean):  # the same batches for both consumers
        with Drain(pipeline, spark) as first:
            first.run()
    follow_feed(spark, root / "f", sink)
    round_two(conn)
    assert drain_process(conf, kill_at="committed:1") == -signal.SIGKILL
    committed = [t["target"] for t in TABLES if len(_batch_commits(root / t["target"])) == 2]
    assert committed, "the kill came before any table commit of the second batch"
    follow_feed(spark, root / "f", sink)  # the feed as far as the crash left it
    assert drain_process(conf) == 0
    follow_feed(spark, root / "f", sink)

    with Drain(clean, spark) as drain:
        drain.run()
    for table in TABLES:
        target = table["target"]
        crashed, written = root / target, tmp_path / "clean" / target
        assert _rows(spark, crashed) == _rows(spark, written), target
        # one commit per batch: the rerun did not commit again to the tables committed
        assert len(_batch_commits(crashed)) == len(_batch_commits(written)) == 2, target
    versions = delta_table.read(spark, TableRef(str(root / "c")))
    assert versions.count() > 40  # versions closed and opened, tombstones
    tombstones = versions.where("__deleted").collect()  # 5 left by its key's change
    assert sorted((r.id, r["__current"]) for r in tombstones) == [(1, False), (2, True), (5, True)]
    marked = delta_table.read(spark, TableRef(str(root / "s"))).where("__deleted")
    assert sorted(r.id for r in marked.collect()) == [2, 60]
    # the stream saw each change of the feed once, across the crash
    assert _sink(spark, sink) == _feed(spark, tmp_path / "clean" / "f")
    assert {c for _, _, c in _sink(spark, sink)} == {
        "insert", "update_preimage", "update_postimage", "delete",
    }  # fmt: skip
    # Spark wrote the feed's table; forced to the Arrow engine, the driver decoded it
    for route in _batch_commits(root / "f")[1:]:
        assert route["cdc.write"] == planner.SPARK, route
        if engine == planner.ARROW:
            assert route["cdc.why"] == planner.CHANGE_DATA_FEED, route
