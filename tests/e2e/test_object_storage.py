"""Targets in object storage: the drain writes Delta tables to s3a:// on a real S3 API
(tests/support/objectstore.py), exactly once, as it writes them to a local path."""

from __future__ import annotations

import json
import signal
from dataclasses import replace

import psycopg
import pytest

from cdc.engines.planner import ENGINES
from cdc.ops import at_tick, maintain, status
from cdc.pg import capture, pgtypes
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Queue
from cdc.pipeline import compare, verify
from cdc.pipeline.drain import Drain
from cdc.targets import delta_table
from cdc.targets.table import TICK_KEY
from tests.support import drainkit

pytestmark = pytest.mark.spark

TABLES = [
    {"source": "public.a", "target": "a"},
    {"source": "public.a", "target": "a_history", "mode": "history"},
]


@pytest.fixture
def source(conn: psycopg.Connection) -> psycopg.Connection:
    """Queue q with consumer delta; a(id, v, n numeric(6,2), d date) captured in json."""
    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()
    conn.execute("create table a (id int primary key, v text, n numeric(6,2), d date)")
    capture.attach(conn, "public.a", CaptureOptions(queue="q", format="json"))
    return conn


@pytest.mark.parametrize("engine", ENGINES)
def test_the_drain_writes_s3a_targets_exactly_once(source, dsn, spark, object_store, engine):
    """Two batches into a mirror and a history target in a bucket, by each engine (the
    Arrow engine with delta-rs' S3 store, Spark with S3A): the mirror equals the source, the
    history holds one row per event, each commit names the engine that wrote it and its
    tick, and status, verify, maintain and reads as of a tick work there."""
    root = object_store.bucket() + "/replica"
    pipe = drainkit.pipeline(dsn, root, TABLES)
    pipe = replace(pipe, drain=replace(pipe.drain, engine=engine))
    source.execute(
        "insert into a select g, 'v' || g, g / 100.0, date '2024-01-01' + g"
        " from generate_series(1, 50) g"
    )
    source.execute("update a set v = 'changed' where id <= 10")
    source.execute(  # a bad event: to the quarantine, in the bucket too
        'select cdc.insert_event(\'q\', \'{"op":"INSERT","table":["public","a"],'
        "\"pkey\":[\"id\"]}', '{not json', 'public.a', null, null, null)"
    )
    with Drain(pipe, spark) as drain:
        assert drain.run() >= 1
        source.execute("delete from a where id > 45")
        source.execute("insert into a (id, v) values (100, 'late')")
        assert drain.run() >= 1
        drain.run()  # nothing new: nothing written twice (the history's count below)

    mirror = pipe.table("a")
    assert mirror.location == root + "/a"
    columns = pgtypes.columns(source, "public", "a")
    assert compare.delta_rows(spark, mirror.location, columns) == compare.source_rows(
        source, "public", "a"
    )
    history = delta_table.read(spark, pipe.table("a_history"))
    assert history.count() == 50 + 10 + 5 + 1
    commits = delta_table.spark_table(spark, mirror).history().collect()
    routes = [json.loads(c["userMetadata"]) for c in commits if c["userMetadata"]]
    assert routes and {r["cdc.write"] for r in routes} == {engine}, routes
    assert all(r[TICK_KEY] >= 1 for r in routes), routes  # reads as of a tick find them

    # status reads the targets with delta-rs, verify and maintain with Spark
    [state] = [t for t in status.collect(pipe).tables if t.target == "a"]
    # once, though two targets (a and a_history) decoded it
    assert state.exists and state.rows == 46 and state.quarantined == 1
    quarantined = spark.read.format("delta").load(root + "/_quarantine").collect()
    assert [(r.ev_extra1, r.reason) for r in quarantined] == [
        ("public.a", "undecodable json payload")
    ]
    [verdict] = [v for v in verify.Verifier(pipe, spark).run() if v.target == "a"]
    assert verdict.ok and verdict.source_rows == verdict.delta_rows == 46, verdict
    [done] = maintain.maintain(pipe, spark, ["a"], vacuum=False)
    assert done.files_after == 1 <= done.files_before

    # read as of the last consistent tick by delta-rs in the bucket: the OPTIMIZE after the
    # last batch (no tick of its own) is the version it pins
    tick, _ = at_tick.last_consistent_tick(pipe)
    assert at_tick.pinned_versions(pipe, tick)["a"] == delta_table.version(spark, mirror)
    assert at_tick.arrow_tables(pipe)["a"].num_rows == 46
    # the txn actions of the log's files (the ticks of commits that record none) say the same
    txns = delta_table.txn_actions(mirror, range(delta_table.version(spark, mirror) + 1))
    assert sorted(v for m in txns.values() for v in m.values()) == sorted(
        r[TICK_KEY] for r in routes
    )


