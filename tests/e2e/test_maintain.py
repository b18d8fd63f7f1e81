"""cdc maintain and cdc sql on a real pipeline: OPTIMIZE compacts (ordered by key) and VACUUM
runs while a follow-mode drain keeps applying batches; the mirror still equals its source;
Spark SQL sees the tables under their target names."""

from __future__ import annotations

import json
import threading
import time

import psycopg
import pytest

from cdc import cli, config
from cdc.errors import ConfigError
from cdc.ops import maintain
from cdc.pg import capture, pgtypes
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Queue
from cdc.pipeline import compare
from cdc.pipeline.drain import Drain
from cdc.targets import delta_table

pytestmark = pytest.mark.spark


@pytest.fixture
def pipeline(dsn, tmp_path):
    with psycopg.connect(dsn, autocommit=True) as conn:
        Queue(conn, "q").create()
        Consumer(conn, "q", "delta").register()
        conn.execute("create table a (id int primary key, v text)")
        capture.attach(conn, "public.a", CaptureOptions(queue="q"))
    (tmp_path / "pipeline.toml").write_text(
        f"[source]\ndsn = '{dsn}'\nqueue = 'q'\nconsumer = 'delta'\n"
        f"[target]\npath = '{tmp_path / 'delta'}'\n[[tables]]\nsource = 'public.a'\n"
        "target = 'a'\n"
    )
    return config.load(tmp_path / "pipeline.toml")


def _files(spark, pipeline) -> int:
    return delta_table.files(spark, pipeline.table("a"))


def test_maintain_beside_a_running_drain(pipeline, spark):
    dsn = pipeline.source.dsn
    drain = Drain(pipeline, spark)
    for n in range(4):  # a few batches: a few small files
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                "insert into a select g, 'v' || g from generate_series(%s::int, %s::int) g",
                (n * 100 + 1, n * 100 + 100),
            )
        drain.run()
    assert _files(spark, pipeline) >= 4
    stop = threading.Event()

    def write() -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            k = 1000
            while not stop.is_set():
                k += 1
                conn.execute("insert into a values (%s, 'w')", (k,))
                conn.execute("update a set v = v || '+' where id = %s", (k % 400 + 1,))
                time.sleep(0.01)

    writer = threading.Thread(target=write)
    follower = threading.Thread(target=lambda: drain.run("follow"))
    writer.start()
    follower.start()
    try:
        for _ in range(3):
            done = maintain.maintain(pipeline, spark, ["a"])
            assert [m.target for m in done] == ["a"]
    finally:
        stop.set()
        writer.join()
        time.sleep(2)
        drain.stopping.set()
        follower.join(300)
    assert not follower.is_alive()
    drain.stopping.clear()  # the stop was for the follower: catch up on what it left
    drain.run()
    drain.close()
    [m] = maintain.maintain(pipeline, spark, ["a"], vacuum=False)
    assert m.files_after == 1 <= m.files_before
    with psycopg.connect(dsn) as conn:
        cols = pgtypes.columns(conn, "public", "a")
        assert compare.delta_rows(spark, pipeline.location("a"), cols) == compare.source_rows(
            conn, "public", "a"
        )
    with pytest.raises(ConfigError, match="not a target"):
        maintain.maintain(pipeline, spark, ["nope"])


def test_concurrent_conflicts_are_recognised_and_retried():
    calls = []

    class ConcurrentAppendException(Exception):
        pass

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ConcurrentAppendException("files were added by a concurrent update")
        return "done"

    assert delta_table.retry_conflicts(flaky, "test") == "done" and len(calls) == 3
    with pytest.raises(ValueError):
        delta_table.retry_conflicts(lambda: (_ for _ in ()).throw(ValueError("no")), "test")


def test_sql_over_the_replicated_tables(pipeline, spark, capsys):
    with psycopg.connect(pipeline.source.dsn, autocommit=True) as conn:
        conn.execute("insert into a select g, 'v' || g from generate_series(1, 10) g")
    with Drain(pipeline, spark) as drain:
        drain.run()
    config_file = str(pipeline.path)
    assert cli.main(["sql", "select count(*) as n, max(id) as top from a", "--config",
                     config_file, "--format", "json"]) == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out) == {"n": 10, "top": 10}
    assert cli.main(["sql", "select id, v from a order by id", "--config", config_file,
                     "--limit", "2"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "v1" in out and "v2" in out and "v3" not in out and "(2 rows)" in out
    assert cli.main(["sql", "select * from nope", "--config", config_file]) == 1
    assert "tables here: a" in capsys.readouterr().err
