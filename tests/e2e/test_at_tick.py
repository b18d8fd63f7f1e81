"""Reads of every table as of one tick (cdc.ops.at_tick): a writer commits transactions that
each touch two tables (an order and its items, their count written into the order) while
drains follow, stopped between the two tables' commits of a batch (in process, and by
SIGKILL); a reader at the last consistent tick never sees a transaction in one table without
the other. The same tables read as Spark DataFrames and as Arrow tables are equal, and the
history of each table maps its versions to ticks, in Spark's DESCRIBE HISTORY and delta-rs'."""

from __future__ import annotations

import json
import random
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from cdc import config
from cdc.errors import ConfigError
from cdc.ops import at_tick
from cdc.pg.capture import CaptureOptions, attach
from cdc.pg.queue import Consumer, Queue
from cdc.pipeline.drain import Drain
from cdc.targets import delta_table
from cdc.targets.table import APP_KEY, TICK_KEY
from tests.e2e.test_drain_crash import drain as drain_process

pytestmark = pytest.mark.spark

TABLES = [
    {"source": "public.orders", "target": "orders"},
    {"source": "public.order_items", "target": "order_items"},
]


class Stopped(Exception):
    """A drain stopped between two table commits of a batch."""


@pytest.fixture
def shop(conn: psycopg.Connection) -> psycopg.Connection:
    """Queue q with consumer delta; orders and their items captured into it."""
    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()
    conn.execute("create table orders (id int primary key, items int not null, note text)")
    conn.execute(
        "create table order_items (order_id int, n int, price numeric(8,2),"
        " primary key (order_id, n))"
    )
    attach(conn, "public.orders", CaptureOptions(queue="q", format="json"))
    attach(conn, "public.order_items", CaptureOptions(queue="q", format="sql"))
    return conn


class Writer:
    """Transactions that each touch both tables: a new order with its items, an item added
    to an order (its count raised), an order deleted with its items. ``done`` counts them."""

    def __init__(self, conn: psycopg.Connection, seed: int) -> None:
        self.conn = conn
        self.rng = random.Random(seed)
        self.done = 0
        self.next_id = 1
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.more = threading.Condition()

    def one(self) -> None:
        rng, live = self.rng, self.next_id - 1
        with self.conn.transaction():
            choice = rng.random()
            if choice < 0.5 or live < 5:
                order, items = self.next_id, rng.randint(1, 4)
                self.next_id += 1
                self.conn.execute(
                    "insert into orders values (%s, %s, %s)", (order, items, f"order {order}")
                )
                self.conn.execute(
                    "insert into order_items select %s, g, g * 1.25 from generate_series(1, %s) g",
                    (order, items),
                )
            elif choice < 0.85:
                order = rng.randint(1, live)
                self.conn.execute(
                    "insert into order_items select id, items + 1, 9.99 from orders where id = %s",
                    (order,),
                )
                self.conn.execute("update orders set items = items + 1 where id = %s", (order,))
            else:
                order = rng.randint(1, live)
                self.conn.execute("delete from order_items where order_id = %s", (order,))
                self.conn.execute("delete from orders where id = %s", (order,))
        with self.more:
            self.done += 1
            self.more.notify_all()

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self.one()
                self.stop.wait(0.01)
        except BaseException as exc:  # reported by the test
            self.error = exc
            with self.more:
                self.more.notify_all()

    def wait_for(self, count: int) -> None:
        """Until count more transactions committed (or the writer failed)."""
        with self.more:
            target = self.done + count
            assert self.more.wait_for(lambda: self.done >= target or self.error is not None, 60)
        assert self.error is None, self.error


@pytest.fixture
def writer(shop: psycopg.Connection, connect: Any) -> Iterator[Writer]:
    found = Writer(connect(), seed=29)
    thread = threading.Thread(target=found.run, daemon=True)
    thread.start()
    yield found
    found.stop.set()
    thread.join(30)
    assert found.error is None, found.error


