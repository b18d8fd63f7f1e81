"""A table dropped and created again under its captured name is a new table: its target
keeps none of the old table's rows, whether the drain sees both tables' events in one batch
or in two, for a table a capture rule attaches and for one attached explicitly again; both
drain engines. Real PostgreSQL, Spark and Delta."""

from __future__ import annotations

import psycopg
import pytest

from cdc.engines.arrow import decode as driver_decode
from cdc.engines.arrow import write as driver_writes
from cdc.pg import capture, capture_rules, pgtypes
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Queue
from cdc.pipeline import compare
from cdc.pipeline.apply import BatchStats
from cdc.pipeline.drain import Drain
from tests.support import drainkit

pytestmark = pytest.mark.spark

TABLES = ("one", "two", "three")


def _spark_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every batch decoded, folded and written by Spark: the driver decodes nothing and may
    write no target."""
    monkeypatch.setattr(driver_decode, "decode", lambda *args: None)
    monkeypatch.setattr(driver_writes, "MAX_BYTES", -1)


def _tick(conn: psycopg.Connection) -> int:
    Queue(conn, "q").force_tick()
    return Queue(conn, "q").tick()


def _same(conn: psycopg.Connection, spark, pipe, name: str) -> None:
    cols = pgtypes.columns(conn, "public", name)
    expected = compare.source_rows(conn, "public", name)
    assert compare.delta_rows(spark, pipe.location(name), cols) == expected, name


@pytest.mark.parametrize("engine", ["driver", "spark"])
def test_a_recreated_table_keeps_none_of_the_old_rows(conn, dsn, spark, tmp_path, engine, request):
    """Old rows wait in the queue when their table is dropped and created again: the target
    ends with the new table's rows only (source {1, 10}, never {1, 2, 3, 10}). one: both
    tables' events in one batch, the new table with another column (the old events, which no
    longer fit it, are not quarantined); two: the drop in the first batch, the new rows in
    the next, and its history gets the marker as op X; three: attached explicitly, rows
    written before its new attach come by snapshot."""
    if engine == "spark":
        _spark_only(request.getfixturevalue("monkeypatch"))
    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()
    for name in TABLES:
        conn.execute(f"create table {name} (id int primary key, v text)")
    capture_rules.add(conn, "public.*", CaptureOptions(queue="q"), exclude=("three",))
    capture.attach(conn, "public.three", CaptureOptions(queue="q"))
    tables = [
        {"source": "public.three", "target": "three"},
        {"source": "public.*", "exclude": ["public.three"], "target": "{table}"},
    ]
    if engine == "spark":  # a history target is Spark's whatever the engine
        tables.append({"source": "public.tw?", "target": "{table}_history", "mode": "history"})
    pipe = drainkit.pipeline(dsn, str(tmp_path), tables)
    for name in TABLES:
        conn.execute(f"insert into {name} values (1, 'old'), (2, 'old')")
    stats: list[BatchStats] = []
    with Drain(pipe, spark) as drain:
        drain.run()
        # waiting in the queue when the tables go
        recreate = "drop table {0}; create table {0} (id int primary key, {1} text)"
        conn.execute("insert into two values (3, 'old')")
        conn.execute(recreate.format("two", "v"))
        first = _tick(conn)
        conn.execute("insert into one values (3, 'old'); insert into three values (3, 'old')")
        conn.execute(recreate.format("one", "w"))
        conn.execute(recreate.format("three", "v"))
        conn.execute("insert into three values (1, 'before its attach')")
        capture.attach(conn, "public.three", CaptureOptions(queue="q"))
        for name in TABLES:
            conn.execute(f"insert into {name} values (10, 'new')")
        conn.execute("insert into one values (1, 'new'); insert into two values (1, 'new')")
        last = _tick(conn)
        drain.run(on_batch=stats.append, stop_at_tick=first)
        drain.run(on_batch=stats.append, stop_at_tick=last)
        drain.run()  # the snapshot of three
    for name in TABLES:
        _same(conn, spark, pipe, name)
    assert not (tmp_path / "_quarantine").exists()
    on_driver = [s.on_driver for s in stats]
    # a batch with a table's marker is Spark's (as one with a TRUNCATE); the others the driver's
    assert on_driver == ([set(), {"two"}] if engine == "driver" else [set(), set()])
    if engine == "spark":
        history = spark.read.format("delta").load(pipe.location("two_history"))
        assert [(r.op, r.id) for r in history.orderBy("ev_id").collect()] == [
            ("I", 1), ("I", 2), ("I", 3), ("X", None), ("I", 10), ("I", 1)
        ]  # fmt: skip
