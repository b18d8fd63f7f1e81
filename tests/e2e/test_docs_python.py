"""Every Python block of README.md and docs/ runs, with the fixtures it declares
(``<!-- doc-test: fixtures a, b -->`` before its fence; docs/testing.md). A fixture's value is
bound to its name in the block's namespace:

- ``conn``: an autocommit psycopg connection to a database with cdc installed, queue
  ``orders``, its consumer ``delta`` registered, and a batch of three events waiting;
- ``spark``: the suite's Spark session (with Delta);
- ``pipeline``: a drained pipeline: the working folder holds ``conf/pipeline.toml``
  (queue ``q``, consumer ``delta``; ``public.orders`` with the change data feed into
  ``orders``, ``public.order_items`` into ``order_items``); the block's paths under
  ``/data/`` and ``/lake/`` are in a temporary folder (targets under ``/data/delta``, which
  ``/lake`` names too).

A block marked ``skip: why`` is not run (its imports are still checked, in
tests/unit/test_docs_python.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from cdc import Consumer, Producer, Queue, load_pipeline
from cdc.pg.capture import CaptureOptions, attach
from cdc.pipeline.drain import Drain
from tests.support import doc_blocks

pytestmark = pytest.mark.spark

RUN = [b for b in doc_blocks.blocks("python") if not b.directive.skip]
KNOWN = {"conn", "spark", "pipeline"}

PIPELINE_FILE = """\
[source]
dsn = "{dsn}"
queue = "q"
consumer = "delta"

[target]
path = "{root}/data/delta"

[[tables]]
source = "public.orders"
target = "orders"
change_data_feed = true

[[tables]]
source = "public.order_items"
target = "order_items"

[drain]
engine = "arrow"
"""


@pytest.fixture
def doc_conn(conn: psycopg.Connection) -> psycopg.Connection:
    Queue(conn, "orders").create()
    Consumer(conn, "orders", "delta").register()
    producer = Producer(conn, "orders")
    for n in range(3):
        producer.insert("I:id", f"id={n}")
    Queue(conn, "orders").force_tick()
    assert Queue(conn, "orders").tick() is not None
    return conn


@pytest.fixture
def doc_pipeline(
    conn: psycopg.Connection,
    dsn: str,
    spark: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Any]:
    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()
    conn.execute("create table orders (id int primary key, status text, amount bigint)")
    conn.execute("create table order_items (order_id int, n int, primary key (order_id, n))")
    attach(conn, "public.orders", CaptureOptions(queue="q", format="json"))
    attach(conn, "public.order_items", CaptureOptions(queue="q", format="json"))
    conn.execute("insert into orders select g, 'new', g * 10 from generate_series(1, 5) g")
    conn.execute("insert into order_items select g, 1 from generate_series(1, 5) g")
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "pipeline.toml").write_text(PIPELINE_FILE.format(dsn=dsn, root=tmp_path))
    monkeypatch.chdir(tmp_path)
    pipeline = load_pipeline("conf/pipeline.toml")
    with Drain(pipeline, spark, workers=1) as drain:
        drain.run()
    yield pipeline


def _localised(text: str, root: Path) -> str:
    """The block with its /data/ and /lake/ paths in the test's folder."""
    return text.replace('"/data/', f'"{root}/data/').replace('"/lake/', f'"{root}/data/delta/')


@pytest.mark.parametrize("block", RUN, ids=[b.where for b in RUN])
def test_python_blocks_run(block: doc_blocks.Block, request: pytest.FixtureRequest) -> None:
    unknown = set(block.directive.fixtures) - KNOWN
    assert not unknown, f"{block.where}: no doc fixture {sorted(unknown)}; known: {sorted(KNOWN)}"
    names: dict[str, Any] = {
        name: request.getfixturevalue(f"doc_{name}" if name != "spark" else "spark")
        for name in block.directive.fixtures
    }
    text = block.text
    if "spark" in block.directive.fixtures or "pipeline" in block.directive.fixtures:
        # a block that asks for "the active session" (cdc.spark.session) gets the suite's,
        # whatever an earlier test's pool left active on this thread
        spark = request.getfixturevalue("spark")
        spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
        type(spark)._activeSession = spark  # pyspark answers getActiveSession from here
    if "pipeline" in names:
        text = _localised(text, Path.cwd())
    exec(compile(text, block.where, "exec"), names)
    if "spark" in block.directive.fixtures or "pipeline" in block.directive.fixtures:
        spark = request.getfixturevalue("spark")
        for query in spark.streams.active:  # a stream the block started: availableNow ends
            query.awaitTermination(timeout=120)
            assert query.exception() is None, f"{block.where}: {query.exception()}"
            assert not query.isActive, f"{block.where}: its stream still runs after 120 s"
