"""Failures that must not stop the wrong things: a bad table is isolated (quarantined, marked
failing, shown in ``cdc status``, recovered with ``cdc resync``) while the others go on; an
infrastructure failure (an unwritable target folder) stops the drain with one line, nothing
finished and nothing lost."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from cdc import config
from cdc.ops import status
from cdc.pg import capture, pgtypes
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Queue
from cdc.pipeline import compare
from cdc.pipeline.drain import Drain
from cdc.pipeline.resync import resync

pytestmark = pytest.mark.spark


def write_config(path: Path, dsn: str, root: Path, tables: list[tuple[str, str]]) -> Path:
    conf = path / "pipeline.toml"
    entries = "".join(
        f"\n[[tables]]\nsource = '{source}'\ntarget = '{target}'\n" for source, target in tables
    )
    conf.write_text(
        f"[source]\ndsn = '{dsn}'\nqueue = 'q'\nconsumer = 'delta'\n"
        f"[target]\npath = '{root}'\n{entries}"
    )
    return conf


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CDC_DRAIN_KILL_AT"}
    return subprocess.run(
        [sys.executable, "-m", "cdc.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture
def db(conn: psycopg.Connection) -> psycopg.Connection:
    """Queue q, consumer delta, tables a and b captured (json and sql)."""
    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()
    conn.execute("create table a (id int primary key, v text)")
    conn.execute("create table b (k text primary key, x numeric(8,2))")
    capture.attach(conn, "public.a", CaptureOptions(queue="q", format="json"))
    capture.attach(conn, "public.b", CaptureOptions(queue="q", format="sql"))
    return conn


def same(conn: psycopg.Connection, spark, root: Path, table: str) -> bool:
    cols = pgtypes.columns(conn, "public", table)
    return compare.delta_rows(spark, str(root / table), cols) == compare.source_rows(
        conn, "public", table
    )


def test_unwritable_target_folder_one_line_nothing_finished_nothing_lost(db, dsn, spark, tmp_path):
    """A target folder that cannot be written (a file stands where a folder should be: root
    ignores permissions, not this): the drain exits 1 with one line naming the folder and what
    to do, the batch is still open (next_batch gives the same one), and once the folder is
    fixed a rerun applies every change."""
    root = tmp_path / "delta"
    root.write_text("not a folder")
    conf = write_config(tmp_path, dsn, root, [("public.a", "a"), ("public.b", "b")])
    db.execute("insert into a select g, 'v' || g from generate_series(1, 20) g")
    db.execute("insert into b values ('x', 1.5), ('y', 2)")
    proc = cli("drain", "--config", str(conf))
    assert proc.returncode == 1, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("cdc: error:")]
    assert len(errors) == 1, proc.stderr[-3000:]
    assert str(root) in errors[0] and "writable folder" in errors[0], errors[0]
    assert "Traceback" not in proc.stderr and "\tat " not in proc.stderr, proc.stderr[-3000:]
    assert len(lines) <= 6, proc.stderr[-3000:]
    info = db.execute(
        "select current_batch from cdc.get_consumer_info('q') where consumer_name = 'delta'"
    ).fetchone()
    assert info[0] is not None  # the batch is open, not finished
    verbose = cli("-v", "drain", "--config", str(conf))
    assert verbose.returncode == 1 and "Traceback" in verbose.stderr
    root.unlink()
    root.mkdir()
    proc = cli("drain", "--config", str(conf))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert same(db, spark, root, "a") and same(db, spark, root, "b")


@contextlib.contextmanager
def small_disk(folder: Path, size: str) -> Iterator[None]:
    """A tmpfs of the given size mounted on folder (unmounted at the end)."""
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def test_full_target_disk_one_line_nothing_finished_nothing_lost(db, dsn, spark, tmp_path):
    """A target folder on a disk that fills up during the batch: the drain exits 1 with one
    line saying the disk is full, the batch stays open, and once there is room a rerun
    applies every change."""
    root = tmp_path / "delta"
    conf = write_config(tmp_path, dsn, root, [("public.a", "a"), ("public.b", "b")])
    with small_disk(root, "3m"):
        db.execute("insert into b values ('x', 1.5)")
        assert cli("drain", "--config", str(conf)).returncode == 0  # the tables exist
        # about 8 MB that no codec shrinks
        db.execute(
            "insert into a select g, (select string_agg(md5(random()::text || g || h), '')"
            " from generate_series(1, 250) h) from generate_series(1, 1000) g"
        )
        proc = cli("drain", "--config", str(conf))
        assert proc.returncode == 1, proc.stderr[-3000:]
        errors = [line for line in proc.stderr.splitlines() if line.startswith("cdc: error:")]
        assert len(errors) == 1 and "full" in errors[0], proc.stderr[-3000:]
        assert "Traceback" not in proc.stderr and "\tat " not in proc.stderr, proc.stderr
        info = db.execute(
            "select current_batch from cdc.get_consumer_info('q') where consumer_name = 'delta'"
        ).fetchone()
        assert info[0] is not None  # the batch is open, not finished
        subprocess.run(["mount", "-o", "remount,size=200m", str(root)], check=True)
        proc = cli("drain", "--config", str(conf))
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert same(db, spark, root, "a") and same(db, spark, root, "b")


def quarantined(spark, root: Path) -> list[tuple[str, str]]:
    """(ev_extra1, reason) of every quarantined event."""
    rows = spark.read.format("delta").load(str(root / "_quarantine")).collect()
    return [(r.ev_extra1, r.reason) for r in rows]


def caught_up(conn: psycopg.Connection) -> bool:
    row = conn.execute(
        "select current_batch, pending_events from cdc.get_consumer_info('q')"
        " where consumer_name = 'delta'"
    ).fetchone()
    return row[0] is None


def test_a_dropped_table_fails_alone_and_resync_recovers_it(db, dsn, spark, tmp_path):
    """A captured table dropped while its events wait (C17): the drain finishes the batch,
    the other tables are applied, the dropped table's events are quarantined with the reason
    and its target shows as failing in cdc status (table, JSON, Prometheus, exit 1); its
    later events are quarantined too, even once a table of that name exists again, until
    `cdc resync` re-snapshots it; then its events apply again and it equals its source."""
    root = tmp_path / "delta"
    conf = write_config(
        tmp_path, dsn, root, [("public.a", "a"), ("public.b", "b"), ("public.c", "c")]
    )
    db.execute("create table c (id int primary key, v text)")
    capture.attach(db, "public.c", CaptureOptions(queue="q", format="urlenc"))
    db.execute("insert into a select g, 'v' || g from generate_series(1, 10) g")
    db.execute("insert into c select g, 'c' || g from generate_series(1, 5) g")
    db.execute("insert into b values ('x', 1.5)")
    db.execute("drop table c")
    pipeline = config.load(conf)
    with Drain(pipeline, spark) as drain:
        assert drain.run() >= 1
        assert caught_up(db)
        assert same(db, spark, root, "a") and same(db, spark, root, "b")
        bad = quarantined(spark, root)
        assert len([r for r in bad if r[0] == "public.c"]) == 5
        assert all("does not exist" in why for _, why in bad), bad
        state = status.collect(pipeline)
        failing = {t.target: t for t in state.tables if t.failing}
        assert list(failing) == ["c"] and "does not exist" in failing["c"].failing_reason
        assert "FAILING c since tick" in status.render(state)
        assert json.loads(status.to_json(state))["tables"][2]["failing"] is True
        metrics = "".join(str(m.samples) for m in status.metrics(state))
        assert "cdc_table_failing" in metrics and "'target': 'c'}, value=1.0" in metrics
        # the table comes back (a migration re-creates it): still failing until a resync
        db.execute("create table c (id int primary key, v text)")
        capture.attach(db, "public.c", CaptureOptions(queue="q", format="urlenc"))
        db.execute("insert into c select g, 'new' || g from generate_series(1, 3) g")
        db.execute("insert into a values (100, 'later')")
        assert drain.run() >= 1
        assert same(db, spark, root, "a")
        # the 3 inserts, and the marker before them of a new table under the dropped one's name
        assert len([r for r in quarantined(spark, root) if r[0] == "public.c"]) == 9
        assert "failing since tick" in quarantined(spark, root)[-1][1] or any(
            "failing since tick" in why for _, why in quarantined(spark, root)
        )
    proc = cli("status", "--config", str(conf))
    # exit 3: unhealthy (cdc.cli.exitcodes.UNHEALTHY)
    assert proc.returncode == 3 and "FAILING c" in proc.stdout, proc.stdout + proc.stderr
    result = resync(pipeline, spark, "public.c", progress=False)
    assert result.cleared == ("c",) and result.rows == 3
    assert not [t for t in status.collect(pipeline).tables if t.failing]
    db.execute("update c set v = 'changed' where id = 2")
    db.execute("insert into c values (4, 'four')")
    with Drain(pipeline, spark) as drain:
        assert drain.run() >= 1
    assert same(db, spark, root, "c") and same(db, spark, root, "a")
    assert len([r for r in quarantined(spark, root) if r[0] == "public.c"]) == 9


def test_a_table_whose_merge_fails_is_isolated(db, dsn, spark, tmp_path):
    """A table whose Delta target cannot take its rows (two source columns whose names
    differ only in case: Delta's names are case-insensitive) is marked failing with Spark's
    reason, in one batch with the other tables, which are applied."""
    root = tmp_path / "delta"
    conf = write_config(tmp_path, dsn, root, [("public.a", "a"), ("public.d", "d")])
    db.execute('create table d (id int primary key, "Name" text, name text)')
    capture.attach(db, "public.d", CaptureOptions(queue="q", format="json"))
    db.execute("insert into d values (1, 'A', 'a')")
    db.execute("insert into a values (1, 'one')")
    pipeline = config.load(conf)
    with Drain(pipeline, spark) as drain:
        assert drain.run() >= 1
    assert caught_up(db)
    assert same(db, spark, root, "a")
    state = {t.target: t for t in status.collect(pipeline).tables}
    assert state["d"].failing and not state["a"].failing
    assert [r[0] for r in quarantined(spark, root)] == ["public.d"]


def test_a_queue_created_again_is_a_new_incarnation(db, dsn, spark, tmp_path):
    """A queue dropped and created again under the same name (C22) starts its ticks at 1
    again: its batches are applied (the Delta appId names the queue's incarnation), not
    skipped as already committed under the old queue's higher ticks."""
    root = tmp_path / "delta"
    conf = write_config(tmp_path, dsn, root, [("public.a", "a")])
    pipeline = config.load(conf)
    with Drain(pipeline, spark) as drain:
        for n in range(4):
            db.execute("insert into a values (%s, 'old')", (n,))
            assert drain.run() == 1
    old_tick = db.execute("select last_tick_id from cdc.get_queue_info('q')").fetchone()[0]
    capture.detach(db, "public.a", "q")
    capture.detach(db, "public.b", "q")
    Queue(db, "q").drop(force=True)
    Queue(db, "q").create()
    capture.attach(db, "public.a", CaptureOptions(queue="q", format="json"))
    db.execute("insert into a values (100, 'new'), (101, 'new')")
    db.execute("update a set v = 'changed' where id = 1")
    with Drain(pipeline, spark) as drain:
        assert drain.run() >= 1
        new_tick = db.execute("select last_tick_id from cdc.get_queue_info('q')").fetchone()[0]
    assert new_tick < old_tick  # the case: the new queue's ticks are below the old ones
    assert same(db, spark, root, "a")


# the last commit whose drain wrote appIds without the queue incarnation
PREVIOUS = "7466ede0025be537c7de656dc6044142843382ba"


def test_a_batch_committed_before_the_upgrade_is_not_applied_twice(db, dsn, spark, tmp_path):
    """Upgrade: the previous version (the last commit before queue incarnations, run from a
    copy out of the repository's history) commits a
    batch to a history target under its appId without the queue incarnation, and is killed
    before finishing it; the new version redoes that batch and does not append it twice."""
    head = tmp_path / "head"
    head.mkdir()
    repo = str(Path(__file__).parents[2])
    if subprocess.run(["git", "-C", repo, "cat-file", "-e", PREVIOUS], check=False).returncode:
        pytest.skip(f"commit {PREVIOUS} is not in this clone's history (a shallow clone)")
    archive = subprocess.run(
        ["git", "-C", repo, "archive", PREVIOUS, "cdc"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(head)], input=archive.stdout, check=True)
    assert "def incarnation" not in (head / "cdc" / "source.py").read_text()
    root = tmp_path / "delta"
    conf = tmp_path / "pipeline.toml"
    conf.write_text(
        f"[source]\ndsn = '{dsn}'\nqueue = 'q'\nconsumer = 'delta'\n[target]\npath = '{root}'\n"
        "[[tables]]\nsource = 'public.a'\ntarget = 'a_history'\nmode = 'history'\n"
    )
    db.execute("insert into a select g, 'v' || g from generate_series(1, 7) g")
    env = {**os.environ, "PYTHONPATH": str(head), "CDC_DRAIN_KILL_AT": "merged"}
    old = subprocess.run(
        [sys.executable, "-m", "cdc.cli", "drain", "--config", str(conf)],
        env=env,
        cwd=head,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert old.returncode == -9, old.stderr[-3000:]
    assert spark.read.format("delta").load(str(root / "a_history")).count() == 7
    assert not caught_up(db)  # committed in Delta, not finished in PostgreSQL
    with Drain(config.load(conf), spark) as drain:
        assert drain.run() >= 1
    assert caught_up(db)
    assert spark.read.format("delta").load(str(root / "a_history")).count() == 7
    db.execute("insert into a values (8, 'after')")
    with Drain(config.load(conf), spark) as drain:
        assert drain.run() >= 1
    assert spark.read.format("delta").load(str(root / "a_history")).count() == 8


@pytest.mark.parametrize("fmt", ["urlenc", "sql", "json"])
def test_a_50_mb_value_goes_through_the_drain(db, dsn, spark, tmp_path, fmt):
    """One 50 MB text value (more than the COPY reader's 16 MB block, C23) is drained into
    Delta whole, with the other rows of its batch."""
    root = tmp_path / "delta"
    db.execute("create table big (id int primary key, v text)")
    capture.attach(db, "public.big", CaptureOptions(queue="q", format=fmt))
    conf = write_config(tmp_path, dsn, root, [("public.big", "big")])
    db.execute("insert into big values (1, 'small'), (2, repeat('ab', 25000000)), (3, 'last')")
    with Drain(config.load(conf), spark) as drain:
        assert drain.run() >= 1
    rows = (
        spark.read.format("delta")
        .load(str(root / "big"))
        .selectExpr("id", "length(v) as n", "v = repeat('ab', 25000000) as ok")
        .orderBy("id")
        .collect()
    )
    assert [(r.id, r.n) for r in rows] == [(1, 5), (2, 50_000_000), (3, 4)]
    assert rows[1].ok is True


ALIASES_STAND_IN = """
create function cdc.get_capture_aliases(out table_oid oid, out table_name text, out alias text)
returns setof record as $$ select 'public.a2'::regclass::oid, 'public.a2'::text, 'public.a'::text
$$ language sql
"""


def rows_of(conn: psycopg.Connection, spark, schema: str, table: str, location: Path) -> tuple:
    cols = pgtypes.columns(conn, schema, table)
    return compare.delta_rows(spark, str(location), cols), compare.source_rows(conn, schema, table)


@pytest.mark.parametrize("configured", ["public.a2", "public.a"])
def test_a_renamed_table_keeps_its_events(db, dsn, spark, tmp_path, configured):
    """A table renamed while its events wait (C18): events under the earlier name (from
    cdc.get_capture_aliases) go to the table the configuration names, whether it names the
    new name or still the old one; nothing is quarantined, nothing is failing."""
    exists = db.execute("select to_regproc('cdc.get_capture_aliases') is not null").fetchone()[0]
    db.execute("insert into a select g, 'v' || g from generate_series(1, 3) g")
    db.execute("alter table a rename to a2")
    if not exists:  # the capture's record of earlier names, where the engine lacks it
        db.execute(ALIASES_STAND_IN)
    db.execute("insert into a2 values (4, 'after')")
    db.execute("update a2 set v = 'changed' where id = 1")
    root = tmp_path / "delta"
    conf = write_config(tmp_path, dsn, root, [(configured, "a"), ("public.b", "b")])
    pipeline = config.load(conf)
    with Drain(pipeline, spark) as drain:
        assert drain.run() >= 1
    assert caught_up(db)
    got, expected = rows_of(db, spark, "public", "a2", root / "a")
    assert got == expected and len(expected) == 4
    assert not (root / "_quarantine").exists()
    assert not [t for t in status.collect(pipeline).tables if t.failing]


def test_tables_with_spaces_dots_and_non_ascii_names_drain(db, dsn, spark, tmp_path):
    """Tables named with a space, a dot inside a quoted name and non-ASCII letters (legal in
    PostgreSQL) are configured with quoted names and drained like any other."""
    db.execute('create schema "sch ü"')
    db.execute('create table "sch ü"."My.Table" (id int primary key, "v ö" text)')
    db.execute('create table public."My Table" (id int primary key, v text)')
    capture.attach(db, '"sch ü"."My.Table"', CaptureOptions(queue="q", format="json"))
    capture.attach(db, 'public."My Table"', CaptureOptions(queue="q", format="sql"))
    db.execute('insert into "sch ü"."My.Table" select g, \'ü\' || g from generate_series(1, 5) g')
    db.execute("insert into public.\"My Table\" select g, 'x' || g from generate_series(1, 4) g")
    db.execute('delete from public."My Table" where id = 2')
    root = tmp_path / "delta"
    conf = write_config(
        tmp_path, dsn, root, [('"sch ü"."My.Table"', "dotted"), ("public.My Table", "spaced")]
    )
    with Drain(config.load(conf), spark) as drain:
        assert drain.run() >= 1
    assert caught_up(db)
    got, expected = rows_of(db, spark, "sch ü", "My.Table", root / "dotted")
    assert got == expected and len(expected) == 5
    got, expected = rows_of(db, spark, "public", "My Table", root / "spaced")
    assert got == expected and len(expected) == 3
    assert not (root / "_quarantine").exists()
