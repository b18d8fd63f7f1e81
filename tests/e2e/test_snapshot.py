"""Initial snapshots: existing rows into Delta, consistent with the queue, while writers keep
changing the table. Real PostgreSQL, real Spark, real Delta."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest

from cdc.errors import ConfigError
from cdc.pg import capture, pgtypes
from cdc.pg import source as source_module
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Queue
from cdc.pipeline import chunks, compare, snapshot
from cdc.pipeline.drain import Drain
from tests.support import drainkit
from tests.support.workloads import DDL, ROW, ROWS, Writers

pytestmark = pytest.mark.spark

CONF = [{"source": "public.s", "target": "s"}]


def _prepare(dsn: str, fmt: str) -> None:
    """Rows first (no events for them), then the capture: the snapshot must bring them."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        Queue(conn, "q").create()
        conn.execute(DDL)
        conn.execute(f"insert into s select {ROW} from generate_series(1, {ROWS}) g")
        capture.attach(conn, "public.s", CaptureOptions(queue="q", format=fmt))


def _drain_all(dsn: str, root: Path, spark) -> None:
    with Drain(drainkit.pipeline(dsn, str(root), CONF), spark) as drain:
        drain.run()


def _assert_mirrored(dsn: str, root: Path, spark) -> None:
    with psycopg.connect(dsn) as conn:
        cols = pgtypes.columns(conn, "public", "s")
        expected = compare.source_rows(conn, "public", "s")
    got = compare.delta_rows(spark, str(root / "s"), cols)
    assert len(got) == len(expected)
    assert got == expected


def test_snapshot_over_jdbc_with_writers_then_drain_equals_source(spark, tmp_path, monkeypatch):
    """Over TCP: chunks read by Spark JDBC in parallel key ranges, each range in the chunk's
    exported snapshot, while writers insert, update, move keys and delete; after draining,
    Delta equals the source."""
    ranges: list[int] = []
    read_jdbc = chunks.ChunkReader.read_jdbc

    def counting(self, spark, after, plan, url, props):
        ranges.append(len(plan.ranges(after)))
        return read_jdbc(self, spark, after, plan, url, props)

    monkeypatch.setattr(chunks.ChunkReader, "read_jdbc", counting)
    with drainkit.tcp_cluster() as dsn:
        _prepare(dsn, "json")
        pipe = drainkit.pipeline(dsn, str(tmp_path), CONF)
        loader = snapshot.Snapshot(pipe, spark, False, chunk_rows=ROWS // 2)
        loader.jdbc_min_rows = 0
        loader.on_driver = False  # as on a cluster: read by the executors
        with Writers(dsn, 1) as writers:
            result = loader.run("public.s", partitions=3)
            time.sleep(0.5)
        assert ranges[:2] == [3, 3]  # two full chunks, each read in three ranges
        assert writers.done > 0
        assert result.rows >= ROWS * 0.7 and result.quarantined == 0
        assert result.chunks >= 2
        _drain_all(dsn, tmp_path, spark)
        _assert_mirrored(dsn, tmp_path, spark)


def test_interrupted_snapshot_is_restarted(dsn, spark, tmp_path, caplog):
    """Killed after reading (before its commit), a snapshot leaves no table behind and
    releases the drain lock; run again (COPY path: a unix socket), it loads the table, and
    the drain then gives the source's state."""
    _prepare(dsn, "urlenc")
    pipe = drainkit.pipeline(dsn, str(tmp_path), CONF)
    config_file = tmp_path / "pipeline.toml"
    config_file.write_text(
        f"[source]\ndsn = '{dsn}'\nqueue = 'q'\nconsumer = 'delta'\n"
        f"[target]\npath = '{tmp_path}'\n[[tables]]\nsource = 'public.s'\ntarget = 's'\n"
    )
    env = {**os.environ, snapshot.KILL_AT_ENV: "read"}
    killed = subprocess.run(
        [sys.executable, "-m", "cdc.cli", "snapshot", "public.s", "--config", str(config_file),
         "--no-progress"],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert not (tmp_path / "s" / "_delta_log").exists()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("update s set t = 'between' where id % 100 = 0")
        conn.execute("delete from s where id % 100 = 1")
    caplog.set_level(logging.INFO, logger="cdc.progress")
    with Writers(dsn, 2):
        result = snapshot.Snapshot(pipe, spark, progress=True).run("public.s")
    assert result.rows > 0
    summary = [r.getMessage() for r in caplog.records if r.name == "cdc.progress"][-1]
    assert summary.startswith(f"snapshot of public.s: done, {result.rows:,} rows"), summary
    assert "rows/s" in summary
    _drain_all(dsn, tmp_path, spark)
    _assert_mirrored(dsn, tmp_path, spark)


def test_snapshot_refuses_a_table_without_capture_or_configuration(dsn, spark, tmp_path):
    with psycopg.connect(dsn, autocommit=True) as conn:
        Queue(conn, "q").create()
        conn.execute(DDL)
    pipe = drainkit.pipeline(dsn, str(tmp_path), CONF)
    with pytest.raises(ConfigError, match="attach its trigger first"):
        snapshot.Snapshot(pipe, spark, False).run("public.s")
    with pytest.raises(ConfigError, match="not in the configuration"):
        snapshot.Snapshot(pipe, spark, False).run("public.other")
    history = drainkit.pipeline(
        dsn, str(tmp_path), [{"source": "public.s", "target": "h", "mode": "history"}]
    )
    with pytest.raises(ConfigError, match="only history targets"):
        snapshot.Snapshot(history, spark, False).run("public.s")
    assert not (tmp_path / "s").exists()


def test_drain_waits_while_a_snapshot_holds_the_lock(dsn, spark, tmp_path):
    """The drain lock keeps batches out while a snapshot copies."""
    _prepare(dsn, "json")
    pipe = drainkit.pipeline(dsn, str(tmp_path), CONF)
    drain = Drain(pipe, spark)  # registers the consumer
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("update s set t = 'x' where id <= 10")
        applied: list[int] = []
        with source_module.drain_lock(conn, pipe.source, "test"):
            runner = threading.Thread(target=lambda: applied.append(drain.run("once")))
            runner.start()
            time.sleep(3)
            assert runner.is_alive() and not applied
        runner.join(300)
    drain.close()
    assert applied == [1]
