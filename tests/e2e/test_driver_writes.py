"""Batches written from the driver (cdc.engines.arrow.write): which targets take the
path, that the rows are the source's, that a rerun of a committed batch writes nothing, and
that a target with deletion vectors, or one that outgrew the path, is MERGEd by Spark."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest

from cdc.engines.arrow import write as driver_writes
from cdc.pg import capture, pgtypes
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Queue
from cdc.pipeline import compare
from cdc.pipeline.drain import Drain
from cdc.targets import delta_table
from cdc.targets.merge_plan import MergePlan
from cdc.targets.table import APP_KEY, TICK_KEY, Commit
from tests.support import drainkit

pytestmark = pytest.mark.spark

HOSTILE = 'we"ird col'  # a column name delta-rs' SQL must quote


def _commits(location: Path) -> list[dict]:
    """The commitInfo of each version, oldest first."""
    infos = []
    for path in sorted((location / "_delta_log").glob("*.json")):
        for line in path.read_text().splitlines():
            action = json.loads(line)
            if "commitInfo" in action:
                infos.append(action["commitInfo"])
    return infos


def _writer(info: dict) -> str:
    return "delta-rs" if "delta-rs" in json.dumps(info.get("engineInfo", "")) else "spark"


@pytest.fixture
def table_a(conn, dsn, tmp_path):
    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()
    conn.execute(
        "create table a (id int primary key, v text, n numeric(10,2), {} int[], ts timestamptz,"
        " d date)".format('"' + HOSTILE.replace('"', '""') + '"')
    )
    capture.attach(conn, "public.a", CaptureOptions(queue="q"))
    return drainkit.pipeline(dsn, str(tmp_path), [{"source": "public.a", "target": "a"}])


def _same(conn, spark, pipeline) -> None:
    cols = pgtypes.columns(conn, "public", "a")
    src = compare.source_rows(conn, "public", "a")
    dst = compare.delta_rows(spark, pipeline.location("a"), cols)
    assert src == dst


def test_small_batches_are_merged_from_the_driver_exactly(conn, spark, table_a):
    pipeline = table_a
    conn.execute(
        "insert into a select g, 'v' || g, g / 3.0, array[g, null], '2024-01-01'::timestamptz"
        " + g * interval '1 hour', '0044-03-15'::date + g from generate_series(1, 30) g"
    )
    on_driver: list[set[str]] = []
    with Drain(pipeline, spark) as drain:
        drain.run(on_batch=lambda stats: on_driver.append(stats.on_driver))
        conn.execute("update a set v = null, n = -n where id % 3 = 0")
        conn.execute("delete from a where id % 5 = 0")
        conn.execute("insert into a values (100, 'new', 1.25, '{}', null, null)")
        conn.execute("update a set id = id + 1000 where id = 7")  # a key change
        drain.run(on_batch=lambda stats: on_driver.append(stats.on_driver))
    commits = _commits(Path(pipeline.location("a")))
    assert [_writer(c) for c in commits][-2:] == ["delta-rs", "delta-rs"]
    # decoded on the driver too (cdc.engines.arrow.decode)
    assert on_driver == [{"a"}, {"a"}]
    protocol = delta_table.LocalTable.open(pipeline.table("a")).table.protocol()
    assert "deletionVectors" not in (protocol.reader_features or ())
    _same(conn, spark, pipeline)


def test_a_committed_batch_is_not_written_again(conn, spark, table_a):
    """The batch's txn is in the target (a drain killed before finish_batch): the rerun
    skips it, as Spark's txnAppId / txnVersion does."""
    pipeline = table_a
    conn.execute("insert into a (id, v) select g, 'v' || g from generate_series(1, 5) g")
    with Drain(pipeline, spark) as drain:
        drain.run()  # appended: the empty target holds none of the keys
        conn.execute("update a set v = 'again' where id = 3")
        drain.run()  # MERGEd
    ref = pipeline.table("a")
    [info] = [c for c in _commits(Path(ref.location)) if c.get("operation") == "MERGE"]
    txns = [
        json.loads(line)["txn"]
        for path in sorted((Path(ref.location) / "_delta_log").glob("*.json"))
        for line in path.read_text().splitlines()
        if '"txn"' in line
    ]
    assert txns, "the driver's MERGE carries the batch's txn"
    table = delta_table.LocalTable.open(ref)
    version = table.version()
    commit = Commit(txns[-1]["appId"], txns[-1]["version"])
    assert driver_writes.committed(table, commit)
    assert not driver_writes.committed(table, Commit(commit.app_id, commit.version + 1))
    plan = MergePlan.for_batch([pgtypes.Column("id", "integer", "int", True)], [], None)
    driver_writes.merge(table, pa.table({}), plan, commit)  # returns before any write
    assert delta_table.LocalTable.open(ref).version() == version
    assert _writer(info) == "delta-rs"


