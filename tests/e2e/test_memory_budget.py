"""One transaction larger than the drain's memory budget (cdc.pipeline.spool): spilled to
Parquet as it is read, applied by Spark exactly and once, the spill removed; and the drain's
Python process stays within the budget whatever the transaction's size."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from cdc import config
from cdc.errors import CdcError
from cdc.pg import capture, pgtypes
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Queue
from cdc.pipeline import compare
from cdc.pipeline.drain import Drain
from tests.support import drainkit

pytestmark = pytest.mark.spark


class Crash(Exception):
    """Stands for a drain killed after its tables committed, before finish_batch."""


def _budget_pipeline(
    dsn: str, root: Path, budget: str, tables: list[str]
) -> tuple[config.Pipeline, Path]:
    spill = root / "spill"
    data = {
        "source": {"dsn": dsn, "queue": "q", "consumer": "delta"},
        "target": {"path": str(root / "delta")},
        "tables": [{"source": f"public.{t}", "target": t} for t in tables],
        "drain": {"memory_budget": budget, "spill_dir": str(spill)},
    }
    return config.parse(data), spill


def _same(conn, spark, pipeline, table: str) -> None:
    cols = pgtypes.columns(conn, "public", table)
    src = compare.source_rows(conn, "public", table)
    dst = compare.delta_rows(spark, pipeline.location(table), cols)
    assert src == dst


def test_a_batch_over_the_budget_is_spilled_and_applied_exactly_once(conn, dsn, spark, tmp_path):
    """A transaction over the budget's share is spilled, applied by Spark (no driver write),
    equal to the source in every format, a rerun after a crash before finish_batch changes
    nothing, and the spill folder is gone afterwards."""
    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()
    for name, fmt in (("a", "json"), ("b", "urlenc"), ("c", "sql")):
        conn.execute(f"create table {name} (id int primary key, v text, n numeric(10,2))")
        capture.attach(conn, f"public.{name}", CaptureOptions(queue="q", format=fmt))
    conn.execute("create table stray (id int primary key)")
    capture.attach(conn, "public.stray", CaptureOptions(queue="q"))
    pipeline, spill = _budget_pipeline(dsn, tmp_path, "64KiB", ["a", "b", "c"])
    with conn.transaction():
        for name in ("a", "b", "c"):
            conn.execute(
                f"insert into {name} select g, repeat('x', 200) || g, g / 4.0"
                " from generate_series(1, 400) g"
            )
            conn.execute(f"update {name} set v = 'u' || id, n = -n where id % 3 = 0")
            conn.execute(f"delete from {name} where id % 7 = 0")
            conn.execute(f"update {name} set id = id + 1000 where id = 11")  # a key change
        conn.execute("insert into stray values (1)")
    seen = []
    with Drain(pipeline, spark) as drain:
        drain.consumer.tick()
        batch = drain._next_batch()
        assert batch is not None

        def crash(stage: str) -> None:
            if stage == "merged":
                raise Crash

        with pytest.raises(Crash):
            drain.apply(batch, on_stage=crash)
        assert not any(spill.iterdir()), "the spill stays after the batch"
        drain.run(on_batch=seen.append)
    applied = [s for s in seen if s.events]
    assert [s.read for s in applied] == ["spilled"]
    assert applied[0].on_driver == set()
    for name in ("a", "b", "c"):
        _same(conn, spark, pipeline, name)
    assert not any(spill.iterdir())
    # the stray table's event, once
    quarantined = spark.read.format("delta").load(pipeline.location(pipeline.quarantine))
    assert quarantined.count() == 1


def test_a_batch_within_the_budget_stays_on_the_driver(conn, dsn, spark, tmp_path):
    """The same transaction within the budget is read into memory and written from the
    driver: the budget moves only what does not fit."""
    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()
    conn.execute("create table a (id int primary key, v text, n numeric(10,2))")
    capture.attach(conn, "public.a", CaptureOptions(queue="q"))
    pipeline, _ = _budget_pipeline(dsn, tmp_path, "256MiB", ["a"])
    conn.execute("insert into a select g, 'v' || g, g from generate_series(1, 400) g")
    seen = []
    with Drain(pipeline, spark) as drain:
        drain.run(on_batch=seen.append)
    assert [(s.read, s.on_driver) for s in seen if s.events] == [("copy", {"a"})]
    _same(conn, spark, pipeline, "a")


def test_on_a_cluster_an_outgrown_batch_is_read_again_over_jdbc(conn, dsn, spark, tmp_path):
    """Without a spill folder (a cluster master: the driver's disk is not the executors'), a
    batch past the budget is refused where JDBC cannot reach the source (a unix socket: the
    message names the ways out, the batch stays unfinished and the connection usable), and
    read by the executors over JDBC where it can, exactly: at once, when a sample of its
    events says it will not fit."""
    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()
    conn.execute("create table a (id int primary key, v text, n numeric(10,2))")
    capture.attach(conn, "public.a", CaptureOptions(queue="q"))
    conn.execute("insert into a select g, repeat('x', 300), g from generate_series(1, 500) g")
    pipeline, _ = _budget_pipeline(dsn, tmp_path, "64KiB", ["a"])
    with Drain(pipeline, spark) as drain:
        drain.reader.spill_dir = None  # as on a cluster master without drain.spill_dir
        with pytest.raises(CdcError, match=r"drain\.spill_dir.*not a unix socket"):
            drain.run()
        assert drain.conn.execute("select 1").fetchone() == (1,)
        assert drain.consumer.next_batch() is not None  # the same batch, not finished
    with drainkit.tcp_cluster() as tcp, psycopg.connect(tcp, autocommit=True) as remote:
        Queue(remote, "q").create()
        Consumer(remote, "q", "delta").register()
        remote.execute("create table a (id int primary key, v text, n numeric(10,2))")
        capture.attach(remote, "public.a", CaptureOptions(queue="q"))
        remote.execute("insert into a select g, repeat('x', 300), g from generate_series(1, 500) g")
        remote.execute("update a set v = 'short' where id % 2 = 0")
        pipeline, _ = _budget_pipeline(tcp, tmp_path / "tcp", "64KiB", ["a"])
        seen = []
        with Drain(pipeline, spark) as drain:
            drain.reader.spill_dir = None
            drain.run(on_batch=seen.append)
        assert [s.read for s in seen if s.events] == ["jdbc"]
        # a sample of the batch's events said it would not fit: read by JDBC at once, not
        # read with COPY up to the budget first
        rule = next(s.read_rule for s in seen if s.events)
        assert re.search(r"about [\d,]+ bytes of events \(sampled\), over the memory", rule)
        _same(remote, spark, pipeline, "a")


PEAK = re.compile(r"peak memory: python ([\d.]+) MB")


def _drain_peak(config: Path) -> float:
    """The Python process's peak resident memory (MB, the kernel's VmHWM) of `cdc drain`."""
    done = subprocess.run(
        [sys.executable, "-m", "cdc.cli", "drain", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = PEAK.search(done.stderr)
    assert found, done.stderr[-3000:]
    return float(found[1])


def test_the_drain_process_stays_within_its_budget(conn, dsn, spark, tmp_path):
    """An 80 MB transaction drained by `cdc drain` with a 64 MiB budget: the Python process's
    peak grows by less than the budget over the same drain's peak on a tiny transaction (the
    driver path held such a batch whole, at about eight times its size, before the budget),
    and the target holds every row."""
    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()
    tables = {"tiny": 10, "big": 80_000}
    for table in tables:
        conn.execute(f"create table {table} (id bigint primary key, payload text)")
        capture.attach(conn, f"public.{table}", CaptureOptions(queue="q", mode="statement"))
    config_file = tmp_path / "pipeline.toml"
    config_file.write_text(
        f"[source]\ndsn = {dsn!r}\nqueue = 'q'\nconsumer = 'delta'\n"
        f"[target]\npath = {str(tmp_path / 'delta')!r}\n"
        + "".join(f"[[tables]]\nsource = 'public.{t}'\ntarget = '{t}'\n" for t in tables)
        + f"[drain]\nmemory_budget = '64MiB'\nspill_dir = {str(tmp_path / 'spill')!r}\n"
    )
    peaks = {}
    for table, rows in tables.items():
        conn.execute(
            f"insert into {table} select g, repeat(md5(g::text), 31) from generate_series(1, %s) g",
            (rows,),
        )
        peaks[table] = _drain_peak(config_file)
        written = spark.read.format("delta").load(str(tmp_path / "delta" / table))
        found = written.selectExpr("count(distinct id)", "sum(length(payload))").first()
        assert tuple(found) == (rows, rows * 992)
    assert peaks["big"] - peaks["tiny"] < 64, peaks
