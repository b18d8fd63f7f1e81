"""Delta's change data feed on targets (``change_data_feed = true``, cdc.targets.layout), on
both engines: a downstream Structured Streaming query reading the target's change feed
(``readChangeFeed``) into a sink with a checkpoint sees exactly the changes the drain
applied, once, across drains SIGKILLed between the table commits of a batch (the rerun
writes nothing to the target that committed, so the stream sees no change twice); a target
whose option is turned on later records the changes from the commit that turned it on.

The crash drains are separate processes, as in tests/e2e/test_drain_crash.py.
"""

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
from cdc.targets.layout import CHANGE_DATA_FEED
from tests.e2e.test_drain_crash import drain
from tests.support import drainkit

pytestmark = pytest.mark.spark

ENGINES = [planner.ARROW, planner.SPARK]
Change = tuple[object, object, str]  # (key, value, _change_type)


def write_config(path: Path, dsn: str, root: Path, engine: str) -> Path:
    """Targets a (json) and b (sql), both with the change data feed, drain.engine forced."""
    conf = path / "pipeline.toml"
    conf.write_text(
        f"""
[source]
dsn = "{dsn}"
queue = "q"
consumer = "delta"

[target]
path = "{root}"

[drain]
engine = "{engine}"

[[tables]]
source = "public.a"
target = "a"
change_data_feed = true

[[tables]]
source = "public.b"
target = "b"
change_data_feed = true
"""
    )
    return conf


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


def round_one(conn: psycopg.Connection) -> dict[str, list[Change]]:
    """Inserts (the targets' first batch: appended); the changes each feed must show."""
    conn.execute("insert into a select g, 'v' || g from generate_series(1, 6) g")
    conn.execute("insert into b select 'k' || g, g / 4.0 from generate_series(1, 4) g")
    return {
        "a": [(i, f"v{i}", "insert") for i in range(1, 7)],
        "b": [(f"k{i}", round(i / 4, 2), "insert") for i in range(1, 5)],
    }


def round_two(conn: psycopg.Connection) -> dict[str, list[Change]]:
    """Updates, deletes, a key change, an insert, and a key inserted and deleted again in
    the batch (no change at all): MERGEd; the changes each feed must show."""
    conn.execute("update a set v = v || 'u' where id in (1, 2)")
    conn.execute("delete from a where id = 3")
    conn.execute("update a set id = 54 where id = 4")
    conn.execute("insert into a values (7, 'v7'), (8, 'v8')")
    conn.execute("delete from a where id = 8")
    conn.execute("update b set x = x * 2 where k = 'k2'")
    conn.execute("delete from b where k = 'k3'")
    conn.execute("insert into b values ('k9', 9.5)")
    a = [(i, f"v{i}", "update_preimage") for i in (1, 2)]
    a += [(i, f"v{i}u", "update_postimage") for i in (1, 2)]
    a += [(3, "v3", "delete"), (4, "v4", "delete"), (54, "v4", "insert"), (7, "v7", "insert")]
    b = [("k2", 0.5, "update_preimage"), ("k2", 1.0, "update_postimage")]
    b += [("k3", 0.75, "delete"), ("k9", 9.5, "insert")]
    return {"a": a, "b": b}


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


def seen(spark, sink: Path) -> list[tuple[str, str, str]]:
    """Every change the downstream job has written, repeats kept."""
    rows = spark.read.format("delta").load(str(sink)).collect()
    return sorted((r.key, r.value, r._change_type) for r in rows)


def as_text(changes: list[Change]) -> list[tuple[str, str, str]]:
    return sorted(
        (str(k), f"{v:.2f}" if isinstance(v, float) else str(v), t) for k, v, t in changes
    )


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


def version(root: Path, target: str) -> int:
    return max(int(p.stem) for p in (root / target / "_delta_log").glob("*.json"))


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("engine", ENGINES)
def test_a_change_feed_stream_sees_each_change_once_across_a_crash(
    db, dsn, spark, tmp_path, engine
):
    """Two rounds of changes: the first (appended) drained in this process, the second
    (MERGEd) by a drain killed right after target a's commit (b's commit before or after
    it), then a clean rerun; the downstream stream runs after each drain. The stream's sink
    holds exactly the applied changes (inserts, update pre- and post-images, deletes), none
    twice, and the rerun did not commit to a again. Spark wrote every commit (its MERGE the
    change data files), on the Arrow route after the driver's decode and fold
    (cdc.engines.planner.CHANGE_DATA_FEED)."""
    root = tmp_path / "delta"
    conf = write_config(tmp_path, dsn, root, engine)
    expected: dict[str, list[Change]] = {"a": [], "b": []}
    for target, changes in round_one(db).items():
        expected[target] += changes
    with Drain(config.load(str(conf)), spark) as first:
        first.run()
    for target in ("a", "b"):
        follow_feed(spark, root / target, tmp_path / f"sink_{target}")
        assert seen(spark, tmp_path / f"sink_{target}") == as_text(expected[target]), target
    for target, changes in round_two(db).items():
        expected[target] += changes
    assert drain(conf, kill_at="table:a") == -signal.SIGKILL
    killed_at = version(root, "a")
    for target in ("a", "b"):
        follow_feed(spark, root / target, tmp_path / f"sink_{target}")
    # a's commit holds the whole batch already: its feed shows it all
    assert seen(spark, tmp_path / "sink_a") == as_text(expected["a"])
    assert drain(conf) == 0
    assert version(root, "a") == killed_at, "the rerun committed to a again"
    for target in ("a", "b"):
        follow_feed(spark, root / target, tmp_path / f"sink_{target}")
        assert seen(spark, tmp_path / f"sink_{target}") == as_text(expected[target]), target
    for target in ("a", "b"):
        assert len(routes(root, target)) == 2, target  # one commit per round
        written_as_planned(routes(root, target), target, engine)
        written = root / target / "_change_data"
        assert written.is_dir() and any(written.iterdir()), target


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
