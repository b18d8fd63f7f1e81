"""The drain end to end: real PostgreSQL, real Spark, real Delta tables."""

from __future__ import annotations

import dataclasses
import math
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from cdc.errors import ConfigError
from cdc.pg import capture, pgtypes
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Queue
from cdc.pipeline import compare
from cdc.pipeline.drain import Drain
from cdc.targets import delta_table, failing
from tests.support import drainkit
from tests.support.databases import create_database, drop_database

# Spark and Delta: run once per suite run (see scripts/test.sh), not once per server
pytestmark = pytest.mark.spark

FORMATS = ("json", "urlenc", "sql")


@pytest.fixture
def shop(conn: psycopg.Connection) -> psycopg.Connection:
    """Queue q with consumer delta; tables t_json, t_urlenc, t_sql of every type, each
    captured in its format."""
    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()
    conn.execute(drainkit.TYPES_DDL.format(name="t_json"))
    for fmt in FORMATS:
        if fmt != "json":
            conn.execute(f"create table t_{fmt} (like t_json including all)")
        capture.attach(conn, f"public.t_{fmt}", CaptureOptions(queue="q", format=fmt))
    return conn


def tables_conf() -> list[dict[str, str]]:
    return [{"source": f"public.t_{fmt}", "target": f"t_{fmt}"} for fmt in FORMATS]


def assert_mirrored(conn: psycopg.Connection, spark, root: Path, table: str) -> None:
    cols = pgtypes.columns(conn, "public", table)
    expected = compare.source_rows(conn, "public", table)
    got = compare.delta_rows(spark, str(root / table), cols)
    assert got == expected, f"{table}: Delta differs from the source"


# Three rounds of DML, each run on every table ({t}) and drained: inserts, updates of some
# columns or none, a key change, a delete; then column-wise updates and a delete-then-insert
# of one key; then a TRUNCATE between inserts.
ROUNDS = [
    [
        "insert into {t} values " + ", ".join(drainkit.SPECIAL_ROWS),
        "update {t} set t = t || '!', f8 = 2.5 where id = 1",
        "update {t} set vc = vc where id = 2",
        "update {t} set id = 20 where id = 2",
        "delete from {t} where id = 4",
    ],
    [
        "update {t} set num = 99.001, ia = '{5}' where id = 1",
        "update {t} set t = null where id = 20",
        "insert into {t} (id, t) values (5, 'after')",
        "delete from {t} where id = 5",
        "insert into {t} (id, t) values (5, 'again')",
    ],
    [
        "insert into {t} (id, t) values (6, 'gone')",
        "truncate {t}",
        "insert into {t} values " + drainkit.SPECIAL_ROWS[0],
    ],
]


def test_every_format_and_type_round_trips(shop, dsn, spark, tmp_path):
    """Inserts, updates (some columns, none), deletes, a key change and a truncate, in every
    format and over every type, under a non-UTC session time zone, in two drains: the Delta
    tables equal the source tables."""
    conn = shop
    conn.execute("set timezone = 'Asia/Kathmandu'")
    with Drain(drainkit.pipeline(dsn, str(tmp_path), tables_conf()), spark) as drain:
        for statements in ROUNDS:
            for fmt in FORMATS:
                for stmt in statements:
                    conn.execute(stmt.replace("{t}", f"t_{fmt}"))
            assert drain.run() >= 1
            for fmt in FORMATS:
                assert_mirrored(conn, spark, tmp_path, f"t_{fmt}")


def make_small(conn: psycopg.Connection, b_format: str) -> psycopg.Connection:
    """Queue q with consumer delta; a(id, v, n numeric(6,2), d date) captured in json and
    b(k text, x int) captured in b_format."""
    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()
    conn.execute("create table a (id int primary key, v text, n numeric(6,2), d date)")
    conn.execute("create table b (k text primary key, x int)")
    capture.attach(conn, "public.a", CaptureOptions(queue="q", format="json"))
    capture.attach(conn, "public.b", CaptureOptions(queue="q", format=b_format))
    return conn


