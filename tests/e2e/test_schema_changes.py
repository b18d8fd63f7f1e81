"""Schema changes followed in place (cdc.targets.schema_changes): a renamed column renamed in
the target, events before and after the rename applied; a widened column rewritten (read
back by delta-rs) or widened with Delta's feature (type_changes); a narrowed column kept
with its values checked; a dropped column kept, NULL for the rows that come after. Each on
both engines (drain.engine = arrow, spark). Real PostgreSQL, Spark and Delta."""

from __future__ import annotations

import json
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import psycopg
import pyarrow as pa
import pytest
from deltalake import DeltaTable

from cdc.config import Pipeline
from cdc.ops import status
from cdc.pg import capture, pgtypes
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Queue
from cdc.pipeline import compare
from cdc.pipeline.apply import BatchStats
from cdc.pipeline.drain import Drain
from cdc.targets import readers, schema_changes
from cdc.targets.delta_table import LocalTable
from tests.support import drainkit

pytestmark = pytest.mark.spark

ENGINES = ["arrow", "spark"]


def _pipeline(dsn: str, root: Path, engine: str, **options: object) -> Pipeline:
    entry = {"source": "public.t", "target": "t", **options}
    pipe = drainkit.pipeline(dsn, str(root), [entry])
    return replace(pipe, drain=replace(pipe.drain, engine=engine))


def _drain(pipe: Pipeline, spark) -> list[BatchStats]:
    seen: list[BatchStats] = []
    with Drain(pipe, spark) as drain:
        drain.run(on_batch=seen.append)
    return seen


def _source(conn: psycopg.Connection, ddl: str, fmt: str = "json") -> None:
    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()
    conn.execute(ddl)
    capture.attach(conn, "public.t", CaptureOptions(queue="q", format=fmt))


def _same(conn: psycopg.Connection, spark, pipe: Pipeline) -> None:
    cols = pgtypes.columns(conn, "public", "t")
    expected = compare.source_rows(conn, "public", "t", cols)
    assert compare.delta_rows(spark, pipe.location("t"), cols) == expected


def _quarantined(spark, root: Path) -> list[str]:
    path = root / "_quarantine"
    if not path.exists():
        return []
    return sorted(r.reason for r in spark.read.format("delta").load(str(path)).collect())


def _written_by(stats: list[BatchStats]) -> list[str]:
    """The engine that wrote the target, per batch (the route's second engine)."""
    return [s.routes["t"].split(" ")[0].split("+")[-1] for s in stats if "t" in s.routes]


def _routes(stats: list[BatchStats]) -> list[str]:
    """The route that decoded and wrote the target, per batch: "arrow" when the Arrow
    engine did both."""
    return [s.routes["t"].split(" ")[0] for s in stats if "t" in s.routes]


def _history(path: str) -> list[dict]:
    return list(reversed(DeltaTable(path).history()))


@pytest.mark.parametrize("fmt", ["json", "sql"])
@pytest.mark.parametrize("engine", ENGINES)
def test_a_rename_with_events_before_and_after_in_one_batch(
    conn, dsn, spark, tmp_path, engine, fmt
):
    """RENAME COLUMN a TO b between events of one batch: the Delta column is renamed (column
    mapping turned on for it), the events that carry a and those that carry b are applied,
    nothing is quarantined, and the engine asked for wrote it (delta-rs writes the mapped
    table)."""
    _source(conn, "create table t (id int primary key, a text, x int)", fmt)
    conn.execute("insert into t values (1, 'one', 1), (4, 'four', 4)")
    pipe = _pipeline(dsn, tmp_path, engine)
    _drain(pipe, spark)
    conn.execute("insert into t values (2, 'two', 2)")
    conn.execute("update t set a = 'ONE', x = 10 where id = 1")
    conn.execute("delete from t where id = 4")
    conn.execute("alter table t rename column a to b")
    conn.execute("insert into t values (3, 'three', 3)")
    conn.execute("update t set b = 'TWO' where id = 2")
    stats = _drain(pipe, spark)
    assert _routes(stats) == [engine]  # the Arrow engine decodes the renamed events too
    frame = spark.read.format("delta").load(pipe.location("t"))
    assert frame.columns == ["id", "b", "x"]
    _same(conn, spark, pipe)
    assert sorted(tuple(r) for r in frame.collect()) == [
        (1, "ONE", 10),
        (2, "TWO", 2),
        (3, "three", 3),
    ]
    assert _quarantined(spark, tmp_path) == []
    table = LocalTable.open(pipe.table("t"))
    assert table.is_mapped()
    recorded = schema_changes.Recorded.of(table.properties())
    assert recorded is not None
    assert (recorded.attnums, recorded.renamed) == ({"id": 1, "b": 2, "x": 3}, {"a": "b"})


