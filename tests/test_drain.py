"""The drain end to end: real PostgreSQL, real Spark, real Delta tables."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from cdc import capture, compare, pgtypes
from cdc.capture import CaptureOptions
from cdc.drain import Drain
from cdc.queue import Consumer, Queue
from tests import drainkit

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


def test_every_format_and_type_round_trips(shop, dsn, spark, tmp_path):
    """Inserts, updates (some columns, none), deletes, a key change and a truncate, in every
    format and over every type, under a non-UTC session time zone, in two drains: the Delta
    tables equal the source tables."""
    conn = shop
    conn.execute("set timezone = 'Asia/Kathmandu'")
    drain = Drain(drainkit.pipeline(dsn, str(tmp_path), tables_conf()), spark)
    try:
        for fmt in FORMATS:
            t = f"t_{fmt}"
            conn.execute(f"insert into {t} values " + ", ".join(drainkit.SPECIAL_ROWS))
            conn.execute(f"update {t} set t = t || '!', f8 = 2.5 where id = 1")
            conn.execute(f"update {t} set vc = vc where id = 2")
            conn.execute(f"update {t} set id = 20 where id = 2")
            conn.execute(f"delete from {t} where id = 4")
        assert drain.run() >= 1
        for fmt in FORMATS:
            assert_mirrored(conn, spark, tmp_path, f"t_{fmt}")
        for fmt in FORMATS:
            t = f"t_{fmt}"
            conn.execute(f"update {t} set num = 99.001, ia = '{{5}}' where id = 1")
            conn.execute(f"update {t} set t = null where id = 20")
            conn.execute(f"insert into {t} (id, t) values (5, 'after')")
            conn.execute(f"delete from {t} where id = 5")
            conn.execute(f"insert into {t} (id, t) values (5, 'again')")
        assert drain.run() >= 1
        for fmt in FORMATS:
            assert_mirrored(conn, spark, tmp_path, f"t_{fmt}")
        for fmt in FORMATS:
            t = f"t_{fmt}"
            conn.execute(f"insert into {t} (id, t) values (6, 'gone')")
            conn.execute(f"truncate {t}")
            conn.execute(f"insert into {t} values " + drainkit.SPECIAL_ROWS[0])
        assert drain.run() >= 1
        for fmt in FORMATS:
            assert_mirrored(conn, spark, tmp_path, f"t_{fmt}")
    finally:
        drain.close()