@pytest.fixture
def small(conn: psycopg.Connection) -> psycopg.Connection:
    """make_small with b in sql, and c(id) captured but not in the pipeline."""
    make_small(conn, "sql")
    conn.execute("create table c (id int primary key)")
    capture.attach(conn, "public.c", CaptureOptions(queue="q", format="urlenc"))
    return conn


def small_conf(history: bool = False) -> list[dict[str, str]]:
    tables = [{"source": "public.a", "target": "a"}, {"source": "public.b", "target": "b"}]
    if history:
        tables += [
            {"source": "public.a", "target": "a_history", "mode": "history"},
        ]
    return tables


def test_bad_events_go_to_quarantine_and_the_batch_finishes(small, dsn, spark, tmp_path):
    """Unknown table, undecodable payload, a value that does not cast, a missing key: each
    event lands in the quarantine table with its reason; good events are applied; the batch
    is finished."""
    conn = small
    conn.execute("insert into a values (1, 'ok', 1.5, '2024-01-01'), (2, 'nan', 'NaN', null)")
    conn.execute("insert into a values (3, 'inf', 2, 'infinity')")
    conn.execute("insert into c values (1)")
    conn.execute("insert into b values ('k1', 1)")
    conn.execute(
        'select cdc.insert_event(\'q\', \'{"op":"INSERT","table":["public","a"],'
        "\"pkey\":[\"id\"]}', '{not json', 'public.a', null, null, null)"
    )
    conn.execute("select cdc.insert_event('q', 'U', 'x=''2'' where', 'public.b', null, null, null)")
    conn.execute(
        'select cdc.insert_event(\'q\', \'{"op":"DELETE","table":["public","a"],'
        '"pkey":["id"]}\', \'{"v":"no key"}\', \'public.a\', null, null, null)'
    )
    # a has a history target too: its bad events are quarantined once, not once per target
    pipe = drainkit.pipeline(dsn, str(tmp_path), small_conf(history=True))
    with Drain(pipe, spark) as drain:
        assert drain.run() >= 1
        assert drain.consumer.next_batch() is None or drain.run() >= 0
    q = spark.read.format("delta").load(str(tmp_path / "_quarantine"))
    reasons = sorted((r.ev_extra1, r.reason) for r in q.collect())
    assert reasons == [
        ("public.a", "no value for key column id"),
        ("public.a", "undecodable json payload"),
        ("public.a", "value does not cast to the column type: d"),
        ("public.a", "value does not cast to the column type: n"),
        ("public.b", "undecodable sql payload"),
        ("public.c", "table not in the configuration"),
    ]
    a = [tuple(r) for r in spark.read.format("delta").load(str(tmp_path / "a")).collect()]
    assert [r[0] for r in a] == [1]
    assert [tuple(r) for r in spark.read.format("delta").load(str(tmp_path / "b")).collect()] == [
        ("k1", 1)
    ]
    lag = conn.execute("select pending_events from cdc.get_consumer_info('q', 'delta')").fetchone()[
        0
    ]
    assert lag == 0


def test_sql_updates_merge_column_wise_onto_delta(small, dsn, spark, tmp_path):
    """sql-format UPDATEs carry only the changed columns: applied in a later batch, they
    change those columns of the Delta row and keep the others."""
    conn = small
    conn.execute("alter table b add column y text")
    capture.attach(conn, "public.b", CaptureOptions(queue="q", format="sql"))
    conn.execute("insert into b values ('k1', 1, 'one'), ('k2', 2, 'two')")
    with Drain(drainkit.pipeline(dsn, str(tmp_path), small_conf()), spark) as drain:
        drain.run()
        conn.execute("update b set x = 10 where k = 'k1'")
        conn.execute("update b set y = 'TWO' where k = 'k2'")
        conn.execute("update b set x = null where k = 'k2'")
        drain.run()
    rows = spark.read.format("delta").load(str(tmp_path / "b")).orderBy("k").collect()
    assert [tuple(r) for r in rows] == [("k1", 10, "one"), ("k2", None, "TWO")]


