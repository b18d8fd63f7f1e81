"""Chunked snapshots: key ranges read in their own short snapshots while writers and the
drain go on, resumed after a kill, served by the drain's runner between batches, and the
faults (a dropped table, a server restart mid-chunk). Real PostgreSQL, Spark and Delta."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest

from cdc.errors import ConfigError
from cdc.pg import capture, install, pgtypes
from cdc.pg import source as source_module
from cdc.pg.capture import CaptureOptions
from cdc.pg.consumer import Consumer
from cdc.pg.queue import Queue
from cdc.pipeline import chunks, compare, snapshot
from cdc.pipeline.drain import Drain
from cdc.pipeline.snapshot_runner import SnapshotRunner
from cdc.targets import snapshots
from tests.support import drainkit, servers
from tests.support.servers import PG15_BIN
from tests.support.workloads import DDL, ROW, ROWS

pytestmark = pytest.mark.spark

# keys whose orders differ: text (with case and accents), an enum (declaration order in
# PostgreSQL, text order in Spark) and a numeric without precision (kept as text in Spark:
# "10" sorts before "9" there) in a composite key
SHAPES = """
create table ki (id int primary key, v text);
insert into ki select g, 'v' || g from generate_series(1, 300) g;
create table kt (k text primary key, v int);
insert into kt select x, 0 from unnest(array['a', 'B', 'é', 'b', 'A', 'É', 'z', 'Z', 'ä']) x;
insert into kt select 'k' || g, g from generate_series(1, 200) g;
create type mood as enum ('zebra', 'apple', 'Mango');
create table kc (m mood, n numeric, v text, primary key (m, n));
insert into kc select m, g / 4.0, 'v' || g
  from unnest(enum_range(null::mood)) m, generate_series(1, 80) g;
"""
TABLES = ("ki", "kt", "kc")


def _conf(*names: str) -> list[dict[str, str]]:
    return [{"source": f"public.{n}", "target": n} for n in names]


def _capture(conn: psycopg.Connection, names: tuple[str, ...], fmt: str = "json") -> None:
    for name in names:
        capture.attach(conn, f"public.{name}", CaptureOptions(queue="q", format=fmt))


def _assert_equal(dsn: str, root: Path, spark, name: str) -> None:
    """The Delta table holds exactly the source's rows (compared as sets: the two sides
    order these keys differently)."""
    with psycopg.connect(dsn) as conn:
        cols = pgtypes.columns(conn, "public", name)
        expected = compare.source_rows(conn, "public", name)
    got = compare.delta_rows(spark, str(root / name), cols)
    assert sorted(got, key=repr) == sorted(expected, key=repr), name


class ShapeWriters:
    """Inserts, updates and deletes on ki, kt and kc in small transactions, until stopped;
    inserts within bounded key sets, so that the copy catches up with them."""

    def __init__(self, dsn: str) -> None:
        self.dsn, self.rng = dsn, random.Random(7)
        self.stop, self.done = threading.Event(), 0
        self.thread = threading.Thread(target=self._run)

    def __enter__(self) -> ShapeWriters:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    def _run(self) -> None:
        statements = [
            (
                "insert into ki values (%s, 'new') on conflict do nothing",
                lambda g: (1000 + g % 200,),
            ),
            ("update ki set v = v || '+' where id = %s", lambda g: (g % 300 + 1,)),
            ("delete from ki where id = %s", lambda g: (g % 300 + 1,)),
            ("insert into kt values (%s, 1) on conflict do nothing", lambda g: (f"é{g % 100}",)),
            ("update kt set v = v + 1 where k = %s", lambda g: (f"k{g % 200 + 1}",)),
            ("delete from kt where k = %s", lambda g: (f"k{g % 200 + 1}",)),
            ("update kc set v = v || '+' where n = %s", lambda g: (g % 80 / 4,)),
            ("delete from kc where m = 'apple' and n = %s", lambda g: (g % 80 / 4,)),
            (
                "insert into kc values ('Mango', %s, 'x') on conflict do nothing",
                lambda g: (g % 50 + 0.5,),
            ),
        ]
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            while not self.stop.is_set():
                with conn.transaction():
                    for _ in range(self.rng.randint(1, 5)):
                        query, args = self.rng.choice(statements)
                        conn.execute(query, args(self.rng.randint(1, 10_000)))
                self.done += 1
                time.sleep(0.05)


def test_chunked_snapshots_under_writes_equal_the_source(dsn, spark, tmp_path):
    """Integer, text and composite (enum, numeric) keys copied in many small chunks while
    writers change every table; after draining, each Delta table equals its source."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        Queue(conn, "q").create()
        conn.execute(SHAPES)
        _capture(conn, TABLES)
    pipe = drainkit.pipeline(dsn, str(tmp_path), _conf(*TABLES))
    loader = snapshot.Snapshot(pipe, spark, progress=False, chunk_rows=50)
    with ShapeWriters(dsn) as writers:
        results = [loader.run(f"public.{name}") for name in TABLES]
    assert writers.done > 0
    assert all(r.chunks > 1 for r in results), [r.chunks for r in results]
    with Drain(pipe, spark) as drain:
        drain.run()
    for name in TABLES:
        _assert_equal(dsn, tmp_path, spark, name)
    # The drain's batches end on a tick taken after every copy ended: each copy is covered
    # by the stream, so the drain marked it done.
    states = snapshots.read_local(snapshot.store_of(pipe))
    assert {states[n].state for n in TABLES} == {snapshots.DONE}