@pytest.mark.parametrize("engine", ENGINES)
def test_renames_then_more_batches(conn, dsn, spark, tmp_path, engine):
    """a -> b, drained; then the key id -> k and b -> c, drained; later batches write the
    renamed columns; an event still carrying the first names (written before the renames
    by a transaction that committed after a tick) is read by them."""
    _source(conn, "create table t (id int primary key, a text)")
    conn.execute("insert into t values (1, 'one')")
    pipe = _pipeline(dsn, tmp_path, engine)
    _drain(pipe, spark)
    conn.execute("alter table t rename a to b")
    conn.execute("insert into t values (2, 'two')")
    _drain(pipe, spark)
    conn.execute("update t set b = 'ONE' where id = 1")
    conn.execute("insert into t values (3, 'three')")
    assert _written_by(_drain(pipe, spark)) == [engine]
    _same(conn, spark, pipe)
    conn.execute("alter table t rename id to k")
    conn.execute("alter table t rename b to c")
    conn.execute("insert into t values (4, 'four')")
    conn.execute("update t set c = 'TWO' where k = 2")
    conn.execute("delete from t where k = 3")
    late = '{"op":"INSERT","table":["public","t"],"pkey":["id"]}'
    conn.execute(
        "select cdc.insert_event('q', %s, %s, 'public.t', null, null, null)",
        (late, '{"id": 5, "a": "late"}'),
    )
    stats = _drain(pipe, spark)
    assert _routes(stats) == [engine]
    frame = spark.read.format("delta").load(pipe.location("t"))
    assert frame.columns == ["k", "c"]
    assert sorted(tuple(r) for r in frame.collect()) == [
        (1, "ONE"),
        (2, "TWO"),
        (4, "four"),
        (5, "late"),
    ]
    assert _quarantined(spark, tmp_path) == []
    props = LocalTable.open(pipe.table("t")).properties()
    assert json.loads(props[schema_changes.COLUMNS])["renamed"] == {"a": "c", "b": "c", "id": "k"}


@pytest.mark.parametrize("engine", ENGINES)
def test_int_to_bigint_is_rewritten_and_read_back_by_delta_rs(conn, dsn, spark, tmp_path, engine):
    """int -> bigint with the default type_changes on a small table: the table is rewritten
    with the column as bigint in one commit, without Delta's typeWidening feature; delta-rs
    reads it back (to_pyarrow_table) with the new type and every value, every reader reads
    it, and the Arrow engine writes it again."""
    _source(conn, "create table t (id int primary key, x int, v text)")
    conn.execute("insert into t values (1, 1, 'a'), (2, -2147483648, 'b')")
    pipe = _pipeline(dsn, tmp_path, engine)
    _drain(pipe, spark)
    before = len(_history(pipe.location("t")))
    conn.execute("alter table t alter x type bigint")
    conn.execute("insert into t values (3, 5000000000, 'c')")
    conn.execute("update t set x = 2147483648 where id = 1")
    stats = _drain(pipe, spark)
    assert _written_by(stats) == [engine]
    read = DeltaTable(pipe.location("t")).to_pyarrow_table()
    assert read.schema.field("x").type == pa.int64()
    assert read.schema.field("id").type == pa.int32()
    assert sorted(tuple(r.values()) for r in read.to_pylist()) == [
        (1, 2147483648, "a"),
        (2, -2147483648, "b"),
        (3, 5000000000, "c"),
    ]
    _same(conn, spark, pipe)
    table = LocalTable.open(pipe.table("t"))
    assert "typeWidening" not in table.features()
    assert set(readers.verdicts(table).values()) == {readers.SAFE}
    rewrites = [
        json.loads(c["userMetadata"])["cdc.rewrite"]
        for c in _history(pipe.location("t"))[before:]
        if "cdc.rewrite" in (c.get("userMetadata") or "")
    ]
    assert rewrites == ["x int -> long"]  # one commit rewrote the table
    assert json.loads(table.properties()["cdc.key"]) == ["id"]  # the key, now nullable