def test_new_source_columns_become_delta_columns(small, dsn, spark, tmp_path):
    """A column added to the source (the trigger is regenerated) appears in Delta."""
    conn = small
    conn.execute("insert into a values (1, 'x', 1, null)")
    with Drain(drainkit.pipeline(dsn, str(tmp_path), small_conf()), spark) as drain:
        drain.run()
        conn.execute("alter table a add column extra timestamptz")
        conn.execute("insert into a values (2, 'y', 2, null, '2024-01-01 00:00+00')")
        drain.run()
    frame = spark.read.format("delta").load(str(tmp_path / "a"))
    assert frame.columns == ["id", "v", "n", "d", "extra"]
    cols = pgtypes.columns(conn, "public", "a")
    assert compare.delta_rows(spark, str(tmp_path / "a"), cols) == compare.source_rows(
        conn, "public", "a"
    )


def test_history_has_one_row_per_event_even_when_a_batch_is_redone(small, dsn, spark, tmp_path):
    """History mode appends one row per event; a batch redone after its tables committed
    (the drain died before finish_batch) adds nothing twice."""
    conn = small
    conn.execute("insert into a values (1, 'x', 1, null), (2, 'y', 2, null)")
    conn.execute("update a set v = 'z' where id = 1")
    conn.execute("delete from a where id = 2")
    pipe = drainkit.pipeline(dsn, str(tmp_path), small_conf(history=True))

    class Died(Exception):
        pass

    def die(stage: str) -> None:
        if stage == "merged":
            raise Died

    with Drain(pipe, spark) as drain:
        drain.consumer.tick()
        batch = drain.consumer.next_batch()
        with pytest.raises(Died):
            drain.apply(batch, on_stage=die)
        again = drain.consumer.next_batch()
        assert again is not None and again.tick_id == batch.tick_id
        drain.apply(again)
    hist = spark.read.format("delta").load(str(tmp_path / "a_history"))
    ops = [(r.op, r.id, r.v) for r in hist.orderBy("ev_id").collect()]
    assert ops == [("I", 1, "x"), ("I", 2, "y"), ("U", 1, "z"), ("D", 2, "y")]
    assert [tuple(r) for r in spark.read.format("delta").load(str(tmp_path / "a")).collect()] == [
        (1, "z", 1, None)
    ]


def test_a_history_target_is_the_same_whichever_engine_appends_it(small, dsn, spark, tmp_path):
    """The Arrow engine appends a history target's events with delta-rs, Spark with its
    writer: the same rows, the same types, and each batch says which engine wrote it."""
    from cdc.pg.queue import Consumer

    Consumer(small, "q", "other").register()
    small.execute("insert into a values (1, 'x', 1.5, null), (2, 'y é', -2, null)")
    small.execute("update a set v = 'z' where id = 1")
    small.execute("delete from a where id = 2")
    history = [{"source": "public.a", "target": "a_history", "mode": "history"}]
    tables: dict[str, tuple] = {}
    for engine, consumer in (("arrow", "delta"), ("spark", "other")):
        path = tmp_path / engine
        pipe = drainkit.pipeline(dsn, str(path), history, consumer=consumer)
        pipe = dataclasses.replace(pipe, drain=dataclasses.replace(pipe.drain, engine=engine))
        routes: list[str] = []
        with Drain(pipe, spark) as drain:
            drain.run(on_batch=lambda stats, seen=routes: seen.extend(stats.routes.values()))
        assert routes and all(r.startswith(engine + " (") for r in routes), routes
        frame = spark.read.format("delta").load(str(path / "a_history"))
        tables[engine] = (frame.schema.simpleString(), sorted(map(tuple, frame.collect())))
    assert tables["arrow"] == tables["spark"]
    ops = [(r[0], r[5], r[6]) for r in sorted(tables["arrow"][1], key=lambda r: r[1])]
    assert ops == [("I", 1, "x"), ("I", 2, "y é"), ("U", 1, "z"), ("D", 2, "y é")]