def test_deletion_vectors_and_outgrown_targets_take_spark(conn, spark, table_a, monkeypatch):
    pipeline = table_a
    conn.execute("insert into a (id, v) select g, 'v' || g from generate_series(1, 20) g")
    ref = pipeline.table("a")
    with Drain(pipeline, spark) as drain:
        drain.run()
        delta_table.enable_deletion_vectors(spark, ref)
        conn.execute("delete from a where id <= 3")
        drain.run()
        assert _writer(_commits(Path(ref.location))[-1]) == "spark"
        _same(conn, spark, pipeline)
    # another target, without deletion vectors, past the path's size once it holds rows
    monkeypatch.setattr(driver_writes, "MAX_BYTES", 1)
    other = drainkit.pipeline(
        pipeline.source.dsn, pipeline.target_path, [{"source": "public.a", "target": "b"}]
    )
    conn.execute("update a set v = 'again'")
    with Drain(other, spark) as drain:
        drain.run()  # b is created empty: the driver writes its first batch
        conn.execute("update a set v = 'and again' where id = 4")
        drain.run()
    protocol = delta_table.LocalTable.open(other.table("b")).table.protocol()
    assert "deletionVectors" in (protocol.reader_features or ())
    assert _writer(_commits(Path(other.location("b")))[-1]) == "spark"


@pytest.mark.parametrize("local", [True, False], ids=["local master", "cluster"])
def test_a_large_batch_is_written_from_the_driver_on_a_local_master_only(
    conn, spark, table_a, local
):
    # more events of the table than planner.SMALL_EVENTS, in the trigger's form and one hostile
    # spelling (decoded one by one): on a local master the driver decodes and writes them, on
    # a cluster the driver decodes and folds them and Spark MERGEs the folded rows
    # (arrow+spark); the target is the source's either way
    pipeline = table_a
    conn.execute(
        "insert into a select g, 'v' || g, g / 3.0, array[g, null], '2024-01-01'::timestamptz"
        " + g * interval '1 hour', '0044-03-15'::date + g from generate_series(1, 6000) g"
    )
    conn.execute("update a set v = v || ' é', n = -n where id % 3 = 0")
    conn.execute("update a set id = id + 10000 where id % 7 = 0")  # key changes
    conn.execute("delete from a where id % 5 = 0")
    conn.execute("insert into a (id, v) values (99999, 'spaced')")  # and again, spelled otherwise:
    conn.execute(
        "select cdc.insert_event('q', %s, %s, 'public.a', null, null, null)",
        ('{"op":"INSERT","table":["public","a"],"pkey":["id"]}', '{"v": "spaced", "id": 99999}'),
    )
    on_driver: list[set[str]] = []
    routes: list[dict[str, str]] = []

    def record(stats) -> None:
        on_driver.append(stats.on_driver)
        routes.append(stats.routes)

    with Drain(pipeline, spark) as drain:
        drain.applier.parts = replace(drain.applier.parts, local_master=local)
        drain.run(on_batch=record)
    assert on_driver == [{"a"} if local else set()]
    assert routes[0]["a"].startswith("arrow (local master" if local else "arrow+spark (large part")
    _same(conn, spark, pipeline)


def test_folded_rows_too_large_to_ship_are_sparks_from_the_events(
    conn, spark, table_a, monkeypatch
):
    # the driver's fold is shipped to Spark whole: past SHIP_MAX_BYTES the part is declined,
    # nothing committed, and Spark decodes and writes it from its events, saying why
    from cdc.engines import shipped

    monkeypatch.setattr(shipped, "SHIP_MAX_BYTES", 1)
    pipeline = replace(table_a, drain=replace(table_a.drain, engine="arrow+spark"))
    conn.execute("insert into a (id, v) select g, 'v' || g from generate_series(1, 50) g")
    conn.execute("delete from a where id % 4 = 0")
    routes: list[dict[str, str]] = []
    with Drain(pipeline, spark) as drain:
        drain.run(on_batch=lambda stats: routes.append(stats.routes))
    assert routes[0]["a"].startswith("spark ("), routes
    assert "bytes of rows to ship to Spark" in routes[0]["a"], routes
    assert _route_of_last_commit(pipeline)["cdc.decode"] == "spark"
    _same(conn, spark, pipeline)


