"""A batch read with COPY in CSV form into Arrow (Batch.arrow, cdc.pg.copyreader): exactly
what get_batch_events returns; and the consumer's own ticking (Consumer.tick)."""

from __future__ import annotations

import datetime as dt

import psycopg
import pyarrow as pa

from cdc import config
from cdc.pg.batch import EVENT_SCHEMA
from cdc.pg.queue import Consumer, Producer, Queue

NASTY = [
    ("I", "plain", "public.t", None, "", "x"),
    ("U", 'quote " and comma , and\nnewline\r\nand tab\t', "public.t", "", None, None),
    ("D", "", None, "é ü 中 \\ backslash", '""', "NULL"),
    ("R", None, "public.t", None, None, None),
]


def test_copy_reader_returns_exactly_the_batch(conn: psycopg.Connection, dsn: str) -> None:
    """Quotes, commas, newlines, NULL against "" and non-ASCII come out as the server has them."""
    Queue(conn, "q").create()
    Consumer(conn, "q", "c").register()
    producer = Producer(conn, "q")
    for ev_type, data, e1, e2, e3, e4 in NASTY:
        producer.insert(ev_type, data, e1, e2, e3, e4)
    source = Consumer.for_source(conn, config.Source(dsn=dsn, queue="q", consumer="c"))
    source.tick()
    batch = source.next_batch()
    assert batch is not None
    table = pa.Table.from_batches(list(batch.arrow()), schema=EVENT_SCHEMA)
    expected = conn.execute(
        "select ev_id, ev_time, ev_txid, ev_retry, ev_type, ev_data, ev_extra1, ev_extra2,"
        " ev_extra3, ev_extra4 from cdc.get_batch_events(%s) order by ev_id",
        (batch.batch_id,),
    ).fetchall()
    got = [tuple(row.values()) for row in table.to_pylist()]
    assert len(got) == len(NASTY)
    for g, e in zip(got, expected, strict=True):
        assert g[0] == e[0] and g[2:] == e[2:]
        assert g[1] == e[1].astimezone(dt.UTC)


def test_copy_reader_across_many_small_blocks(conn, dsn) -> None:
    """Rows with quoted newlines, some larger than the reader's block, come out whole."""
    Queue(conn, "q").create()
    Consumer(conn, "q", "c").register()
    conn.execute(
        "select cdc.insert_event('q', 'I', repeat(E'a,\\n\"b', g % 50) || g"
        " || case when g % 400 = 0 then repeat(E'\"\\n', 3000) else '' end, 'public.t', null,"
        " null, null) from generate_series(1, 2000) g"
    )
    source = Consumer.for_source(conn, config.Source(dsn=dsn, queue="q", consumer="c"))
    source.tick()
    batch = source.next_batch()
    batches = list(batch.arrow(512))
    assert len(batches) > 10
    data = [v for b in batches for v in b.column("ev_data").to_pylist()]
    expected = [
        r[0]
        for r in conn.execute(
            "select ev_data from cdc.get_batch_events(%s) order by ev_id", (batch.batch_id,)
        )
    ]
    assert data == expected


def test_copy_reader_on_an_empty_batch(conn, dsn) -> None:
    """An empty batch reads as no record batch at all."""
    Queue(conn, "q").create()
    Consumer(conn, "q", "c").register()
    source = Consumer.for_source(conn, config.Source(dsn=dsn, queue="q", consumer="c"))
    source.tick()
    batch = source.next_batch()
    assert batch is not None
    assert list(batch.arrow()) == []


def _ticks(conn: psycopg.Connection) -> int:
    return conn.execute("select count(*) from cdc.tick").fetchone()[0]


def test_tick_if_new_sees_an_event_committed_after_the_tick_that_numbered_it(
    conn: psycopg.Connection, dsn: str, connect
) -> None:
    """An event numbered before a tick but committed after it belongs to the next batch; the
    event counter says nothing is new, so the drain's own ticking must look at the
    transactions that were running at the last tick."""
    Queue(conn, "q").create()
    Consumer(conn, "q", "c").register()
    source = Consumer.for_source(conn, config.Source(dsn=dsn, queue="q", consumer="c"))
    writer = connect(autocommit=False)
    Producer(writer, "q").insert("I", "late", "public.t")  # numbered, not committed
    source.tick()  # the writer is in this tick's snapshot as running
    writer.commit()
    before = _ticks(conn)
    source.tick(only_if_new=True)
    assert _ticks(conn) == before + 1
    batch = source.next_batch()
    assert batch is not None
    batch.finish()
    batch = source.next_batch()
    assert batch is not None
    events = pa.Table.from_batches(list(batch.arrow()), schema=EVENT_SCHEMA)
    assert events.column("ev_data").to_pylist() == ["late"]
    batch.finish()
    before = _ticks(conn)
    source.tick(only_if_new=True)  # nothing new, nobody was running: no tick
    assert _ticks(conn) == before


def test_copy_reader_reads_a_value_larger_than_its_block(conn, dsn) -> None:
    """A 50 MB event (larger than the 16 MB CSV block) between small ones comes out whole and
    in order, and the connection stays usable."""
    Queue(conn, "q").create()
    Consumer(conn, "q", "c").register()
    conn.execute(
        "select cdc.insert_event('q', 'I', 'small ' || g, 'public.t', null, null, null)"
        " from generate_series(1, 3) g"
    )
    conn.execute(
        "select cdc.insert_event('q', 'I', repeat('x\",' || chr(10), 12500000), 'public.t',"
        " null, null, null)"
    )
    conn.execute("select cdc.insert_event('q', 'I', 'after', 'public.t', null, null, null)")
    source = Consumer.for_source(conn, config.Source(dsn=dsn, queue="q", consumer="c"))
    source.tick()
    batch = source.next_batch()
    data = [v for b in batch.arrow() for v in b.column("ev_data").to_pylist()]
    assert [len(v) for v in data] == [7, 7, 7, 50_000_000, 5]
    assert data[3] == 'x",\n' * 12_500_000 and data[4] == "after"
    assert conn.execute("select 1").fetchone() == (1,)


def test_copy_table_reader_keeps_null_apart_from_empty(conn: psycopg.Connection) -> None:
    """copyreader.read_table (the snapshot's COPY read) returns NULL, "", quotes and newlines
    as they are, and None for an empty result."""
    from psycopg import sql

    from cdc.pg import copyreader

    schema = pa.schema([("a", pa.string()), ("b", pa.string())])
    query = sql.SQL(
        "copy (select * from (values (null, ''), ('x,\"y' || chr(10) || 'z', 'é')) v(a, b))"
        " to stdout with (format csv)"
    )
    table = copyreader.read_table(conn, query, schema)
    assert table is not None
    assert table.to_pylist() == [{"a": None, "b": ""}, {"a": 'x,"y\nz', "b": "é"}]
    empty = sql.SQL("copy (select 'a', 'b' where false) to stdout with (format csv)")
    assert copyreader.read_table(conn, empty, schema) is None