@pytest.mark.parametrize("engine", ENGINES)
def test_numeric_and_real_grown_are_rewritten(conn, dsn, spark, tmp_path, engine):
    """numeric(10,2) -> numeric(14,4) and real -> double precision: rewritten, the old values
    exact in the new types (a real's binary value as a double, as PostgreSQL converts it),
    the new ones too; delta-rs reads the new types."""
    _source(conn, "create table t (id int primary key, p numeric(10,2), f real)")
    conn.execute("insert into t values (1, 12345678.91, 0.1), (2, -0.01, null)")
    pipe = _pipeline(dsn, tmp_path, engine)
    _drain(pipe, spark)
    conn.execute("alter table t alter p type numeric(14,4), alter f type double precision")
    conn.execute("insert into t values (3, 1234567890.1234, 0.1)")
    conn.execute("update t set p = p + 0.0001 where id = 2")
    assert _written_by(_drain(pipe, spark)) == [engine]
    _same(conn, spark, pipe)
    read = DeltaTable(pipe.location("t")).to_pyarrow_table().sort_by("id")
    assert read.schema.field("p").type == pa.decimal128(14, 4)
    assert read.schema.field("f").type == pa.float64()
    assert read.column("p").to_pylist() == [
        Decimal("12345678.9100"),
        Decimal("-0.0099"),
        Decimal("1234567890.1234"),
    ]
    assert read.column("f").to_pylist() == [0.10000000149011612, None, 0.1]
    assert "typeWidening" not in LocalTable.open(pipe.table("t")).features()


@pytest.mark.parametrize("engine", ENGINES)
def test_widen_mode_uses_the_table_feature(conn, dsn, spark, tmp_path, engine):
    """type_changes = "widen": int -> bigint turns Delta's typeWidening feature on (no
    rewrite); Spark reads the table right, delta-rs refuses it, and Spark writes it whichever
    engine was asked for (delta-rs cannot write the feature)."""
    _source(conn, "create table t (id int primary key, x int)")
    conn.execute("insert into t values (1, 1)")
    pipe = _pipeline(dsn, tmp_path, engine, type_changes="widen")
    _drain(pipe, spark)
    conn.execute("alter table t alter x type bigint")
    conn.execute("insert into t values (2, 5000000000)")
    stats = _drain(pipe, spark)
    assert _written_by(stats) == ["spark"]
    _same(conn, spark, pipe)
    table = LocalTable.open(pipe.table("t"))
    assert "typeWidening" in table.features()
    assert not any(
        "cdc.rewrite" in (c.get("userMetadata") or "") for c in _history(pipe.location("t"))
    )
    with pytest.raises(Exception, match="typeWidening"):
        DeltaTable(pipe.location("t")).to_pyarrow_table()
    found = status.collect(pipe)
    assert [t.rows for t in found.tables] == [2]  # counted from the log: delta-rs reads that
    lines = status.render(found).splitlines()
    assert [x.split(":")[0] for x in lines if x.startswith("TYPE WIDENING")] == ["TYPE WIDENING t"]


