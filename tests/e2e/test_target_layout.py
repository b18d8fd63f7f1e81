"""A target's layout (cdc.targets.layout) on both engines: a liquid-clustered target and a
partitioned one drained with drain.engine forced to each engine, their rows the source's,
DESCRIBE DETAIL showing the clustering or partition columns, the file's properties set (and
set again when the file changes them), the source's column comments in the Delta schema
(also of a column added later), ``cdc maintain`` clustering a clustered target, and a layout
column the target lacks refused."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import psycopg
import pytest
from deltalake import DeltaTable
from psycopg import sql

from cdc.config import Pipeline
from cdc.engines import planner
from cdc.ops import maintain, status
from cdc.pg import capture, pgtypes
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Queue
from cdc.pipeline import compare
from cdc.pipeline.apply import BatchStats
from cdc.pipeline.drain import Drain
from tests.support import drainkit

pytestmark = pytest.mark.spark

ENGINES = [planner.ARROW, planner.SPARK]
PROPERTIES = {"delta.logRetentionDuration": "interval 60 days", "owner.team": "sales"}
NOTE = "free text, as typed: 'quoted' \\ and all"  # a comment Spark SQL must quote
IDS = "select id from orders order by id"
COMMENTS = {"country": "ISO 3166 code, where the order ships", "id": "the order's number"}


@pytest.fixture
def orders(conn: psycopg.Connection) -> psycopg.Connection:
    """public.orders, with column comments, captured into queue q (consumer delta)."""
    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()
    conn.execute(
        "create table orders (id int primary key, country text, day date, at timestamptz,"
        " amount numeric(10,2))"
    )
    for column, text in COMMENTS.items():
        _comment(conn, column, text)
    capture.attach(conn, "public.orders", CaptureOptions(queue="q", format="json"))
    return conn


def _comment(conn: psycopg.Connection, column: str, text: str) -> None:
    query = sql.SQL("comment on column orders.{} is {}")
    conn.execute(query.format(sql.Identifier(column), sql.Literal(text)))


def _entries(**properties: str) -> list[dict[str, Any]]:
    props = {**PROPERTIES, **properties}
    return [
        {"source": "public.orders", "target": "clustered", "cluster_by": ["country"],
         "properties": props},
        {"source": "public.orders", "target": "partitioned", "partition_by": ["day"]},
    ]  # fmt: skip


def _drain(dsn: str, root: Path, spark, entries: list[dict], engine: str) -> tuple[Pipeline, dict]:
    """One drain until caught up with drain.engine forced; each target's last route."""
    pipe = drainkit.pipeline(dsn, str(root), entries)
    pipe = replace(pipe, drain=replace(pipe.drain, engine=engine))
    stats: list[BatchStats] = []
    with Drain(pipe, spark) as drain:
        drain.run(on_batch=stats.append)
    routes = {t: r for s in stats for t, r in s.routes.items()}
    return pipe, routes


def _workload(conn: psycopg.Connection, round_: int) -> None:
    base = round_ * 100
    conn.execute(
        "insert into orders select g, (array['de','fr','jp'])[g %% 3 + 1],"
        " date '2024-01-01' + g %% 4, timestamptz '2024-01-01 12:00+00' + g * interval '1 hour',"
        " g * 1.5 from generate_series(%s::int, %s::int) g",
        (base, base + 20),
    )
    conn.execute("update orders set amount = amount + 1, day = day + 7 where id % 4 = 0")
    conn.execute("delete from orders where id %% 5 = 0 and id >= %s", (base,))
    conn.execute("update orders set id = id + 50 where id = %s", (base + 1,))


def _detail(spark, pipe: Pipeline, target: str) -> dict[str, Any]:
    return spark.sql(f"describe detail {pipe.table(target).sql_name}").collect()[0].asDict()


def _comments(spark, pipe: Pipeline, target: str) -> dict[str, str]:
    fields = spark.read.format("delta").load(pipe.location(target)).schema.fields
    return {f.name: f.metadata["comment"] for f in fields if "comment" in f.metadata}


def _properties(spark, pipe: Pipeline, target: str) -> dict[str, str]:
    rows = spark.sql(f"show tblproperties {pipe.table(target).sql_name}").collect()
    return {r[0]: r[1] for r in rows}


def _same(conn: psycopg.Connection, spark, pipe: Pipeline, target: str) -> None:
    cols = pgtypes.columns(conn, "public", "orders")
    source = compare.source_rows(conn, "public", "orders")
    assert compare.delta_rows(spark, pipe.location(target), cols) == source, target


