"""Delta's change data feed on targets (``change_data_feed = true``, cdc.targets.layout), on
both engines: a target whose option is turned on later records the changes from the commit
that turned it on. A downstream Structured Streaming query reading a target's feed across a
drain SIGKILLed between the table commits of a batch is tests/e2e/test_modes_crash.py's
(``follow_feed``, here)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest

from cdc.engines import planner
from cdc.pg import capture
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Queue
from cdc.pipeline.drain import Drain
from cdc.targets.layout import CHANGE_DATA_FEED
from tests.support import drainkit

pytestmark = pytest.mark.spark

ENGINES = [planner.ARROW, planner.SPARK]


@pytest.fixture
def db(conn: psycopg.Connection) -> psycopg.Connection:
    """Queue q with consumer delta; a (json) and b (sql) captured into it."""
    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()
    conn.execute("create table a (id int primary key, v text)")
    conn.execute("create table b (k text primary key, x numeric(8,2))")
    capture.attach(conn, "public.a", CaptureOptions(queue="q", format="json"))
    capture.attach(conn, "public.b", CaptureOptions(queue="q", format="sql"))
    return conn


def follow_feed(spark, source: Path, sink: Path) -> None:
    """A downstream job: the target's change feed since it was created, appended to a Delta
    sink by a Structured Streaming query with a checkpoint, run over what is available."""
    changes = (
        spark.readStream.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", 0)
        .load(str(source))
    )
    key, value = changes.columns[:2]
    query = (
        changes.selectExpr(
            f"cast({key} as string) as key", f"cast({value} as string) as value", "_change_type"
        )
        .writeStream.format("delta")
        .option("checkpointLocation", str(sink) + "_checkpoint")
        .trigger(availableNow=True)
        .start(str(sink))
    )
    query.awaitTermination()
    assert query.exception() is None


def routes(root: Path, target: str) -> list[dict[str, str]]:
    """The drain's route of each data commit of the target (its commitInfo.userMetadata,
    cdc.engines.planner.Route.metadata)."""
    found = []
    for path in sorted((root / target / "_delta_log").glob("*.json")):
        for line in path.read_text().splitlines():
            info = json.loads(line).get("commitInfo")
            if info and info.get("userMetadata"):
                found.append(json.loads(info["userMetadata"]))
    return found


def written_as_planned(written: list[dict[str, str]], target: str, engine: str) -> None:
    """Spark wrote these commits of the target: forced to the Arrow engine, the drain decoded
    and folded on the driver and gave the write to Spark, for the reason the planner names."""
    for route in written:
        assert route["cdc.write"] == planner.SPARK, (target, route)
        if engine == planner.ARROW and target == "a":  # json: decoded on the driver
            assert route["cdc.decode"] == planner.ARROW, route
            assert route["cdc.why"] == planner.CHANGE_DATA_FEED, route


@pytest.mark.parametrize("engine", ENGINES)
def test_a_feed_turned_on_later_records_changes_from_then_on(db, dsn, spark, tmp_path, engine):
    """A target drained without the change data feed gets it when the file turns the option
    on (a SET TBLPROPERTIES commit); its feed is readable from that commit's version on, and
    shows the changes drained since; reading from an earlier version is refused by Delta."""
    root = tmp_path / "delta"
    db.execute("insert into a select g, 'v' || g from generate_series(1, 3) g")
    entry = {"source": "public.a", "target": "a"}
    for feed in (False, True):
        pipe = drainkit.pipeline(dsn, str(root), [{**entry, "change_data_feed": feed}])
        pipe = replace(pipe, drain=replace(pipe.drain, engine=engine))
        with Drain(pipe, spark) as drainer:
            drainer.run()
        if not feed:
            db.execute("update a set v = 'w' where id = 2")
            db.execute("delete from a where id = 3")
    ref = pipe.table("a")
    assert (
        spark.sql(f"show tblproperties {ref.sql_name}")
        .where(f"key = '{CHANGE_DATA_FEED}'")
        .collect()[0]["value"]
        == "true"
    )
    history = spark.sql(f"describe history {ref.sql_name}").collect()
    [turned_on] = [
        h["version"]
        for h in history
        if h["operation"] == "SET TBLPROPERTIES"
        and CHANGE_DATA_FEED in h["operationParameters"]["properties"]
    ]
    feed = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", turned_on)
        .load(ref.location)
    )
    got = sorted((r.id, r.v, r._change_type) for r in feed.collect())
    assert got == [
        (2, "v2", "update_preimage"),
        (2, "w", "update_postimage"),
        (3, "v3", "delete"),
    ]
    before, after = routes(root, "a")  # one commit each
    assert before["cdc.write"] == engine  # without the feed, the engine forced wrote
    written_as_planned([after], "a", engine)
    with pytest.raises(Exception, match="DELTA_MISSING_CHANGE_DATA"):
        spark.read.format("delta").option("readChangeFeed", "true").option(
            "startingVersion", 0
        ).load(ref.location).collect()
