"""The streaming source's queue side against a real PostgreSQL, without Spark: the reader's
methods called in the order Spark calls them (cdc.stream.source, cdc.stream.feed), also
as a restart from a checkpoint calls them after a crash at each point."""

from __future__ import annotations

import psycopg
import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from cdc import errors
from cdc.pg import capture
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Queue
from cdc.stream import feed
from cdc.stream import options as stream_options
from cdc.stream.options import parse
from cdc.stream.source import CdcStreamReader

ALL = ReadAllAvailable()


@pytest.fixture
def db(conn: psycopg.Connection) -> psycopg.Connection:
    """Queue q; a (json) and b (sql) captured into it."""
    Queue(conn, "q").create()
    conn.execute("create table a (id int primary key, v text)")
    conn.execute("create table b (k text, n int, x numeric(6,2), primary key (k, n))")
    capture.attach(conn, "public.a", CaptureOptions(queue="q", format="json"))
    capture.attach(conn, "public.b", CaptureOptions(queue="q", format="sql"))
    return conn


def reader(dsn: str, consumer: str = "s1", **options: str) -> CdcStreamReader:
    return CdcStreamReader(
        parse({"dsn": dsn, "queue": "q", "consumer": consumer, "poll_interval": "0", **options})
    )


def rows(stream: CdcStreamReader, start: dict, end: dict) -> list[tuple]:
    return [r for part in stream.partitions(start, end) for r in stream.read(part)]


def position(conn: psycopg.Connection, consumer: str) -> int | None:
    return Consumer(conn, "q", consumer).position()


def test_a_micro_batch_is_a_queue_batch(db, dsn):
    """The first offset registers the consumer; the next offset is the end tick of the
    batch of the changes since (the stream ticks); its rows are those changes, decoded."""
    stream = reader(dsn)
    start = stream.initialOffset()
    assert position(db, "s1") == start["tick"]
    assert stream.latestOffset(start, ALL) == start  # nothing yet
    db.execute("insert into a values (1, 'x'), (2, 'y')")
    db.execute("update a set v = 'z' where id = 2")
    db.execute("insert into b values ('k', 1, 2.50)")
    db.execute("update b set x = 3 where k = 'k'")
    db.execute("delete from a where id = 1")
    end = stream.latestOffset(start, ALL)
    assert end["tick"] > start["tick"]
    found = rows(stream, start, end)
    assert [(r[0], r[1], r[2], r[3]) for r in found] == [
        ("public.a", "I", {"id": "1"}, {"id": "1", "v": "x"}),
        ("public.a", "I", {"id": "2"}, {"id": "2", "v": "y"}),
        ("public.a", "U", {"id": "2"}, {"id": "2", "v": "z"}),
        ("public.b", "I", {"k": "k", "n": "1"}, {"k": "k", "n": "1", "x": "2.50"}),
        ("public.b", "U", {"k": "k", "n": "1"}, {"x": "3.00", "k": "k", "n": "1"}),
        ("public.a", "D", {"id": "1"}, {"id": "1", "v": "x"}),
    ]
    assert all(r[7] == end["tick"] and r[9] is None for r in found)
    assert [r[4] for r in found] == sorted(r[4] for r in found)
    stream.commit(end)
    assert position(db, "s1") == end["tick"]
    stream.stop()


def test_restarts_follow_the_checkpoint(db, dsn):
    """A micro-batch Spark did not commit is read again with the same rows by a new reader;
    one Spark committed, but whose queue batch was not finished, is finished by the next
    offset and not delivered again."""
    first = reader(dsn)
    start = first.initialOffset()
    db.execute("insert into a select g, 'v' || g from generate_series(1, 50) g")
    end = first.latestOffset(start, ALL)
    before = rows(first, start, end)
    first.stop()  # killed before the sink committed: the checkpoint has the offsets only

    second = reader(dsn)
    assert rows(second, start, end) == before  # the same micro-batch, the same events
    db.execute("insert into a values (100, 'later')")
    second.stop()  # killed after the sink committed, before the queue batch was finished
    assert position(db, "s1") == start["tick"]

    third = reader(dsn)
    after = third.latestOffset(end, ALL)  # the checkpoint's start: the committed end
    assert position(db, "s1") == end["tick"]
    assert [r[3] for r in rows(third, end, after)] == [{"id": "100", "v": "later"}]
    third.stop()