def test_delta_rs_reads_what_spark_wrote(small, dsn, spark, tmp_path):
    """An independent reader (delta-rs) sees the same rows as Spark, deletion vectors
    included (column mapping: tests/e2e/test_readers.py)."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    conn = small
    conn.execute("insert into a select g, 'v' || g, g, null from generate_series(1, 50) g")
    pipeline = drainkit.pipeline(dsn, str(tmp_path), small_conf())
    with Drain(pipeline, spark) as drain:
        drain.run()
        # a small local target is written without deletion vectors until it grows
        delta_table.enable_deletion_vectors(spark, pipeline.table("a"))
        conn.execute("delete from a where id % 7 = 0")
        conn.execute("update a set v = 'changed' where id % 5 = 0")
        drain.run()
    # delta-rs's query engine (its pyarrow reader does not apply deletion vectors yet)
    result = QueryBuilder().register("a", DeltaTable(str(tmp_path / "a")))
    table = pa.table(result.execute("select id, v from a order by id").read_all())
    rs_rows = list(zip(*(table.column(n).to_pylist() for n in ("id", "v")), strict=True))
    src = [tuple(r) for r in conn.execute("select id, v from a order by id").fetchall()]
    assert rs_rows == src


def test_consumes_a_real_pgq_queue(pgq_admin_dsn, spark, tmp_path):
    """queue_schema = "pgq": PgQ 3.5's own queue and C triggers, drained the same way."""
    name = f"drain_pgq_{uuid.uuid4().hex[:10]}"
    dsn = create_database(pgq_admin_dsn, name)
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("create extension pgq")
            conn.execute("select pgq.create_queue('q')")
            conn.execute("select pgq.register_consumer('q', 'delta')")
            conn.execute(drainkit.TYPES_DDL.format(name="t_json"))
            conn.execute("create table t_urlenc (like t_json including all)")
            conn.execute("create table t_sql (like t_json including all)")
            for fmt, func in (("json", "jsontriga"), ("urlenc", "logutriga"), ("sql", "sqltriga")):
                conn.execute(
                    f"create trigger cap after insert or update or delete on t_{fmt}"
                    f" for each row execute procedure pgq.{func}('q')"
                )
                conn.execute(
                    f"create trigger cap_trunc after truncate on t_{fmt}"
                    f" for each statement execute procedure pgq.{func}('q')"
                )
            for fmt in FORMATS:
                t = f"t_{fmt}"
                conn.execute(f"insert into {t} values " + ", ".join(drainkit.SPECIAL_ROWS))
                conn.execute(f"update {t} set t = 'changed', num = 1 where id = 1")
                conn.execute(f"delete from {t} where id = 4")
            pipe = drainkit.pipeline(dsn, str(tmp_path), tables_conf(), queue_schema="pgq")
            with Drain(pipe, spark) as drain:
                assert drain.run() >= 1
            for fmt in FORMATS:
                assert_mirrored(conn, spark, tmp_path, f"t_{fmt}")
    finally:
        drop_database(pgq_admin_dsn, name)


def test_large_batches_are_read_over_jdbc_in_slices(spark, tmp_path):
    """A batch at or above jdbc_min_events is read by Spark's JDBC source in ev_id slices
    (here: every batch, three slices), on a server reached over TCP."""
    with drainkit.tcp_cluster() as dsn, psycopg.connect(dsn, autocommit=True) as conn:
        make_small(conn, "urlenc")
        conn.execute("insert into a select g, 'v' || g, g, null from generate_series(1, 300) g")
        conn.execute("insert into b select 'k' || g, g from generate_series(1, 100) g")
        conn.execute("update a set v = 'w' where id % 4 = 0")
        conn.execute("delete from b where x % 3 = 0")
        pipe = drainkit.pipeline(
            dsn, str(tmp_path), small_conf(), jdbc_min_events=1, jdbc_partitions=3
        )
        drain = Drain(pipe, spark)
        read_jdbc = drain.reader._read_jdbc
        calls: list[int] = []

        def counting(*args):
            calls.append(1)
            return read_jdbc(*args)

        drain.reader._read_jdbc = counting
        try:
            assert drain.run() >= 1
        finally:
            drain.close()
        assert calls
        for table in ("a", "b"):
            assert_mirrored(conn, spark, tmp_path, table)


