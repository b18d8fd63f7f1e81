"""Values at the edges of their types through the real drain, snapshot and verify: BC dates
and timestamps, years past 9999, arrays that a Spark array cannot hold, timestamps read by
another Delta reader, and columns a capture ignores."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from cdc.pg import capture, pgtypes
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Queue
from cdc.pipeline import compare, snapshot, verify
from cdc.pipeline.drain import Drain
from tests.support import drainkit

pytestmark = pytest.mark.spark

FORMATS = ("json", "urlenc", "sql")

EDGES_DDL = """
create table {t} (
    id int primary key,
    d date, ts timestamp, tstz timestamptz,
    da date[], tsa timestamptz[], na numeric(10,2)[], ia int[], ta text[]
)
"""
# rows that must arrive exactly
EXACT = [
    "(1, '0044-03-15 BC', '0044-03-15 10:30:00.5 BC', '0044-03-15 10:30:00+02 BC',"
    " '{0044-03-15 BC,NULL,2024-01-01}', '{\"0001-01-01 00:00:00+00 BC\"}', '{1.5,NULL}',"
    ' \'{}\', \'{"a\\"b",NULL,"NULL","x,y","b\\\\c",""}\')',
    "(2, '0001-12-31 BC', '4713-01-01 00:00:00 BC', '12345-06-07 08:09:10.123456+00',"
    " '{12345-01-01,1582-10-04}', '{\"1000-01-01 00:00:00+00\"}', '{}', '{NULL}', '{}')",
    "(3, '5874897-12-31', '1000-01-01 00:00:00', '9999-12-31 23:59:59.999999+00',"
    " null, null, null, null, null)",
]
# rows that must be quarantined, with the column the reason names
QUARANTINED = {
    10: ("da", "'{infinity}'"),
    11: ("tsa", "'{\"2024-01-01 00:00:00+00\",-infinity}'"),
    12: ("na", "'{1.5,NaN}'"),
    13: ("ia", "'[0:1]={1,2}'"),
    14: ("ia", "'{{1,2},{3,4}}'"),
    15: ("d", "'infinity'"),
    16: ("tstz", "'-infinity'"),
}


def _edges(conn: psycopg.Connection, fmt: str) -> str:
    table = f"e_{fmt}"
    conn.execute(EDGES_DDL.format(t=table))
    capture.attach(conn, f"public.{table}", CaptureOptions(queue="q", format=fmt))
    conn.execute(f"insert into {table} values " + ", ".join(EXACT))
    for key, (col, value) in QUARANTINED.items():
        conn.execute(f"insert into {table} (id, {col}) values ({key}, {value})")
    return table


def _quarantine(spark, root: Path) -> list[tuple[str, str]]:
    frame = spark.read.format("delta").load(str(root / "_quarantine"))
    return sorted((r.ev_extra1, r.reason) for r in frame.collect())


def test_bc_far_future_and_unfit_arrays_through_the_drain(conn, dsn, spark, tmp_path):
    """In json, urlenc and sql: BC dates and timestamps (also inside arrays), years past 9999
    and 1582 arrive as the same day and instant; an array element that does not fit its type
    (infinity, NaN), explicit bounds and a second dimension quarantine the event, naming the
    column, instead of a NULL element or lost bounds."""
    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()
    tables = [_edges(conn, fmt) for fmt in FORMATS]
    conf = [{"source": f"public.{t}", "target": t} for t in tables]
    with Drain(drainkit.pipeline(dsn, str(tmp_path), conf), spark) as drain:
        drain.run()
    for table in tables:
        cols = pgtypes.columns(conn, "public", table)
        expected = [
            row for row in compare.source_rows(conn, "public", table) if row[0] not in QUARANTINED
        ]
        assert compare.delta_rows(spark, str(tmp_path / table), cols) == expected, table
        # the BC date is 44 BC (astronomical year -43) in Delta, not 44 AD
        day = spark.read.format("delta").load(str(tmp_path / table)).where("id = 1")
        assert day.selectExpr("cast(d as string)").first()[0] == "-0043-03-15"
    want = sorted(
        (f"public.{t}", f"value does not cast to the column type: {col}")
        for t in tables
        for col, _ in QUARANTINED.values()
    )
    assert _quarantine(spark, tmp_path) == want


def test_timestamps_outside_1677_2262_read_right_by_delta_rs(conn, dsn, spark, tmp_path):
    """Timestamps are written as Parquet INT64 microseconds: delta-rs (which misreads INT96
    outside 1677-2262) reads 1000-01-01, 9999-12-31 and 44 BC as PostgreSQL's instants."""
    from deltalake import DeltaTable

    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()
    conn.execute("create table far (id int primary key, ts timestamptz, tn timestamp, d date)")
    capture.attach(conn, "public.far", CaptureOptions(queue="q", format="json"))
    conn.execute(
        "insert into far values"
        " (1, '1000-01-01 00:00:00+00', '1000-01-01 00:00:00', '1000-01-01'),"
        " (2, '9999-12-31 23:59:59.999999+00', '9999-12-31 23:59:59.999999', '9999-12-31'),"
        " (3, '0044-03-15 12:00:00+00 BC', '0044-03-15 12:00:00 BC', '0044-03-15 BC')"
    )
    conf = [{"source": "public.far", "target": "far"}]
    with Drain(drainkit.pipeline(dsn, str(tmp_path), conf), spark) as drain:
        drain.run()
    expected = conn.execute(
        "select id, (extract(epoch from ts) * 1000000)::bigint,"
        " (extract(epoch from tn) * 1000000)::bigint, d - date '1970-01-01' from far order by id"
    ).fetchall()
    import pyarrow as pa
    from deltalake import QueryBuilder

    result = (
        QueryBuilder()
        .register("far", DeltaTable(str(tmp_path / "far")))
        .execute("select id, ts, tn, d from far order by id")
        .read_all()
    )
    table = pa.table(result)
    got = list(
        zip(
            table.column("id").to_pylist(),
            table.column("ts").cast("int64").to_pylist(),
            table.column("tn").cast("int64").to_pylist(),
            table.column("d").cast("int32").to_pylist(),
            strict=True,
        )
    )
    assert got == [tuple(r) for r in expected]


