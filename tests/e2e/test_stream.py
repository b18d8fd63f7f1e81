"""The streaming source (cdc.stream) in Spark: a foreachBatch job into Delta SIGKILLed
mid-stream and restarted from its checkpoint loses and duplicates nothing; two streams with
consumers of their own each see every event, and one table's values come typed."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import signal
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import pytest

from cdc import stream
from cdc.pg import capture
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Queue
from tests.support import stream_job

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 180  # seconds for the job's JVM to start and register its consumer


def job_args(dsn: str, tmp_path: Path) -> list[str]:
    return [dsn, str(tmp_path / "checkpoint"), str(tmp_path / "a_changes")]


def job(dsn: str, tmp_path: Path, *flags: str) -> subprocess.Popen:
    """tests/support/stream_job.py in a process (and process group) of its own."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.stream_job", *job_args(dsn, tmp_path), *flags],
        cwd=ROOT,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def ended(proc: subprocess.Popen, timeout: float) -> bool:
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        return False
    return True


def reap(proc: subprocess.Popen) -> str:
    """Ends what is left of the job's process group (its JVM, Python workers); its stderr
    (once)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    if proc.stderr is None or proc.stderr.closed:
        return ""
    _, err = proc.communicate(timeout=60)
    return err or ""


def test_a_killed_foreach_batch_job_loses_and_duplicates_nothing(conn, dsn, spark, tmp_path):
    """The job, in a process of its own, is SIGKILLed right after its second micro-batch's
    Delta commit while a writer changes the table; its restart (availableNow) reruns that
    micro-batch (Delta skips the write: same txnVersion) and reads the rest: every event of
    the table is in Delta once."""
    Queue(conn, "q").create()
    conn.execute("create table a (id int primary key, v int)")
    capture.attach(conn, "public.a", CaptureOptions(queue="q", format="json"))
    proc = job(dsn, tmp_path, "--kill-after", "1")
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while Consumer(conn, "q", "changes").position() is None:
            assert proc.poll() is None, reap(proc)[-3000:]
            assert time.monotonic() < deadline, "the job did not register its consumer"
            time.sleep(0.2)
        n = 0
        while not ended(proc, 0.05):  # the writer runs until the job kills itself
            assert n < 5000, "the job did not reach its second micro-batch"
            with conn.transaction():
                conn.execute(
                    "insert into a select g, 0 from generate_series(%s::int, %s::int) g", (n, n + 3)
                )
                conn.execute("update a set v = v + 1 where id = %s", (n // 2,))
            n += 4
        assert proc.returncode == -signal.SIGKILL, reap(proc)[-3000:]
    finally:
        reap(proc)
    conn.execute("insert into a values (-1, 0)")  # a change while the job is down
    conn.execute("delete from a where id = 0")
    # the restart, in this process (the session's JVM: one start less), from the checkpoint
    stream_job.main([*job_args(dsn, tmp_path), "--available-now"])

    from deltalake import DeltaTable

    written = DeltaTable(str(tmp_path / "a_changes")).to_pyarrow_table().to_pylist()
    events = conn.execute(
        "select ev_id from cdc.event where ev_extra1 = 'public.a' order by ev_id"
    ).fetchall()
    assert sorted(r["ev_id"] for r in written) == [e for (e,) in events]
    assert {r["id"] for r in written if r["op"] == "I"} == set(range(-1, n))
    assert [r["id"] for r in written if r["op"] == "D"] == [0]


def test_two_streams_with_consumers_of_their_own_each_see_every_event(conn, dsn, spark, tmp_path):
    """Two streams, two consumers: each reads every event; the one given a table gets its
    values cast to the columns' types, as the drain casts them."""
    Queue(conn, "q").create()
    conn.execute(
        "create table t (id int primary key, amount numeric(8,2), at timestamptz, tags int[])"
    )
    conn.execute("create table u (k text primary key, n int)")
    capture.attach(conn, "public.t", CaptureOptions(queue="q", format="urlenc"))
    capture.attach(conn, "public.u", CaptureOptions(queue="q", format="sql"))
    for name in ("one", "two"):
        Consumer(conn, "q", name).register()
    conn.execute(
        "insert into t values (1, 12.5, '2025-03-04 05:06:07+00', '{1,2}'), (2, null, null, null)"
    )
    conn.execute("insert into u select 'k' || g, g from generate_series(1, 40) g")
    conn.execute("update t set amount = 99.99 where id = 2")
    conn.execute("update u set n = -n where n % 10 = 0")
    conn.execute("delete from t where id = 1")
    conn.execute("truncate u")

    Consumer(conn, "q", "one").tick()  # the streams do not tick: both stop at this tick
    options = {"dsn": dsn, "queue": "q", "tick": "false"}
    stream.register(spark)
    every = spark.readStream.format("cdc").options(consumer="one", **options).load()
    typed = stream.read(spark, table="public.t", consumer="two", **options)
    queries = [
        frame.writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / name))
        .trigger(availableNow=True)
        .start()
        for name, frame in (("stream_one", every), ("stream_two", typed))
    ]
    for query in queries:
        query.awaitTermination(300)
        assert query.exception() is None

    all_events = [e for (e,) in conn.execute("select ev_id from cdc.event order by ev_id")]
    one = spark.table("stream_one").orderBy("ev_id").collect()
    assert [r.ev_id for r in one] == all_events
    assert all(r.reason is None for r in one)
    assert [r.op for r in one if r.table == "public.u"][-1] == "R"
    assert [r.key for r in one if r.table == "public.u" and r.op == "U"] == [
        {"k": f"k{g}"} for g in (10, 20, 30, 40)
    ]

    two = spark.table("stream_two").orderBy("ev_id").collect()
    assert [r.ev_id for r in two] == [r.ev_id for r in one if r.table == "public.t"]
    rows = [(r.op, r.row.asDict()) for r in two]
    at = dt.datetime(2025, 3, 4, 5, 6, 7, tzinfo=dt.UTC)
    at = at.astimezone().replace(tzinfo=None)  # Spark's timestamps: the session's local time
    assert rows == [
        ("I", {"id": 1, "amount": Decimal("12.50"), "at": at, "tags": [1, 2]}),
        ("I", {"id": 2, "amount": None, "at": None, "tags": None}),
        ("U", {"id": 2, "amount": Decimal("99.99"), "at": None, "tags": None}),
        ("D", {"id": 1, "amount": Decimal("12.50"), "at": at, "tags": [1, 2]}),
    ]
    assert all(r.reason is None for r in two)
    [(last,)] = conn.execute("select last_tick_id from cdc.get_queue_info('q')").fetchall()
    for name in ("one", "two"):  # each consumer is past every batch
        assert Consumer(conn, "q", name).position() == last
