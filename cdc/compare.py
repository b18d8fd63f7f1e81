"""Source rows and Delta rows in one comparable form: the demo's and the tests' check that a
mirror equals its source.

Strings are compared as the source's text output (what the events carry), timestamps as
microseconds since the epoch, floats by repr (so NaN equals NaN), bytes as bytes.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cdc import pgtypes


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