def torn(orders: list[dict], items: list[dict]) -> list[str]:
    """The transactions seen in one table and not the other: an order whose count differs
    from its items, items of an order that is not there."""
    counts: dict[int, int] = {}
    for item in items:
        counts[item["order_id"]] = counts.get(item["order_id"], 0) + 1
    found = [
        f"order {o['id']}: {o['items']} item(s) written, {counts.get(o['id'], 0)} there"
        for o in orders
        if counts.get(o["id"], 0) != o["items"]
    ]
    ids = {o["id"] for o in orders}
    found += [f"items of order {k} without it" for k in sorted(set(counts) - ids)]
    return found


def arrow_rows(pipeline: config.Pipeline, tick: int | None = None) -> dict[str, list[dict]]:
    return {t: table.to_pylist() for t, table in at_tick.arrow_tables(pipeline, tick).items()}


def ordered(found: dict[str, list[dict]]) -> dict[str, list[tuple]]:
    """Each table's rows as sorted tuples of (column, value) pairs."""
    return {t: sorted(tuple(r.items()) for r in rows) for t, rows in found.items()}


def head_rows(pipeline: config.Pipeline) -> dict[str, list[dict]]:
    """Each table's latest version, as a reader that pins nothing sees it."""
    found = {}
    for t in ("orders", "order_items"):
        ref = pipeline.table(t)
        found[t] = delta_table.rows_at(ref, delta_table.open_log(ref).version()).to_pylist()
    return found


class Gated:
    """The drain's part runner, which writes no more parts once stopped is set."""

    def __init__(self, runner: Any, stopped: threading.Event) -> None:
        self.runner, self.stopped = runner, stopped

    def run(self, part: Any, spark: Any) -> None:
        if self.stopped.is_set():
            raise Stopped
        self.runner.run(part, spark)


def stop_between_tables(drain: Drain) -> int:
    """Takes the next batch and applies it up to its first table's commit, then stops: the
    other table is not written and the batch stays open, as a drain killed there leaves
    them (one table at a time: the drain's workers=1). The batch's tick."""
    stopped = threading.Event()

    def stop(stage: str) -> None:
        if stage == "committed:1":
            stopped.set()
            raise Stopped

    drain.consumer.tick()
    batch = drain.consumer.next_batch()
    assert batch is not None
    runner = drain.applier.parts
    drain.applier.parts = Gated(runner, stopped)  # type: ignore[assignment]
    try:
        with pytest.raises(Stopped):
            drain.apply(batch, on_stage=stop)
    finally:
        drain.applier.parts = runner
    return batch.tick_id


def pipeline_of(dsn: str, root: Path, engine: str) -> config.Pipeline:
    return config.parse(
        {
            "source": {"dsn": dsn, "queue": "q", "consumer": "delta"},
            "target": {"path": str(root)},
            "tables": TABLES,
            "drain": {"engine": engine},
        }
    )


def config_file(tmp_path: Path, dsn: str, root: Path, engine: str) -> Path:
    conf = tmp_path / "pipeline.toml"
    entries = "".join(
        f'\n[[tables]]\nsource = "{t["source"]}"\ntarget = "{t["target"]}"\n' for t in TABLES
    )
    conf.write_text(
        f'[source]\ndsn = "{dsn}"\nqueue = "q"\nconsumer = "delta"\n'
        f'[target]\npath = "{root}"\n[drain]\nengine = "{engine}"\n{entries}'
    )
    return conf