# source column names that the drain also uses for its own columns
CLASHING = ("op", "ev_id", "ev_time", "ev_txid", "tick_id", "reason", "kv", "fmt", "__raw")


@pytest.mark.parametrize("fmt", FORMATS)
def test_source_columns_may_have_the_names_of_the_drains_own_columns(conn, dsn, spark, tmp_path,
                                                                      fmt):  # fmt: skip
    """A table whose columns are called op, ev_id, tick_id, reason ... mirrors like any
    other; a history target refuses the names of its own event columns, and says so."""
    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()
    cols = ", ".join(f"{sql.Identifier(c).as_string(conn)} text" for c in CLASHING)
    conn.execute(f"create table odd (id int primary key, {cols})")
    capture.attach(conn, "public.odd", CaptureOptions(queue="q", format=fmt))
    values = ", ".join(f"'{c}' || g" for c in CLASHING)
    conn.execute(f"insert into odd select g, {values} from generate_series(1, 5) g")
    tables = [{"source": "public.odd", "target": "odd"}]
    with Drain(drainkit.pipeline(dsn, str(tmp_path), tables), spark) as drain:
        drain.run()
        conn.execute("update odd set op = 'changed', \"__raw\" = null where id = 2")
        conn.execute("update odd set id = 10 where id = 3")
        conn.execute("delete from odd where id = 4")
        drain.run()
    assert_mirrored(conn, spark, tmp_path, "odd")
    # the history target cannot hold them: it fails alone, saying why, and the mirror goes on
    tables = [
        {"source": "public.odd", "target": "odd_history", "mode": "history"},
        {"source": "public.odd", "target": "odd"},
    ]
    pipe = drainkit.pipeline(dsn, str(tmp_path / "h"), tables, consumer="second")
    Consumer(conn, "q", "second").register_at(1)  # from the queue's first tick
    conn.execute("update odd set op = 'again' where id = 1")
    with Drain(pipe, spark) as drain:
        drain.run()
        marks = failing.read(spark, pipe.table(pipe.failing_table))
    clash = "odd_history: source column(s) op, ev_id, ev_time, ev_txid, tick_id have"
    assert list(marks) == ["odd_history"]
    assert clash in marks["odd_history"].reason
    assert_mirrored(conn, spark, tmp_path / "h", "odd")


def drain_before_and_after(
    conn: psycopg.Connection, dsn: str, spark, root: Path, table: str, changes: list[str]
):
    """Drains public.<table> into <root>/<table>, runs the changes, drains again; the pipeline."""
    pipe = drainkit.pipeline(dsn, str(root), [{"source": f"public.{table}", "target": table}])
    with Drain(pipe, spark) as drain:
        drain.run()
        for stmt in changes:
            conn.execute(stmt)
        drain.run()
    return pipe


@pytest.mark.parametrize("fmt", ["json", "sql"])
def test_a_table_without_primary_key_folds_by_its_capture_pkey(conn, dsn, spark, tmp_path, fmt):
    """Captured with pkey= NOT NULL columns under a unique index, a table without a primary
    key mirrors by those columns, and verifies; looser pkey= columns are refused, saying why."""
    from cdc.pipeline import verify

    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()
    conn.execute("create table nopk (code text not null, v int, w text)")
    conn.execute("create unique index on nopk (code)")
    capture.attach(conn, "public.nopk", CaptureOptions(queue="q", format=fmt, pkey=("code",)))
    conn.execute("insert into nopk select 'c' || g, g, 'w' || g from generate_series(1, 6) g")
    pipe = drain_before_and_after(
        conn,
        dsn,
        spark,
        tmp_path,
        "nopk",
        [
            "update nopk set v = -v where code in ('c1', 'c2')",
            "update nopk set code = 'moved' where code = 'c3'",
            "delete from nopk where code = 'c4'",
            "insert into nopk values ('c4', 40, 'again')",
        ],
    )
    cols = pgtypes.keyed_columns(conn, "public", "nopk", "q")
    assert [c.name for c in cols if c.is_key] == ["code"]
    got = compare.delta_rows(spark, str(tmp_path / "nopk"), cols)
    assert got == compare.source_rows(conn, "public", "nopk", cols)
    assert ("c4", 40, "again") in got and ("moved", 3, "w3") in got and len(got) == 6
    assert [v.ok for v in verify.Verifier(pipe, spark).run()] == [True]

    conn.execute("create table loose (code text, v int)")
    capture.attach(conn, "public.loose", CaptureOptions(queue="q", format=fmt, pkey=("code",)))
    with pytest.raises(ConfigError, match=r"capture key \(code\).*code may be null"):
        pgtypes.keyed_columns(conn, "public", "loose", "q")
    conn.execute("alter table loose alter code set not null")
    with pytest.raises(ConfigError, match="no unique index within them"):
        pgtypes.keyed_columns(conn, "public", "loose", "q")
    with pytest.raises(ConfigError, match="has no primary key: the drain folds events by key"):
        pgtypes.keyed_columns(conn, "public", "loose")  # a PgQ queue: no capture registry


