"""Helpers for the drain tests: pipelines, and source and Delta rows in one comparable form."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cdc import config, pgtypes
from cdc.config import Pipeline

TYPES_DDL = """
create type mood as enum ('happy', 'so sad', 'Qu''ote');
create domain dint as int;
create table {name} (
    id int primary key,
    "Mixed Case" int2,
    i8 int8,
    num numeric(12,3),
    f4 float4,
    f8 float8,
    t text,
    vc varchar(20),
    ch char(5),
    b bool,
    d date,
    tm time,
    ttz timetz,
    ts timestamp,
    tstz timestamptz,
    iv interval,
    ba bytea,
    u uuid,
    j json,
    jb jsonb,
    ia int[],
    ta text[],
    m mood,
    di dint,
    ip inet
)
"""

SPECIAL_ROWS = [
    "(1, 1, 9223372036854775807, 12.5, 1.5, 'NaN', 'a b&c=d%e+f', 'tab\tnl\nx', 'ab', true,"
    " '2024-02-29', '13:14:15.5', '13:14:15+02', '2024-03-05 13:14:15.123456',"
    " '2024-03-05 13:14:15.5+00', '1 year 2 mons 3 days 04:05:06.7', '\\xdeadbeef',"
    ' \'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11\', \'{"a": 1, "b":"x\\"y"}\','
    ' \'{"b":"x\\"y", "a": 1}\', \'{1,2,NULL}\', \'{"x y","q\\"t",NULL,""}\', \'so sad\', 42,'
    " '192.168.0.1/24')",
    "(2, -32768, -9223372036854775808, -0.001, 'Infinity', '-Infinity', '', 'é ü 中', 'x', false,"
    " '1999-12-31', '00:00:00', '23:59:59-05:30', '2000-01-01 00:00:00',"
    " '2024-06-30 21:30:00-02:30', '-1 days', '\\x', '00000000-0000-0000-0000-000000000000',"
    " '\"str\"', '[]', '{}', '{}',"
    " 'Qu''ote', null, '::1')",
    "(3, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null,"
    " null, null, null, null, null, null, null, null, null)",
    "(4, 7, 7, 7, 0.1, 1e300, 'back\\slash ''quote''', 'v', 'abcde', true, '2024-01-01', '12:00',"
    " '12:00+00', '2024-01-01 12:00', '2024-01-01 12:00+05:45', '00:00:01', '\\x00ff',"
    " 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12', 'null', '{\"k\": [1, 2]}', '{-1}', '{a}', 'happy', 0,"
    " '10.0.0.0/8')",
]


def pipeline(dsn: str, path: str, tables: list[dict[str, str]], **source: Any) -> Pipeline:
    return config.parse(
        {
            "source": {"dsn": dsn, "queue": "q", "consumer": "delta", **source},
            "target": {"path": path},
            "tables": tables,
        }
    )


def source_rows(conn: psycopg.Connection, schema: str, table: str) -> list[tuple[Any, ...]]:
    """The table's rows, ordered by key, in the form delta_rows gives."""
    cols = pgtypes.columns(conn, schema, table)
    exprs = []
    for c in cols:
        ident = sql.Identifier(c.name)
        if c.spark_type == "string":
            exprs.append(
                sql.SQL("case when {0} is not null then format('%s', {0}) end").format(ident)
            )
        elif c.spark_type in ("timestamp", "timestamp_ntz"):
            exprs.append(sql.SQL("(extract(epoch from {}) * 1000000)::bigint").format(ident))
        elif c.spark_type == "float":
            exprs.append(sql.SQL("{}::float8").format(ident))  # exact widening, as Spark's
        elif c.spark_type.startswith("array<string"):
            exprs.append(sql.SQL("{}::text[]").format(ident))
        else:
            exprs.append(ident)
    keys = [sql.Identifier(c.name) for c in cols if c.is_key]
    query = sql.SQL("select {} from {}.{} order by {}").format(
        sql.SQL(", ").join(exprs),
        sql.Identifier(schema),
        sql.Identifier(table),
        sql.SQL(", ").join(keys),
    )
    return [_normal(row) for row in conn.execute(query).fetchall()]


def delta_rows(
    spark: SparkSession, location: str, columns: list[pgtypes.Column]
) -> list[tuple[Any, ...]]:
    """The Delta table's rows (read with Spark), ordered by key."""
    frame = spark.read.format("delta").load(location)
    exprs = []
    for c in columns:
        col = F.col(f"`{c.name}`")
        if c.spark_type in ("timestamp", "timestamp_ntz"):
            col = F.unix_micros(col.cast("timestamp"))
        exprs.append(col)
    keys = [F.col(f"`{c.name}`") for c in columns if c.is_key]
    return [_normal(tuple(r)) for r in frame.orderBy(*keys).select(*exprs).collect()]


def _normal(row: tuple[Any, ...]) -> tuple[Any, ...]:
    out: list[Any] = []
    for v in row:
        if isinstance(v, bytes | bytearray | memoryview):
            v = bytes(v)
        elif isinstance(v, float):
            v = repr(v)
        elif isinstance(v, list):
            v = tuple(repr(x) if isinstance(x, float) else x for x in v)
        out.append(v)
    return tuple(out)