def test_verify_compares_dates_before_year_1_and_after_9999(conn, dsn, spark, tmp_path):
    """cdc verify compares BC and year > 9999 dates and timestamps (Python's datetime holds
    neither) and finds a changed one."""
    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()
    conn.execute(
        "create table old (id int primary key, d date, ts timestamptz, tn timestamp, da date[])"
    )
    capture.attach(conn, "public.old", CaptureOptions(queue="q", format="sql"))
    conn.execute(
        "insert into old values"
        " (1, '0044-03-15 BC', '0044-03-15 12:00:00+00 BC', '4713-01-01 00:00:00 BC',"
        "  '{0044-03-15 BC,NULL}'),"
        " (2, '12345-01-01', '12345-01-01 00:00:00+00', '99999-01-01 00:00:00', '{12345-01-01}')"
    )
    pipe = drainkit.pipeline(dsn, str(tmp_path), [{"source": "public.old", "target": "old"}])
    [verdict] = verify.Verifier(pipe, spark).run()
    assert verdict.ok and verdict.source_rows == 2, verdict
    spark.sql(f"update delta.`{tmp_path / 'old'}` set d = make_date(44, 3, 15) where id = 1")
    [verdict] = verify.Verifier(pipe, spark).run()
    assert not verdict.ok
    [changed] = verdict.keys
    assert (changed["kind"], changed["key"]) == ("changed", {"id": 1})
    assert [c["column"] for c in changed["columns"]] == ["d"]


@pytest.mark.parametrize("fmt", ["json", "sql"])
def test_ignored_columns_are_not_copied_compared_or_created(conn, dsn, spark, tmp_path, fmt):
    """A column the capture ignores (cdc attach --ignore) is left out of the snapshot, out of
    the Delta table's schema and out of verify's comparison."""
    Queue(conn, "q").create()
    conn.execute("create table people (id int primary key, name text, email text)")
    conn.execute("insert into people select g, 'n' || g, 's' || g from generate_series(1, 5) g")
    options = CaptureOptions(queue="q", format=fmt, ignore=("email",))
    capture.attach(conn, "public.people", options)
    pipe = drainkit.pipeline(dsn, str(tmp_path), [{"source": "public.people", "target": "p"}])
    result = snapshot.Snapshot(pipe, spark, progress=False).run("public.people")
    assert result.rows == 5
    conn.execute("insert into people values (6, 'n6', 'secret6')")
    conn.execute("update people set name = 'renamed', email = 'changed' where id = 1")
    with Drain(pipe, spark) as drain:
        drain.run()
    frame = spark.read.format("delta").load(str(tmp_path / "p"))
    assert frame.columns == ["id", "name"]
    assert sorted(tuple(r) for r in frame.collect()) == [
        (1, "renamed"), (2, "n2"), (3, "n3"), (4, "n4"), (5, "n5"), (6, "n6"),
    ]  # fmt: skip
    [verdict] = verify.Verifier(pipe, spark).run()
    assert verdict.ok and verdict.delta_rows == 6, verdict
