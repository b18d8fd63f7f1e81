"""Targets in object storage: the drain writes Delta tables to s3a:// on a real S3 API
(tests/support/objectstore.py), exactly once, as it writes them to a local path."""

from __future__ import annotations

import psycopg
import pytest

from cdc.pg import capture, pgtypes
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Queue
from cdc.pipeline import compare
from cdc.pipeline.drain import Drain
from cdc.targets import delta_table
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


def test_the_drain_writes_s3a_targets_exactly_once(source, dsn, spark, object_store):
    """Two batches into a mirror and a history target in a bucket: the mirror equals the
    source, the history holds one row per event, and each commit names the engine that
    wrote it (Spark: delta-rs writes local paths only)."""
    root = object_store.bucket() + "/replica"
    pipe = drainkit.pipeline(dsn, root, TABLES)
    source.execute(
        "insert into a select g, 'v' || g, g / 100.0, date '2024-01-01' + g"
        " from generate_series(1, 50) g"
    )
    source.execute("update a set v = 'changed' where id <= 10")
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
    routes = [c["userMetadata"] for c in commits if c["operation"] == "MERGE"]
    assert routes and all('"cdc.write": "spark"' in r for r in routes), routes
