"""Source rows and Delta rows in one comparable form: the demo's and the tests' check that a
mirror equals its source.

Strings are compared as the source's text output (what the events carry), timestamps as
microseconds since the epoch, floats by repr (so NaN equals NaN), bytes as bytes.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc import pgtypes


def source_rows(
    conn: psycopg.Connection, schema: str, table: str, cols: list[pgtypes.Column] | None = None
) -> list[tuple[Any, ...]]:
    """The table's rows, ordered by key (the primary key, unless cols mark another), in the
    form delta_rows gives."""
    cols = cols if cols is not None else pgtypes.columns(conn, schema, table)
    return [normal(row) for row in conn.execute(source_query(schema, table, cols)).fetchall()]


def source_query(schema: str, table: str, cols: list[pgtypes.Column]) -> sql.Composed:
    """The query of the table's rows, ordered by key, whose rows normal() makes comparable."""
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
    return sql.SQL("select {} from {}.{} order by {}").format(
        sql.SQL(", ").join(exprs),
        sql.Identifier(schema),
        sql.Identifier(table),
        sql.SQL(", ").join(keys),
    )


def delta_rows(
    spark: SparkSession, location: str, columns: list[pgtypes.Column]
) -> list[tuple[Any, ...]]:
    """The Delta table's rows (read with Spark), ordered by key."""
    keys = [F.col(f"`{c.name}`") for c in columns if c.is_key]
    frame = delta_frame(spark, location, columns)
    return [normal(tuple(r)) for r in frame.orderBy(*keys).collect()]


def delta_frame(
    spark: SparkSession, location: str, columns: list[pgtypes.Column], version: int | None = None
) -> DataFrame:
    """The Delta table's rows (at a version, or the latest) as Spark rows that normal() makes
    comparable with source_query's."""
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    frame = reader.load(location) if "/" in location else reader.table(location)
    exprs = []
    for c in columns:
        col = F.col(f"`{c.name}`")
        if c.spark_type in ("timestamp", "timestamp_ntz"):
            col = F.unix_micros(col.cast("timestamp"))
        exprs.append(col.alias(c.name))
    return frame.select(*exprs)


def normal(row: tuple[Any, ...]) -> tuple[Any, ...]:
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