def test_a_reader_at_the_consistent_tick_never_sees_half_a_transaction(
    writer, dsn, spark, tmp_path
):
    """Arrow engine: rounds of drains stopped between the two tables' commits of a batch,
    one SIGKILLed there, each followed by a drain that catches up, the writer going on
    throughout: after every step the tables at the last consistent tick hold whole
    transactions (the latest versions do not, after a stop), and a tick of an earlier
    step still reads as it did. Then Spark and Arrow read the same rows at one tick."""
    root = tmp_path / "delta"
    pipe = pipeline_of(dsn, root, "arrow")
    seen_torn_head = False
    earlier: dict[int, dict[str, list[dict]]] = {}
    with Drain(pipe, spark, workers=1) as drain:
        writer.wait_for(5)
        drain.run()  # the tables exist from here on
        for _ in range(3):
            writer.wait_for(5)
            stopped = stop_between_tables(drain)
            tick, _ = at_tick.last_consistent_tick(pipe)
            assert tick < stopped
            rows = arrow_rows(pipe)
            assert not torn(rows["orders"], rows["order_items"])
            seen_torn_head |= bool(torn(*head_rows(pipe).values()))
            earlier[tick] = ordered(rows)
            with pytest.raises(ConfigError, match="not consistent yet"):
                at_tick.pinned_versions(pipe, stopped)
            writer.wait_for(3)
            drain.run()
            rows = arrow_rows(pipe)
            assert not torn(rows["orders"], rows["order_items"])
        assert seen_torn_head, "no stop left the latest versions torn: the test has no teeth"

        writer.wait_for(5)
        conf = config_file(tmp_path, dsn, root, "arrow")
        assert drain_process(conf, kill_at="committed:1") == -signal.SIGKILL
        rows = arrow_rows(pipe)
        assert not torn(rows["orders"], rows["order_items"])
        drain.run()
        for tick, rows in earlier.items():  # read again through the tables' histories
            assert ordered(arrow_rows(pipe, tick)) == rows, tick

        writer.stop.set()
        drain.run()
    tick, _ = at_tick.last_consistent_tick(pipe)
    arrow = arrow_rows(pipe, tick)
    frames = at_tick.spark_tables(spark, pipe, tick)
    spark_rows = {t: [r.asDict() for r in f.collect()] for t, f in frames.items()}
    assert ordered(spark_rows) == ordered(arrow)
    assert not torn(arrow["orders"], arrow["order_items"])
    with psycopg.connect(dsn) as conn:  # caught up: the source's rows
        assert len(arrow["orders"]) == conn.execute("select count(*) from orders").fetchone()[0]
    _history_maps_versions_to_ticks(spark, pipe, tick)


def _history_maps_versions_to_ticks(spark, pipe: config.Pipeline, tick: int) -> None:
    """Each batch commit records its tick and appId, read alike by Spark's DESCRIBE HISTORY
    and delta-rs' history(); the last one's tick is the pinned tick or below."""
    ref = pipe.table("orders")
    by_spark = {
        int(r["version"]): json.loads(r["userMetadata"])
        for r in spark.sql(f"describe history {ref.sql_name}").collect()
        if r["userMetadata"]
    }
    by_delta_rs = {
        int(i["version"]): json.loads(i["userMetadata"])
        for i in delta_table.commit_infos(delta_table.open_log(ref))
        if i.get("userMetadata")
    }
    assert by_spark == by_delta_rs
    ticks = [m[TICK_KEY] for _, m in sorted(by_spark.items())]
    assert len(ticks) >= 5 and ticks == sorted(ticks) and ticks[-1] <= tick
    assert {m[APP_KEY].split("@")[0] for m in by_spark.values()} == {"q"}


def test_spark_engine_batches_stopped_between_tables_read_whole(writer, dsn, spark, tmp_path):
    """Spark engine: a batch stopped between its tables' commits, then caught up: at the
    last consistent tick, whole transactions in both Spark's and Arrow's reads."""
    pipe = pipeline_of(dsn, tmp_path / "delta", "spark")
    with Drain(pipe, spark, workers=1) as drain:
        writer.wait_for(5)
        drain.run()
        writer.wait_for(5)
        stop_between_tables(drain)
        frames = at_tick.spark_tables(spark, pipe)
        found = {t: [r.asDict() for r in f.collect()] for t, f in frames.items()}
        assert not torn(found["orders"], found["order_items"])
        assert torn(*head_rows(pipe).values()), "the stop left the latest versions whole"
        writer.stop.set()
        drain.run()
    rows = arrow_rows(pipe)
    assert not torn(rows["orders"], rows["order_items"])
    history = delta_table.commit_infos(delta_table.open_log(pipe.table("order_items")))
    routes = [json.loads(i["userMetadata"]) for i in history if i.get("userMetadata")]
    assert routes and all(r["cdc.write"] == "spark" and TICK_KEY in r for r in routes)