def _prepare_s(dsn: str, fmt: str = "urlenc") -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        Queue(conn, "q").create()
        conn.execute(DDL)
        conn.execute(f"insert into s select {ROW} from generate_series(1, {ROWS}) g")
        capture.attach(conn, "public.s", CaptureOptions(queue="q", format=fmt))


def test_killed_snapshot_resumes_after_its_last_saved_chunk(dsn, spark, tmp_path):
    """`cdc snapshot` killed after chunk 3's commit but before its progress was saved
    resumes after chunk 2 (rows not copied again from zero), does chunk 3 again, and the
    drain then gives the source's state."""
    _prepare_s(dsn)
    config_file = tmp_path / "pipeline.toml"
    config_file.write_text(
        f"[source]\ndsn = '{dsn}'\nqueue = 'q'\nconsumer = 'delta'\n"
        f"[target]\npath = '{tmp_path}'\n[[tables]]\nsource = 'public.s'\ntarget = 's'\n"
    )
    env = {**os.environ, snapshot.KILL_AT_ENV: "merged:3"}
    killed = subprocess.run(
        [sys.executable, "-m", "cdc.cli", "snapshot", "public.s", "--config", str(config_file),
         "--chunk-rows", "2000", "--no-progress"],
        env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert killed.returncode == -9, killed.stderr[-2000:]
    pipe = drainkit.pipeline(dsn, str(tmp_path), [{"source": "public.s", "target": "s"}])
    saved = snapshots.read_local(snapshot.store_of(pipe))["s"]
    assert (saved.state, saved.chunks, saved.rows) == (snapshots.RUNNING, 2, 4000)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("update s set t = 'between' where id % 100 = 0")
        conn.execute("delete from s where id % 100 = 1")
    result = snapshot.Snapshot(pipe, spark, progress=False, chunk_rows=2000).run("public.s")
    assert result.resumed_at == 4000
    final = snapshots.read_local(snapshot.store_of(pipe))["s"]
    assert final.state == snapshots.COPIED
    assert final.chunks == 2 + result.chunks
    assert final.rows == 4000 + result.rows
    assert final.started == saved.started  # the same snapshot, resumed
    with Drain(pipe, spark) as drain:
        drain.run()
    _assert_equal(dsn, tmp_path, spark, "s")


def test_runner_interleaves_chunks_with_other_tables_batches(dsn, spark, tmp_path):
    """In the drain, a snapshot requested by a signal runs one chunk between batches: the
    other table's batches keep being applied while it copies; it is done after the next
    batch, and both targets equal their sources."""
    _prepare_s(dsn, "json")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("create table o (id int primary key, v text)")
        capture.attach(conn, "public.o", CaptureOptions(queue="q", format="json"))
    pipe = drainkit.pipeline(dsn, str(tmp_path), _conf("s", "o"))
    seen: list[tuple[int, int]] = []  # (snapshot chunks, rows of o in Delta) per round
    with Drain(pipe, spark) as drain:
        runner = SnapshotRunner(pipe, spark, drain.conn, chunk_rows=5000, partitions=1)
        runner.on_signals([("public.s", json.dumps({"table": "public.s"}))], tick_id=1)
        runner.on_signals([("public.s", json.dumps({"table": "public.s"}))], tick_id=1)
        assert len(runner.jobs) == 1  # the same batch's signal registers once
        rounds = 0
        while runner.jobs and rounds < 40:
            rounds += 1
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute("insert into o values (%s, 'r')", (rounds,))
                conn.execute("update s set t = t || '+' where id %% 50 = %s", (rounds,))
                conn.execute("delete from s where id = %s", (rounds * 97,))
            drain.consumer.tick()
            with source_module.drain_lock(drain.conn, pipe.source, "test"):
                batch = drain._next_batch()
                if batch is not None:
                    drain.apply(batch)
                    runner.after_batch(batch)
                runner.step(drain.consumer.position(), 0)
            job = runner.jobs.get("public.s")
            o_rows = spark.read.format("delta").load(str(tmp_path / "o")).count()
            seen.append((job.state.chunks if job else -1, o_rows))
    assert not runner.jobs, seen
    middle = [o_rows for chunk, o_rows in seen if 0 < chunk < 4]
    assert middle and max(middle) >= 1, seen  # o applied while the copy was under way
    state = snapshots.read_local(snapshot.store_of(pipe))["s"]
    assert state.state == snapshots.DONE and state.tick_id == 1
    with Drain(pipe, spark) as drain:
        drain.run()
    _assert_equal(dsn, tmp_path, spark, "s")
    _assert_equal(dsn, tmp_path, spark, "o")


def test_dropped_table_marks_its_snapshot_failed_and_the_runner_goes_on(dsn, spark, tmp_path):
    """A table dropped between two chunks: its snapshot is failed with a reason that names
    it (as cdc status reads it), no exception reaches the drain, nothing remains to do."""
    _prepare_s(dsn)
    pipe = drainkit.pipeline(dsn, str(tmp_path), _conf("s"))
    with psycopg.connect(dsn, autocommit=True) as conn:
        Consumer.for_source(conn, pipe.source).register()
        runner = SnapshotRunner(pipe, spark, conn, chunk_rows=5000)
        runner.on_signals([("public.s", "{}"), ("public.nothere", "{}")], tick_id=1)
        assert runner.step(None, 0) is True
        conn.execute("drop table s")
        assert runner.step(None, 0) is False
    state = snapshots.read_local(snapshot.store_of(pipe))["s"]
    assert state.state == snapshots.FAILED
    assert "public.s" in (state.reason or "") and "does not exist" in (state.reason or "")
    assert (state.chunks, state.rows) == (1, 5000)


def test_server_restart_mid_chunk_does_the_chunk_again(spark, tmp_path, monkeypatch):
    """The server restarts while chunk 2 is being read: `cdc snapshot` reconnects, reads
    and writes that chunk again, and the result equals the source."""
    read_next = chunks.ChunkReader.read_next_arrow  # COPY, for the driver's cast or Spark's
    calls: list[int] = []
    with servers.cluster(PG15_BIN, servers.FAST) as admin:
        install.install(admin)

        def restarting(self, after, rows):
            calls.append(len(calls) + 1)
            if len(calls) == 2:
                servers.restart(admin, PG15_BIN)  # cuts this chunk's connection
            return read_next(self, after, rows)

        monkeypatch.setattr(chunks.ChunkReader, "read_next_arrow", restarting)
        _prepare_s(admin)
        pipe = drainkit.pipeline(admin, str(tmp_path), _conf("s"))
        result = snapshot.Snapshot(pipe, spark, progress=False, chunk_rows=8000).run("public.s")
        assert result.chunks == 3 and result.rows == ROWS
        assert len(calls) == 4  # chunk 2 read twice
        with Drain(pipe, spark) as drain:
            drain.run()
        _assert_equal(admin, tmp_path, spark, "s")


def test_request_queues_the_snapshot_signal(dsn, tmp_path):
    """`cdc snapshot --request` puts the signal event in the queue for the drain: ev_type
    cdc.snapshot, the table in ev_data and ev_extra1; an unknown table is refused."""
    _prepare_s(dsn)
    pipe = drainkit.pipeline(dsn, str(tmp_path), _conf("s"))
    with psycopg.connect(dsn, autocommit=True) as conn:
        consumer = Consumer.for_source(conn, pipe.source)
        consumer.register()
        assert snapshot.request(pipe, "public.s") == "public.s"
        with pytest.raises(ConfigError, match="does not exist"):
            snapshot.request(pipe, "public.nothere")
        consumer.tick()
        with consumer.batch() as batch:
            events = [e for chunk in batch.chunks() for e in chunk]
    assert [(e.ev_type, json.loads(e.ev_data), e.ev_extra1) for e in events] == [
        ("cdc.snapshot", {"table": "public.s"}, "public.s")
    ]


TYPED = """
create table typed (id int primary key, s smallint, b bigint, n numeric(12,2), r real,
  f float8, ok bool, d date, ts timestamp, tz timestamptz, raw bytea, t text, a int[],
  u uuid, free numeric);
insert into typed select g, (g % 100)::smallint, g::bigint * 1000000007, g / 7.0, g / 3.0, g / 11.0,
  g % 2 = 0, date '2024-02-29' + g, timestamp '2024-01-01 12:00:00.5' + g * interval '1 h',
  timestamptz '2024-07-01 00:00:00.000001-03:30' + g * interval '1 min',
  decode(lpad(to_hex(g), 4, '0'), 'hex'), 'x ''' || g || '", é', array[g, null, -g],
  gen_random_uuid(), g / 13.0
  from generate_series(1, 40) g;
insert into typed values (41, -32768, -9223372036854775808, -9999999999.99, 'NaN',
  '-Infinity', null, '0044-03-15 BC', '0001-01-01 00:00:00', '9999-12-31 23:59:59.999999+00',
  '\\x', '', '{}', null, 'NaN');
"""


def test_typed_chunks_are_cast_and_appended_on_the_driver_exactly(dsn, spark, tmp_path):
    """A table of many types snapshotted in chunks of 20: the first two chunks are cast
    on the driver and appended by delta-rs, the last (a BC date) is cast by Spark; the
    target equals the source."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        Queue(conn, "q").create()
        conn.execute(TYPED)
        capture.attach(conn, "public.typed", CaptureOptions(queue="q"))
    pipe = drainkit.pipeline(dsn, str(tmp_path), _conf("typed"))
    result = snapshot.Snapshot(pipe, spark, progress=False, chunk_rows=20).run("public.typed")
    assert (result.rows, result.quarantined) == (41, 0)
    engines = []
    for path in sorted((tmp_path / "typed" / "_delta_log").glob("*.json")):
        for line in path.read_text().splitlines():
            info = json.loads(line).get("commitInfo")
            if info is not None and "operation" in info and info["operation"] != "CREATE TABLE":
                engines.append("delta-rs" if "delta-rs" in str(info.get("engineInfo")) else "spark")
    assert engines == ["delta-rs", "delta-rs", "spark"], engines
    _assert_equal(dsn, tmp_path, spark, "typed")