def test_a_commit_file_is_never_overwritten_on_s3(spark, object_store):
    """The session's log store for s3a:// (cdc.jars builds it) creates each commit file with
    a conditional PUT: a second writer of the same version is refused, and the first
    writer's file is kept. Delta's default store for s3a:// would overwrite it."""
    from py4j.protocol import Py4JJavaError

    from cdc import jars

    assert spark.conf.get("spark.delta.logStore.s3a.impl") == jars.LOG_STORE_CLASS
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    store = jvm.cdc.storage.S3ConditionalLogStore(conf)
    path = jvm.org.apache.hadoop.fs.Path(
        object_store.bucket() + "/_delta_log/00000000000000000001.json"
    )

    def write(line: str) -> None:
        actions = jvm.java.util.ArrayList()
        actions.add(line)
        store.write(path, actions.iterator(), False, conf)

    write('{"first": 1}')
    with pytest.raises(Py4JJavaError, match="FileAlreadyExistsException"):
        write('{"second": 2}')
    kept = store.read(path, conf)
    assert kept.next() == '{"first": 1}'


def test_spark_and_delta_rs_commit_to_one_s3_table_at_once_losing_nothing(spark, object_store):
    """Spark and delta-rs append to one s3a:// table concurrently: every commit survives
    (each version taken once, by a conditional PUT on both sides), no row is lost."""
    import threading

    import pyarrow as pa
    from deltalake import write_deltalake

    from cdc.targets.delta import object_store as options

    path = object_store.bucket() + "/t"
    spark.createDataFrame([], "id long, w string").write.format("delta").save(path)
    rows = [(i, "spark") for i in range(10)]

    def delta_rs_appends() -> None:
        batch = pa.table({"id": pa.array(range(10), pa.int64()), "w": ["delta-rs"] * 10})
        for _ in range(8):
            write_deltalake(
                path, batch, mode="append", storage_options=options.storage_options(path)
            )

    other = threading.Thread(target=delta_rs_appends)
    other.start()
    for _ in range(8):
        spark.createDataFrame(rows, "id long, w string").write.format("delta").mode("append").save(
            path
        )
    other.join()
    counts = {
        r["w"]: r["count"]
        for r in spark.read.format("delta").load(path).groupBy("w").count().collect()
    }
    assert counts == {"spark": 80, "delta-rs": 80}
    versions = [r["version"] for r in spark.sql(f"describe history delta.`{path}`").collect()]
    assert sorted(versions) == list(range(17))


