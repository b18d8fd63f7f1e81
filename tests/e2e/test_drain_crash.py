"""Crash safety: the drain process is SIGKILLed at each stage of a batch, then run again.

Each run is a separate process (``python -m cdc.cli drain``) with its own JVM, as a
scheduled drain would be. The stage comes from CDC_DRAIN_KILL_AT (cdc.pipeline.drain). After the
rerun, the mirror tables equal the source and the history table has exactly one row per
event. Tables are applied several at once: a kill after the n-th commit of a batch
("committed:<n>") lands while other tables are mid-MERGE or mid-commit.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest

from cdc import config
from cdc.pg import capture, pgtypes
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Queue
from cdc.pipeline import compare
from cdc.pipeline.drain import Drain

# Spark and Delta: run once per suite run (see scripts/test.sh), not once per server
pytestmark = pytest.mark.spark

STAGES = ["read", "table:a", "table:b", "merged"]


def write_config(path: Path, dsn: str, root: Path) -> Path:
    conf = path / "pipeline.toml"
    conf.write_text(
        f"""
[source]
dsn = "{dsn}"
queue = "q"
consumer = "delta"

[target]
path = "{root}"

[[tables]]
source = "public.a"
target = "a"

[[tables]]
source = "public.b"
target = "b"

[[tables]]
source = "public.a"
target = "a_history"
mode = "history"
"""
    )
    return conf


def drain(conf: Path, kill_at: str | None = None) -> int:
    env = dict(os.environ)
    env.pop("CDC_DRAIN_KILL_AT", None)
    if kill_at:
        env["CDC_DRAIN_KILL_AT"] = kill_at
    proc = subprocess.run(
        [sys.executable, "-m", "cdc.cli", "drain", "--config", str(conf)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if proc.returncode not in (0, -signal.SIGKILL):
        raise AssertionError(f"drain failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc.returncode


@pytest.fixture
def db(conn: psycopg.Connection) -> psycopg.Connection:
    return prepare(conn)


def prepare(conn: psycopg.Connection) -> psycopg.Connection:
    """Queue q with consumer delta; a (json) and b (sql) captured into it."""
    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()
    conn.execute("create table a (id int primary key, v text, n int)")
    conn.execute("create table b (k text primary key, x numeric(8,2))")
    capture.attach(conn, "public.a", CaptureOptions(queue="q", format="json"))
    capture.attach(conn, "public.b", CaptureOptions(queue="q", format="sql"))
    return conn


def workload(conn: psycopg.Connection, round_: int) -> None:
    base = round_ * 100
    conn.execute(f"insert into a select g, 'v' || g, g from generate_series({base}, {base + 30}) g")
    conn.execute(f"update a set n = n + 1, v = v || 'u' where id % 3 = 0 and id >= {base}")
    conn.execute(f"delete from a where id % 5 = 0 and id >= {base}")
    conn.execute(f"update a set id = id + 50 where id = {base + 1}")
    conn.execute(
        f"insert into b select 'k' || g, g / 4.0 from generate_series({base}, {base + 10}) g"
    )
    conn.execute(f"update b set x = x * 2 where k = 'k{base + 2}'")
    conn.execute(f"delete from b where k = 'k{base + 3}'")


def check(conn: psycopg.Connection, spark, root: Path) -> None:
    for table in ("a", "b"):
        cols = pgtypes.columns(conn, "public", table)
        assert compare.delta_rows(spark, str(root / table), cols) == compare.source_rows(
            conn, "public", table
        ), table
    events = conn.execute("select count(*) from cdc.event where ev_extra1 = 'public.a'").fetchone()[
        0
    ]
    hist = spark.read.format("delta").load(str(root / "a_history"))
    assert hist.count() == events
    assert hist.select("ev_id").distinct().count() == events


def test_sigkill_at_every_stage_then_rerun(db, dsn, spark, tmp_path):
    """Twice: a workload, then one drain killed at each stage in turn (each redoes the same
    batch and gets further: nothing read, one table committed, two, all but finish_batch),
    then a clean drain: the tables are right."""
    root = tmp_path / "delta"
    conf = write_config(tmp_path, dsn, root)
    for round_ in (1, 2):
        workload(db, round_)
        for stage in STAGES:
            assert drain(conf, kill_at=stage) == -signal.SIGKILL, stage
        assert drain(conf) == 0
        check(db, spark, root)


def test_creation_killed_before_its_first_commit(db, dsn, spark, tmp_path):
    """A drain killed while it created a target leaves a log folder without a commit (empty,
    or with a temporary file): the next drain creates the table there and applies, instead
    of marking the target failing."""
    root = tmp_path / "delta"
    (root / "a" / "_delta_log").mkdir(parents=True)
    (root / "b" / "_delta_log").mkdir(parents=True)
    (root / "b" / "_delta_log" / ".00000000000000000000.json.0f3c.tmp").write_text("{")
    conf = write_config(tmp_path, dsn, root)
    workload(db, 1)
    with Drain(config.load(conf), spark) as drainer:
        assert drainer.run() >= 1
    check(db, spark, root)
    assert not (root / "_quarantine_failing").exists()


def test_writers_keep_writing_while_the_drain_runs(db, dsn, spark, tmp_path, connect):
    """Writers change the tables during the drains; after a last drain the copy is exact."""
    root = tmp_path / "delta"
    conf = write_config(tmp_path, dsn, root)
    stop = threading.Event()
    errors: list[BaseException] = []

    def write() -> None:
        writer = connect()
        n = 0
        try:
            while not stop.is_set():
                n += 1
                workload(writer, 1000 + n)
                time.sleep(0.05)
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    pipeline = config.load(conf)
    drainer = Drain(pipeline, spark)
    thread = threading.Thread(target=write)
    thread.start()
    try:
        for _ in range(3):
            drainer.run()
    finally:
        stop.set()
        thread.join(30)
    try:
        assert not errors
        assert drainer.run() >= 1
    finally:
        drainer.close()
    check(db, spark, root)


def test_follow_applies_new_changes_and_stops_on_sigterm(db, dsn, spark, tmp_path):
    """--follow applies changes as they come, and SIGTERM ends it cleanly between batches."""
    root = tmp_path / "delta"
    conf = write_config(tmp_path, dsn, root)
    env = {k: v for k, v in os.environ.items() if k != "CDC_DRAIN_KILL_AT"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "cdc.cli", "drain", "--config", str(conf), "--follow"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        for round_ in (1, 2):
            workload(db, round_)
            expected = compare.source_rows(db, "public", "a")
            cols = pgtypes.columns(db, "public", "a")
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                # the first commit's file, not just the folder: the drain may be writing it
                first_commit = root / "a" / "_delta_log" / f"{0:020d}.json"
                if (
                    first_commit.exists()
                    and compare.delta_rows(spark, str(root / "a"), cols) == expected
                ):
                    break
                time.sleep(1)
            else:
                raise AssertionError(f"round {round_} not applied within 120 s")
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out[-3000:]
    assert "stopping after the current batch" in out
    check(db, spark, root)


MANY = ["m1", "m2", "m3", "m4", "m5"]
MANY_FORMATS = ["json", "sql", "urlenc", "json", "sql"]


def write_many_config(path: Path, dsn: str, root: Path) -> Path:
    conf = path / "many.toml"
    entries = "".join(f'\n[[tables]]\nsource = "public.{t}"\ntarget = "{t}"\n' for t in MANY)
    conf.write_text(
        f'[source]\ndsn = "{dsn}"\nqueue = "q"\nconsumer = "delta"\n'
        f'[target]\npath = "{root}"\n{entries}'
        '\n[[tables]]\nsource = "public.m1"\ntarget = "m1_history"\nmode = "history"\n'
    )
    return conf


@pytest.fixture
def many(conn: psycopg.Connection) -> psycopg.Connection:
    """Queue q, consumer delta, five tables captured in the three formats."""
    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()
    for table, fmt in zip(MANY, MANY_FORMATS, strict=True):
        conn.execute(f"create table {table} (id int primary key, v text, n int)")
        capture.attach(conn, f"public.{table}", CaptureOptions(queue="q", format=fmt))
    return conn


def many_workload(conn: psycopg.Connection, round_: int) -> None:
    base = round_ * 100
    for table in MANY:
        conn.execute(
            f"insert into {table} select g, 'v' || g, g from generate_series({base}, {base + 20}) g"
        )
        conn.execute(f"update {table} set n = n + 1, v = v || 'u' where id % 3 = 0")
        conn.execute(f"delete from {table} where id % 7 = 0 and id >= {base}")
        conn.execute(f"update {table} set id = id + 50 where id = {base + 1}")


def check_many(conn: psycopg.Connection, spark, root: Path) -> None:
    for table in MANY:
        cols = pgtypes.columns(conn, "public", table)
        assert compare.delta_rows(spark, str(root / table), cols) == compare.source_rows(
            conn, "public", table
        ), table
    events = conn.execute(
        "select count(*) from cdc.event where ev_extra1 = 'public.m1'"
    ).fetchone()[0]
    hist = spark.read.format("delta").load(str(root / "m1_history"))
    assert hist.count() == events
    assert hist.select("ev_id").distinct().count() == events


def committed_ticks(root: Path) -> dict[str, int]:
    """Per target, the Delta commits the drain made (its marked writes)."""
    from deltalake import DeltaTable

    found = {}
    for table in [*MANY, "m1_history"]:
        path = root / table
        if (path / "_delta_log").exists():
            history = DeltaTable(str(path)).history()
            found[table] = len([h for h in history if h.get("operation") in ("MERGE", "WRITE")])
    return found


@pytest.mark.timeout(1800)
def test_sigkill_while_several_tables_commit_then_rerun(many, dsn, spark, tmp_path):
    """Six targets applied four at a time: drains killed after the batch's 2nd table commit
    (the others mid-MERGE or mid-commit), after a named table's commit, after the 3rd, then
    a clean drain: every mirror holds exactly its source's rows and the history one row per
    event: no batch lost or applied twice in any target."""
    root = tmp_path / "delta"
    conf = write_many_config(tmp_path, dsn, root)
    rounds = [["committed:2", "table:m4"], ["committed:3"]]
    for round_, stages in enumerate(rounds, start=1):
        many_workload(many, round_)
        for stage in stages:
            assert drain(conf, kill_at=stage) == -signal.SIGKILL, stage
        if round_ == 1:
            # the kills came while tables were committing: some targets hold the batch
            assert committed_ticks(root), "no target committed before the kills"
        assert drain(conf) == 0
        check_many(many, spark, root)
