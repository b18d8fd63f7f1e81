"""cdc status and the Prometheus metrics: queue, consumer and tables of a real pipeline after a
real drain; idle is healthy, old pending events are not; rows deleted through deletion vectors
are not counted; the ticker's and a follow-mode drain's metrics served over HTTP."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import psycopg
import pytest

from cdc import cli, config
from cdc.cli import exitcodes
from cdc.ops import status
from cdc.pg import capture
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Queue
from cdc.pipeline.drain import Drain, serve_metrics

pytestmark = pytest.mark.spark


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _scrape(port: int, deadline: float = 60.0) -> str:
    until = time.monotonic() + deadline
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                return r.read().decode()
        except OSError:
            if time.monotonic() > until:
                raise
            time.sleep(0.5)


@pytest.fixture
def pipeline(dsn, spark, tmp_path):
    """Table a captured and drained, plus one event of a table not in the configuration."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        Queue(conn, "q").create()
        Consumer(conn, "q", "delta").register()
        conn.execute("create table a (id int primary key, v text)")
        conn.execute("create table stray (id int primary key)")
        for t in ("public.a", "public.stray"):
            capture.attach(conn, t, CaptureOptions(queue="q"))
        conn.execute("insert into a select g, 'v' || g from generate_series(1, 50) g")
        conn.execute("delete from a where id > 40")
        conn.execute("insert into stray values (1)")
    text = (
        f"[source]\ndsn = '{dsn}'\nqueue = 'q'\nconsumer = 'delta'\n"
        f"[target]\npath = '{tmp_path}'\n[[tables]]\nsource = 'public.a'\ntarget = 'a'\n"
        f"[metrics]\nport = {_free_port()}\n"
    )
    (tmp_path / "pipeline.toml").write_text(text)
    pipe = config.load(tmp_path / "pipeline.toml")
    with Drain(pipe, spark) as drain:
        drain.run()
    return pipe


def test_status_shows_queue_consumer_and_tables(pipeline, capsys):
    state = status.collect(pipeline)
    assert state.consumer.registered and state.consumer.pending_events == 0
    assert state.consumer.dead_letters == 0
    [a] = state.tables
    assert a.exists and a.rows == 40
    assert a.last_tick == state.consumer.last_tick
    assert a.delta_version is not None and a.delta_version >= 1
    assert a.quarantined == 0 and state.quarantined_other == 1
    assert a.dead_letters == 0
    assert state.health.state == status.OK
    assert cli.main(["status", "--config", str(pipeline.path), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["tables"][0]["rows"] == 40
    assert cli.main(["status", "--config", str(pipeline.path)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("health: ok\n") and "public.a" in text
    assert cli.main(["status", "--config", str(pipeline.path), "--prometheus"]) == 0
    prom = capsys.readouterr().out
    assert 'cdc_table_rows{target="a"} 40.0' in prom
    assert 'cdc_consumer_pending_events{consumer="delta",queue="q"} 0.0' in prom


def test_idle_after_a_drain_is_healthy_until_events_wait(pipeline, capsys):
    """An hour without a tick right after a good drain: healthy (exit 0). An event waiting
    that long: unhealthy (exit 3), in every output."""
    config_file = str(pipeline.path)
    with psycopg.connect(pipeline.source.dsn, autocommit=True) as conn:
        conn.execute("update cdc.tick set tick_time = tick_time - interval '1 hour'")
        assert cli.main(["status", "--config", config_file]) == exitcodes.OK
        assert capsys.readouterr().out.startswith("health: ok\n")
        conn.execute("insert into a values (300, 'late')")
        conn.execute("update cdc.event set ev_time = ev_time - interval '1 hour'")
    for output in ([], ["--json"], ["--prometheus"]):
        assert cli.main(["status", "--config", config_file, *output]) == exitcodes.UNHEALTHY
    assert 'cdc_pipeline_unhealthy{queue="q"} 1.0' in capsys.readouterr().out


def test_rows_deleted_through_deletion_vectors_are_not_counted(pipeline, spark):
    """A second drain deletes rows through deletion vectors: status counts the live rows (the
    log's record counts alone would still count them), in text, JSON and the metric."""
    from deltalake import DeltaTable

    from cdc.targets import delta_table

    # a small local target is written without deletion vectors until it grows
    delta_table.enable_deletion_vectors(spark, pipeline.table("a"))
    with psycopg.connect(pipeline.source.dsn, autocommit=True) as conn:
        conn.execute("delete from a where id <= 10")
    with Drain(pipeline, spark) as drain:
        drain.run()
    [a] = status.collect(pipeline).tables
    assert DeltaTable(a.location).count() == 40  # record counts: deleted rows included
    assert a.rows == 30
    prom = status.to_prometheus(status.collect(pipeline))
    assert 'cdc_table_rows{target="a"} 30.0' in prom


def test_the_ticker_serves_metrics(pipeline):
    port = _free_port()
    ticker = subprocess.Popen(
        [sys.executable, "-m", "cdc.cli", "ticker", "--dsn", pipeline.source.dsn,
         "--metrics-port", str(port)],
        env=os.environ.copy(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        text = _scrape(port)
    finally:
        ticker.terminate()
        ticker.wait(30)
    assert "cdc_queue_ticker_lag_seconds{" in text and 'queue="q"' in text
    assert ticker.returncode == 0


def test_a_follow_drain_serves_metrics(pipeline, spark):
    on_batch = serve_metrics(pipeline)
    drain = Drain(pipeline, spark)
    follower = threading.Thread(target=lambda: drain.run("follow", on_batch=on_batch))
    follower.start()
    try:
        with psycopg.connect(pipeline.source.dsn, autocommit=True) as conn:
            conn.execute("insert into a values (100, 'new')")
        until = time.monotonic() + 120
        while "cdc_drain_events_total 1.0" not in (text := _scrape(pipeline.metrics_port)):
            assert time.monotonic() < until, text
            time.sleep(0.5)
        assert re.search(r"^cdc_drain_batches_total [1-9]", text, re.M)
        assert 'cdc_table_rows{target="a"} 41.0' in text
    finally:
        drain.stopping.set()
        follower.join(120)
        drain.close()


def test_dead_letters_are_counted_per_table(pipeline):
    with psycopg.connect(pipeline.source.dsn, autocommit=True) as conn:
        conn.execute("insert into a values (200, 'doomed')")
        source = Consumer.for_source(conn, pipeline.source)
        source.tick()
        batch = source.next_batch()
        assert batch is not None
        [(ev_id,)] = conn.execute(
            "select ev_id from cdc.get_batch_events(%s)", (batch.batch_id,)
        ).fetchall()
        conn.execute("select cdc.event_dead(%s, %s, 'test')", (batch.batch_id, ev_id))
        batch.finish()
    state = status.collect(pipeline)
    assert state.consumer.dead_letters == 1
    assert state.tables[0].dead_letters == 1
    assert 'cdc_table_dead_letters{target="a"} 1.0' in "".join(
        f'{s.name}{{target="{s.labels["target"]}"}} {s.value}\n'
        for m in status.metrics(state)
        for s in m.samples
        if s.name == "cdc_table_dead_letters"
    )