def test_an_older_checkpoint_moves_the_consumer_back(db, dsn):
    """The checkpoint is the source of truth: a consumer ahead of it is moved back."""
    stream = reader(dsn)
    start = stream.initialOffset()
    db.execute("insert into a values (1, 'x')")
    end = stream.latestOffset(start, ALL)
    stream.commit(end)
    stream.stop()
    again = reader(dsn)
    assert again.latestOffset(start, ALL) == end
    assert position(db, "s1") == start["tick"]
    assert [r[1] for r in rows(again, start, end)] == ["I"]
    again.stop()


def test_two_consumers_each_see_every_event(db, dsn):
    """Streams with consumers of their own take the same events, independently."""
    one, two = reader(dsn, "s1"), reader(dsn, "s2", tick="false")
    starts = one.initialOffset(), two.initialOffset()
    db.execute("insert into a select g, 'v' from generate_series(1, 20) g")
    ends = one.latestOffset(starts[0], ALL), two.latestOffset(starts[1], ALL)
    assert ends[0] == ends[1]  # the second does not tick: it reads the first one's tick
    for stream, start, end in zip((one, two), starts, ends, strict=True):
        assert [r[2]["id"] for r in rows(stream, start, end)] == [str(g) for g in range(1, 21)]
        stream.commit(end)
        stream.stop()


def test_one_stream_per_consumer(db, dsn, monkeypatch):
    """A second stream with the same consumer is refused while the first runs."""
    monkeypatch.setattr(feed, "LOCK_WAIT", 0)
    first = reader(dsn)
    first.initialOffset()
    second = reader(dsn)
    with pytest.raises(errors.CdcError, match="read by another stream"):
        second.initialOffset()
    first.stop()
    second.initialOffset()
    second.stop()


def test_the_table_option_and_many_slices(db, dsn, monkeypatch):
    """option table keeps one table's events; a batch read in several ev_id ranges gives
    every event once, in order."""
    monkeypatch.setattr(stream_options, "EVENTS_PER_PARTITION", 10)
    stream = reader(dsn, table="public.b", max_partitions="4")
    start = stream.initialOffset()
    db.execute("insert into a values (1, 'x')")
    db.execute("insert into b select 'k', g, g from generate_series(1, 30) g")
    end = stream.latestOffset(start, ALL)
    parts = stream.partitions(start, end)
    assert len(parts) == 4
    found = [r for part in parts for r in stream.read(part)]
    assert {r[0] for r in found} == {"public.b"}
    assert [r[2]["n"] for r in found] == [str(g) for g in range(1, 31)]
    stream.stop()


def test_available_now_stops_at_the_last_tick(db, dsn):
    """availableNow: batches end at the queue's last tick when it started, one tick each."""
    stream = reader(dsn, tick="false")
    start = stream.initialOffset()
    ticks = []
    for n in range(3):
        db.execute("insert into a values (%s, 'x')", (n,))
        ticks.append(Consumer(db, "q", "s1").tick())
    stream.prepareForTriggerAvailableNow()
    db.execute("insert into a values (10, 'later')")
    Consumer(db, "q", "s1").tick()
    seen = []
    while (end := stream.latestOffset(start, ALL)) != start:
        seen.append(end["tick"])
        stream.commit(end)
        start = end
    assert seen == ticks
    stream.stop()


def test_a_recreated_queue_refuses_the_checkpoint(db, dsn):
    """Offsets of a queue dropped and created again are another queue's ticks."""
    stream = reader(dsn)
    start = stream.initialOffset()
    stream.stop()
    for table in ("public.a", "public.b"):
        capture.detach(db, table)
    Queue(db, "q").drop(force=True)
    Queue(db, "q").create()
    again = reader(dsn)
    with pytest.raises(errors.CdcError, match="dropped and created again"):
        again.latestOffset(start, ALL)
    again.stop()