def test_sigkill_between_commits_then_rerun_on_s3(conn, dsn, spark, object_store, tmp_path):
    """Drains run as scheduled ones are (a process each, the S3A settings in the pipeline
    file's [spark] section), SIGKILLed after the first table's commit and after every
    commit of the batch, then run again: the targets in the bucket are right
    and the history holds each event once."""
    from tests.e2e import test_drain_crash as crash

    root = object_store.bucket() + "/replica"
    crash.prepare(conn)
    conf = crash.write_config(tmp_path, dsn, root)  # type: ignore[arg-type]
    spark_section = "".join(f'"{k}" = "{v}"\n' for k, v in object_store.spark_settings().items())
    conf.write_text(conf.read_text() + "\n[spark]\n" + spark_section)
    crash.workload(conn, 1)
    for stage in ("table:a", "merged"):  # after one commit of the batch, after all
        assert crash.drain(conf, kill_at=stage) == -signal.SIGKILL, stage
    assert crash.drain(conf) == 0
    for table in ("a", "b"):
        columns = pgtypes.columns(conn, "public", table)
        assert compare.delta_rows(spark, f"{root}/{table}", columns) == compare.source_rows(
            conn, "public", table
        ), table
    events = conn.execute("select count(*) from cdc.event where ev_extra1 = 'public.a'")
    history = spark.read.format("delta").load(f"{root}/a_history")
    assert history.count() == history.select("ev_id").distinct().count() == events.fetchone()[0]


def test_a_chunked_snapshot_then_the_drain_on_s3(source, dsn, spark, object_store):
    """Rows a table held before its capture are copied to the bucket by a snapshot in
    chunks (its progress kept there too), then the drain applies what followed: the target
    equals the source."""
    from cdc.pipeline import snapshot

    source.execute("create table p (id int primary key, v text)")
    source.execute("insert into p select g, 'old' || g from generate_series(1, 500) g")
    capture.attach(source, "public.p", CaptureOptions(queue="q", format="json"))
    pipe = drainkit.pipeline(
        dsn, object_store.bucket() + "/replica", [{"source": "public.p", "target": "p"}]
    )
    result = snapshot.Snapshot(pipe, spark, False, chunk_rows=200).run("public.p")
    assert result.rows == 500
    source.execute("update p set v = 'after' where id <= 5")
    source.execute("delete from p where id > 490")
    with Drain(pipe, spark) as drain:
        assert drain.run() >= 1
    columns = pgtypes.columns(source, "public", "p")
    assert compare.delta_rows(spark, pipe.location("p"), columns) == compare.source_rows(
        source, "public", "p"
    )


def test_one_batch_written_by_two_writers_at_once_commits_once_on_s3(spark, object_store):
    """A drain that lost its lock but still runs and the drain that took over write the
    same batch (the same txn: appId and tick) to one s3a:// table at the same moment, one
    with Spark and one with delta-rs: the batch is committed once, whoever wins."""
    import threading

    import pyarrow as pa
    from deltalake import CommitProperties, Transaction, write_deltalake

    from cdc.targets.delta import object_store as options

    path = object_store.bucket() + "/t"
    spark.createDataFrame([], "id long, w string").write.format("delta").save(path)
    for tick in range(1, 6):
        start = threading.Barrier(2)
        errors: list[BaseException] = []

        def delta_rs_writes(
            tick: int = tick, start: threading.Barrier = start, errors: list = errors
        ) -> None:
            batch = pa.table({"id": pa.array([tick], pa.int64()), "w": ["delta-rs"]})
            marks = CommitProperties(app_transactions=[Transaction("drain", tick)])
            start.wait()
            try:
                write_deltalake(
                    path, batch, mode="append", commit_properties=marks,
                    storage_options=options.storage_options(path),
                )  # fmt: skip
            except Exception as exc:  # the loser of the race: refused, nothing written
                errors.append(exc)

        other = threading.Thread(target=delta_rs_writes)
        other.start()
        frame = spark.createDataFrame([(tick, "spark")], "id long, w string")
        writer = frame.write.format("delta").mode("append")
        writer = writer.option("txnAppId", "drain").option("txnVersion", tick)
        start.wait()
        try:
            writer.save(path)
        except Exception as exc:
            errors.append(exc)
        other.join()
        rows = spark.read.format("delta").load(path).where(f"id = {tick}").collect()
        assert len(rows) == 1, (tick, rows, errors)