@pytest.mark.parametrize("fmt", FORMATS)
def test_magic_columns_stay_out_of_the_delta_table(conn, dsn, spark, tmp_path, fmt):
    """A PgQ magic column (_pgq_ev_extra3) gives ev_extra3 and is in no payload: the Delta
    table has the other columns, with the source's rows, and no magic column."""
    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()
    conn.execute("create table mg (id int primary key, v text, _pgq_ev_extra3 text)")
    capture.attach(conn, "public.mg", CaptureOptions(queue="q", format=fmt))
    conn.execute("insert into mg select g, 'v' || g, 'x' || g from generate_series(1, 5) g")
    drain_before_and_after(
        conn,
        dsn,
        spark,
        tmp_path,
        "mg",
        [
            "update mg set v = 'changed', _pgq_ev_extra3 = 'y' where id = 2",
            "delete from mg where id = 3",
        ],
    )
    cols = pgtypes.keyed_columns(conn, "public", "mg", "q")
    assert [c.name for c in cols] == ["id", "v"]
    assert spark.read.format("delta").load(str(tmp_path / "mg")).columns[:2] == ["id", "v"]
    assert "_pgq_ev_extra3" not in spark.read.format("delta").load(str(tmp_path / "mg")).columns
    got = compare.delta_rows(spark, str(tmp_path / "mg"), cols)
    assert got == compare.source_rows(conn, "public", "mg", cols)
    assert (2, "changed") in got and len(got) == 4


@pytest.mark.parametrize("fmt", FORMATS)
def test_key_moves_under_a_deferrable_primary_key(conn, dsn, spark, tmp_path, fmt):
    """A DEFERRABLE primary key: update id = id + 1 over 1, 2, 3 (captured D1 I2 D2 I3 D3 I4)
    and a swap 2 <-> 3 each leave the Delta table equal to the source (the last-event fold
    kept only id 4, and lost a row of the swap)."""
    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()
    conn.execute(
        "create table mv (id int, v text, n int, constraint mv_pkey primary key (id) deferrable)"
    )
    capture.attach(conn, "public.mv", CaptureOptions(queue="q", format=fmt))
    conn.execute("insert into mv values (1, 'one', 1), (2, 'two', 2), (3, 'three', 3)")
    tables = [{"source": "public.mv", "target": "mv"}]
    with Drain(drainkit.pipeline(dsn, str(tmp_path), tables), spark) as drain:
        drain.run()
        conn.execute("update mv set id = id + 1")
        drain.run()
        assert_mirrored(conn, spark, tmp_path, "mv")
        conn.execute("update mv set id = case id when 2 then 3 when 3 then 2 else id end")
        conn.execute("update mv set n = n * 10 where id = 3")
        drain.run()
        assert_mirrored(conn, spark, tmp_path, "mv")
    assert conn.execute("select count(*) from mv").fetchone()[0] == 3


def key_rows(spark, root: Path, table: str) -> list[tuple]:
    frame = spark.read.format("delta").load(str(root / table))
    return sorted(
        (r.v, r.id if isinstance(r.id, str) else math.copysign(1, r.id)) for r in frame.collect()
    )