@pytest.mark.parametrize("engine", ENGINES)
def test_the_default_widens_a_table_past_its_size(
    conn, dsn, spark, tmp_path, engine, monkeypatch, caplog
):
    """type_changes unset on a table larger than REWRITE_MAX_BYTES (here 0): widened with the
    feature, and the log says so, why, and how to have it rewritten."""
    monkeypatch.setattr(schema_changes, "REWRITE_MAX_BYTES", 0)
    _source(conn, "create table t (id int primary key, x int)")
    conn.execute("insert into t values (1, 1)")
    pipe = _pipeline(dsn, tmp_path, engine)
    _drain(pipe, spark)
    conn.execute("alter table t alter x type bigint")
    conn.execute("insert into t values (2, 5000000000)")
    with caplog.at_level("WARNING", logger="cdc.schema_drift"):
        _drain(pipe, spark)
    _same(conn, spark, pipe)
    assert "typeWidening" in LocalTable.open(pipe.table("t")).features()
    [warning] = [r.getMessage() for r in caplog.records if "widened" in r.getMessage()]
    assert warning.startswith("public.t: widened x int -> long with Delta's typeWidening")
    assert 'over the 0.0 MiB the default rewrites (type_changes = "rewrite"' in warning


@pytest.mark.parametrize("engine", ENGINES)
def test_a_narrowed_column_keeps_its_type_and_quarantines_what_does_not_fit(
    conn, dsn, spark, tmp_path, engine
):
    """numeric(10,2) -> numeric(10,4) is no widening (two integer digits fewer): the Delta
    column stays decimal(10,2); 1.5 fits it and is written, 1.2345 would be cut to 1.23 and
    goes to the quarantine with the reason; never a rewrite, never the feature."""
    _source(conn, "create table t (id int primary key, p numeric(10,2))")
    conn.execute("insert into t values (1, 1.25)")
    pipe = _pipeline(dsn, tmp_path, engine)
    _drain(pipe, spark)
    conn.execute("alter table t alter p type numeric(10,4)")
    conn.execute("insert into t values (2, 1.5), (3, 1.2345)")
    _drain(pipe, spark)
    frame = spark.read.format("delta").load(pipe.location("t"))
    assert dict(frame.dtypes)["p"] == "decimal(10,2)"
    assert sorted((r.id, str(r.p)) for r in frame.collect()) == [(1, "1.25"), (2, "1.50")]
    assert _quarantined(spark, tmp_path) == [
        "column p is decimal(10,2) in Delta but decimal(10,4) in the source, and this value"
        " does not fit the Delta column: resync the table"
    ]
    table = LocalTable.open(pipe.table("t"))
    assert "typeWidening" not in table.features()
    assert [t.quarantined for t in status.collect(pipe).tables] == [1]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_dropped_column_stays_null_from_then_on(conn, dsn, spark, tmp_path, engine):
    """DROP COLUMN a: the Delta column stays; the rows it held keep their values (an UPDATE
    after the drop does not carry the column, so it leaves it), rows inserted after hold
    NULL in it; the engine asked for writes it."""
    _source(conn, "create table t (id int primary key, a text, v int)")
    conn.execute("insert into t values (1, 'one', 1), (2, 'two', 2)")
    pipe = _pipeline(dsn, tmp_path, engine)
    _drain(pipe, spark)
    conn.execute("alter table t drop column a")
    conn.execute("insert into t values (3, 3)")
    conn.execute("update t set v = 20 where id = 2")
    assert _written_by(_drain(pipe, spark)) == [engine]
    frame = spark.read.format("delta").load(pipe.location("t"))
    assert frame.columns == ["id", "a", "v"]
    assert sorted(tuple(r) for r in frame.collect()) == [
        (1, "one", 1),
        (2, "two", 20),
        (3, None, 3),
    ]
    assert _quarantined(spark, tmp_path) == []
    _same(conn, spark, pipe)  # the source's columns (id, v) compare