def test_a_target_larger_than_the_path_takes_batches_of_few_files(
    conn, spark, table_a, monkeypatch
):
    # three files of 1,000 keys each (one batch each); the driver may rewrite at most about
    # one and a half of them: a batch of recent keys touches one file and is written by
    # delta-rs, a batch of keys spread over every file by Spark
    pipeline = table_a
    with Drain(pipeline, spark) as drain:
        for first in (1, 1001, 2001):
            conn.execute(
                "insert into a select g, 'v' || g, g / 3.0, array[g], null, null"
                " from generate_series(%s::int, %s::int) g",
                (first, first + 999),
            )
            drain.run()
        local = delta_table.LocalTable.open_local(pipeline.table("a"))
        monkeypatch.setattr(driver_writes, "MAX_BYTES", local.size() // 2)
        conn.execute("update a set v = 'recent' where id > 2990")
        drain.run()
        assert _writer(_commits(Path(pipeline.location("a")))[-1]) == "delta-rs"
        conn.execute("update a set v = 'spread' where id % 100 = 0")
        drain.run()
        assert _writer(_commits(Path(pipeline.location("a")))[-1]) == "spark"
    _same(conn, spark, pipeline)


def _route_of_last_commit(pipeline) -> dict:
    """The route (cdc.engines.planner) the target's last commit records, beside the batch's
    tick and appId (cdc.ops.at_tick reads those)."""
    from deltalake import DeltaTable

    found = json.loads(DeltaTable(pipeline.location("a")).history(1)[0]["userMetadata"])
    assert isinstance(found.pop(TICK_KEY), int) and found.pop(APP_KEY).endswith("/delta/a")
    return found


def test_each_commit_records_the_engines_that_wrote_it(conn, spark, table_a):
    # the planner's route is in the batch's statistics and in the Delta commit, whichever
    # engine wrote it: Arrow on a local master, Spark when drain.engine forces it, Spark's
    # decode and delta-rs' MERGE for an event the Arrow decoder is undecided about
    pipeline = table_a
    routes: list[dict[str, str]] = []

    def drain(pipeline) -> None:
        with Drain(pipeline, spark) as running:
            running.run(on_batch=lambda stats: routes.append(stats.routes))

    conn.execute("insert into a (id, v) select g, 'v' || g from generate_series(1, 20) g")
    drain(pipeline)
    assert _route_of_last_commit(pipeline) == {
        "cdc.decode": "arrow",
        "cdc.write": "arrow",
        "cdc.why": "local master, events on the driver",
    }
    assert routes[-1]["a"] == "arrow (local master, events on the driver)"

    conn.execute("update a set v = 'forced' where id <= 5")
    forced = replace(pipeline, drain=replace(pipeline.drain, engine="spark"))
    drain(forced)
    assert _route_of_last_commit(pipeline) == {
        "cdc.decode": "spark",
        "cdc.write": "spark",
        "cdc.why": "drain.engine = spark",
    }
    assert routes[-1]["a"] == "spark (drain.engine = spark)"
    _same(conn, spark, pipeline)

    # an integer spelled as PostgreSQL never writes it: the Arrow decoder leaves the table
    # to Spark, and the small part's folded rows are MERGEd by delta-rs
    conn.execute(
        "select cdc.insert_event('q', %s, %s, 'public.a', null, null, null)",
        ('{"op":"INSERT","table":["public","a"],"pkey":["id"]}', '{"id": " 12", "v": "x"}'),
    )
    drain(pipeline)
    last = _route_of_last_commit(pipeline)
    assert (last["cdc.decode"], last["cdc.write"]) == ("spark", "arrow"), last
    assert routes[-1]["a"].startswith("spark+arrow (")


@pytest.mark.parametrize("engine", ["arrow", "spark", "arrow+spark"])
def test_a_batch_of_keys_the_target_does_not_hold_is_appended(conn, spark, table_a, engine):
    # no target row within the batch's first-key range: the MERGE would only insert, so the
    # upserted rows are appended (one WRITE commit, marked as the MERGE's), on every route;
    # a batch whose range the target holds rows in is MERGEd
    from deltalake import DeltaTable

    pipeline = replace(table_a, drain=replace(table_a.drain, engine=engine))

    def drain_once() -> tuple[str, dict]:
        with Drain(pipeline, spark) as drain:
            drain.run()
        last = DeltaTable(pipeline.location("a")).history(1)[0]
        return last["operation"], json.loads(last["userMetadata"])

    conn.execute("insert into a (id, v) select g, 'v' || g from generate_series(1, 40) g")
    conn.execute("update a set v = 'changed' where id % 3 = 0")
    conn.execute("delete from a where id % 5 = 0")  # a key deleted in the batch: not appended
    operation, route = drain_once()
    assert operation == "WRITE" and route["cdc.write"] == engine.split("+")[-1], route
    _same(conn, spark, pipeline)
    conn.execute("insert into a (id, v) select g, 'w' || g from generate_series(100, 120) g")
    assert drain_once()[0] == "WRITE"  # keys past the table's
    conn.execute("update a set v = 'again' where id in (1, 110)")
    conn.execute("insert into a (id, v) values (50, 'between')")
    assert drain_once()[0] == "MERGE"
    _same(conn, spark, pipeline)