@pytest.mark.parametrize("fmt", ["json", "sql"])
def test_numeric_and_float_keys_compare_as_postgresql_compares_them(conn, dsn, spark, tmp_path,
                                                                    fmt):  # fmt: skip
    """A numeric key without precision rewritten from 1.0 to 1.00 stays one row, and a later
    delete leaves none (two rows, then one, before); a float8 key -0 is stored as -0 (Spark's
    grouping made it 0) and stays one row when set to 0. json carries the key's new text
    (1.00, 0), which Delta takes; sql UPDATEs carry only the old one (documented)."""
    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()
    conn.execute("create table nk (id numeric primary key, v text)")
    conn.execute("create table fk (id float8 primary key, v text)")
    for t in ("nk", "fk"):
        capture.attach(conn, f"public.{t}", CaptureOptions(queue="q", format=fmt))
    conn.execute("insert into nk values (1.0, 'a'), (2.50, 'b'), (10, 'c')")
    conn.execute("insert into fk values ('-0', 'a'), (1.5, 'b')")
    tables = [{"source": "public.nk", "target": "nk"}, {"source": "public.fk", "target": "fk"}]
    with Drain(drainkit.pipeline(dsn, str(tmp_path), tables), spark) as drain:
        drain.run()
        assert key_rows(spark, tmp_path, "fk") == [("a", -1.0), ("b", 1.0)]
        conn.execute("update nk set id = 1.00, v = 'A' where id = 1")
        conn.execute("update nk set id = 2.5 where id = 2.5")
        conn.execute("update fk set id = 0, v = 'A' where id = 0")
        drain.run()
        new_text = fmt == "json"
        assert key_rows(spark, tmp_path, "nk") == [
            ("A", "1.00" if new_text else "1.0"),
            ("b", "2.5" if new_text else "2.50"),
            ("c", "10"),
        ]
        assert key_rows(spark, tmp_path, "fk") == [("A", 1.0 if new_text else -1.0), ("b", 1.0)]
        conn.execute("delete from nk where id = 1")
        conn.execute("insert into nk values (1.000, 'again')")
        conn.execute("delete from nk where id = 10.0")
        drain.run()
    assert key_rows(spark, tmp_path, "nk") == [
        ("again", "1.000"),
        ("b", "2.5" if new_text else "2.50"),
    ]


@pytest.mark.parametrize("fmt", ["json", "sql"])
def test_date_keys_past_9999_and_before_year_1(conn, dsn, spark, tmp_path, fmt):
    """Date and timestamp keys in year 10000 and 100 BC: the key range of the batch is kept
    as text (it failed every run in Python's datetime), the MERGE prunes by it and applies
    inserts, updates and deletes."""
    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()
    conn.execute("create table dk (d date primary key, v text)")
    conn.execute("create table tk (t timestamp primary key, v text)")
    for t in ("dk", "tk"):
        capture.attach(conn, f"public.{t}", CaptureOptions(queue="q", format=fmt))
    conn.execute(
        "insert into dk values ('10000-01-01', 'far'), ('0100-03-01 BC', 'old'),"
        " ('2024-01-01', 'now')"
    )
    conn.execute("insert into tk values ('10000-01-01 12:00', 'far'), ('2024-01-01', 'now')")
    tables = [{"source": "public.dk", "target": "dk"}, {"source": "public.tk", "target": "tk"}]
    with Drain(drainkit.pipeline(dsn, str(tmp_path), tables), spark) as drain:
        drain.run()
        conn.execute("update dk set v = 'FAR' where d = '10000-01-01'")
        conn.execute("delete from dk where d = '0100-03-01 BC'")
        conn.execute("update tk set v = 'FAR' where t > '9999-12-31'")
        drain.run()
    dk = spark.read.format("delta").load(str(tmp_path / "dk"))
    got = sorted((r[0], r[1]) for r in dk.selectExpr("cast(d as string)", "v").collect())
    assert got == [("+10000-01-01", "FAR"), ("2024-01-01", "now")]
    tk = spark.read.format("delta").load(str(tmp_path / "tk"))
    assert sorted(r.v for r in tk.select("v").collect()) == ["FAR", "now"]