@pytest.mark.parametrize("engine", ENGINES)
def test_clustered_and_partitioned_targets_on_each_engine(orders, dsn, spark, tmp_path, engine):
    """Both targets hold the source's rows after appends and MERGEs; DESCRIBE DETAIL shows
    the clustering and partition columns; the properties and the column comments are in the
    table (a column added later gets its comment too); a property the file changes is set
    again. The Arrow engine writes the partitioned target, Spark the clustered one (delta-rs
    1.6 does not write clustering), the route says why."""
    root = tmp_path / "delta"
    for round_ in (1, 2):
        _workload(orders, round_)
        pipe, routes = _drain(dsn, root, spark, _entries(), engine)
        for target in ("clustered", "partitioned"):
            _same(orders, spark, pipe, target)
    if engine == planner.ARROW:
        assert routes == {
            "clustered": f"{planner.SHIPPED} ({planner.CLUSTERED})",
            "partitioned": "arrow (drain.engine = arrow)",
        }
    else:
        assert set(routes.values()) == {"spark (drain.engine = spark)"}
    clustered, partitioned = _detail(spark, pipe, "clustered"), _detail(spark, pipe, "partitioned")
    assert (clustered["clusteringColumns"], clustered["partitionColumns"]) == (["country"], [])
    assert (partitioned["clusteringColumns"], partitioned["partitionColumns"]) == ([], ["day"])
    held = _properties(spark, pipe, "clustered")
    assert {k: held.get(k) for k in PROPERTIES} == PROPERTIES
    for target in ("clustered", "partitioned"):
        assert _comments(spark, pipe, target) == COMMENTS
        # delta-rs (and the readers built on it) read both layouts
        ids = DeltaTable(pipe.location(target)).to_pyarrow_table(columns=["id"]).column("id")
        assert sorted(ids.to_pylist()) == [r[0] for r in orders.execute(IDS).fetchall()]

    # a column added at the source, with its comment; the file changes a property
    orders.execute("alter table orders add column note text")
    _comment(orders, "note", NOTE)
    orders.execute("update orders set note = 'gift' where id % 3 = 0")
    changed = _entries(**{"delta.logRetentionDuration": "interval 90 days"})
    pipe, _ = _drain(dsn, root, spark, changed, engine)
    for target in ("clustered", "partitioned"):
        assert _comments(spark, pipe, target) == {**COMMENTS, "note": NOTE}
        _same(orders, spark, pipe, target)
    held = _properties(spark, pipe, "clustered")
    assert held["delta.logRetentionDuration"] == "interval 90 days"
    assert _detail(spark, pipe, "clustered")["clusteringColumns"] == ["country"]


@pytest.mark.parametrize("engine", ENGINES)
def test_maintain_clusters_a_clustered_target(orders, dsn, spark, tmp_path, engine):
    """cdc maintain's OPTIMIZE on a clustered target clusters its files by its clustering
    columns (no ZORDER BY, which Delta refuses there) and compacts them; a partitioned
    mirror is still ZORDERed by its key; both keep the source's rows."""
    root = tmp_path / "delta"
    for round_ in (1, 2, 3, 4):  # batches of new keys: a few small files, appended
        orders.execute(
            "insert into orders select g, (array['de','fr','jp'])[g %% 3 + 1], date '2024-01-01',"
            " null, g from generate_series(%s::int, %s::int) g",
            (round_ * 100, round_ * 100 + 30),
        )
        pipe, _ = _drain(dsn, root, spark, _entries(), engine)
    before = _detail(spark, pipe, "clustered")["numFiles"]
    assert before >= 3
    done = maintain.maintain(pipe, spark, ["clustered", "partitioned"], vacuum=False)
    assert {m.target for m in done} == {"clustered", "partitioned"}
    assert _detail(spark, pipe, "clustered")["numFiles"] < before
    history = {
        target: spark.sql(f"describe history {pipe.table(target).sql_name}")
        .where("operation = 'OPTIMIZE'")
        .collect()
        for target in ("clustered", "partitioned")
    }
    [clustering] = history["clustered"]
    assert clustering["operationParameters"]["clusterBy"] == '["country"]'
    assert clustering["operationParameters"]["zOrderBy"] == "[]"
    [ordering] = history["partitioned"]
    assert ordering["operationParameters"]["zOrderBy"] == '["id"]'
    for target in ("clustered", "partitioned"):
        _same(orders, spark, pipe, target)


def test_a_layout_column_the_target_lacks_is_refused(orders, dsn, spark, tmp_path):
    """cluster_by naming a column the target lacks, or partition_by a text column (a
    partition stores '' as NULL), marks that table failing with a message naming the column
    and the fix; a well-laid-out target of the same source is applied."""
    orders.execute("insert into orders values (1, 'de', '2024-01-01', null, 1.5)")
    entries = [
        {"source": "public.orders", "target": "bad_cluster", "cluster_by": ["nope"]},
        {"source": "public.orders", "target": "bad_partition", "partition_by": ["country"]},
        {"source": "public.orders", "target": "good", "partition_by": ["day"]},
    ]
    pipe, _ = _drain(dsn, tmp_path / "delta", spark, entries, planner.ARROW)
    state = {t.target: t for t in status.collect(pipe).tables}
    assert state["bad_cluster"].failing
    reason = state["bad_cluster"].failing_reason
    assert "cluster_by names nope, not a column of the target" in reason
    assert state["bad_partition"].failing
    reason = state["bad_partition"].failing_reason
    assert "partition_by column country (string)" in reason and "cluster_by" in reason
    assert not state["good"].failing
    assert not (tmp_path / "delta" / "bad_cluster" / "_delta_log").exists()
    _same(orders, spark, pipe, "good")
