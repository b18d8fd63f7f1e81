"""Source rows and Delta rows in one comparable form: the demo's and the tests' check that a
mirror equals its source.

Strings are compared as the source's text output (what the events carry), dates and
timestamps as the text of their days / microseconds since the epoch (any year), floats by
repr (so NaN equals NaN), bytes as bytes.
"""

from __future__ import annotations

import decimal
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc.pg import pgtypes, reading
from cdc.targets import delta_table
from cdc.targets.masking import Masking
from cdc.targets.table import TableRef, quote

if TYPE_CHECKING:
    from cdc.config import Pipeline


def source_rows(
    conn: psycopg.Connection, schema: str, table: str, cols: list[pgtypes.Column] | None = None
) -> list[tuple[Any, ...]]:
    """The table's rows, ordered by key (the primary key, unless cols mark another), in the
    form delta_rows gives."""
    cols = cols if cols is not None else pgtypes.columns(conn, schema, table)
    return [normal(row) for row in conn.execute(source_query(schema, table, cols)).fetchall()]


# Dates and timestamps compare as text of whole days / microseconds since 1970-01-01 (both
# sides count in the proleptic Gregorian calendar), so that years before 1 and after 9999,
# which Python's datetime cannot hold, compare too; infinity keeps its text.
_EPOCH_DAY = "case when isfinite({0}) then ({0} - date '1970-01-01')::text else {0}::text end"
_EPOCH_MICROS = (
    "case when isfinite({0}) then (extract(epoch from {0}) * 1000000)::numeric(40,0)::text"
    " else {0}::text end"
)
_ARRAY = (
    "case when {0} is not null then coalesce((select array_agg({1} order by n)"
    " from unnest({0}) with ordinality as u(e, n)), '{{}}') end"
)


def _source_expr(ident: sql.Composable, spark_type: str, by_output: bool = False) -> sql.Composable:
    """by_output: the column's type has a cast to text made by a user's function, which is
    never called (cdc.pg.reading): its text is its type's output."""
    if by_output and spark_type == "string":
        return reading.output_text(ident)
    if by_output and spark_type == "array<string>":
        return sql.SQL("({})::text[]").format(reading.output_text(ident))
    if spark_type.startswith("array<"):
        element = spark_type[len("array<") : -1]
        if element in ("date", "timestamp", "timestamp_ntz"):
            each = _source_expr(sql.Identifier("e"), element)
            return sql.SQL(_ARRAY).format(ident, each)
        if element == "string":
            return sql.SQL("{}::text[]").format(ident)
        if element == "float":
            return sql.SQL("{}::float8[]").format(ident)  # exact widening, as Spark's
        return ident
    if spark_type == "string":
        # ::text is null only for NULL ("x is null" is also true of a composite whose fields
        # are all NULL, '(,)')
        return sql.SQL("case when {0}::text is not null then format('%s', {0}) end").format(ident)
    if spark_type == "date":
        return sql.SQL(_EPOCH_DAY).format(ident)
    if spark_type in ("timestamp", "timestamp_ntz"):
        return sql.SQL(_EPOCH_MICROS).format(ident)
    if spark_type == "float":
        return sql.SQL("{}::float8").format(ident)  # exact widening, as Spark's
    return ident


# a date's text in DateStyle ISO whatever the session's (cdc.targets.masking.date_text)
_DATE_TEXT = (
    "case when not isfinite({0}) then {0}::text when {0} < date '0001-01-01'"
    " then to_char({0}, 'YYYY-MM-DD') || ' BC' else to_char({0}, 'YYYY-MM-DD') end"
)


def _text_expr(ident: sql.Composable, spark_type: str, by_output: bool = False) -> sql.Composable:
    """A value's text as PostgreSQL outputs it (cdc.targets.masking.HASHABLE's types; by_output
    as for _source_expr)."""
    if spark_type == "date":
        return sql.SQL(_DATE_TEXT).format(ident)
    return reading.output_text(ident) if by_output else sql.SQL("{}::text").format(ident)


def source_query(
    schema: str,
    table: str,
    cols: list[pgtypes.Column],
    by_output: Collection[str] = (),
    as_text: Collection[str] = (),
) -> sql.Composed:
    """The query of the table's rows, ordered by key, whose rows normal() makes comparable;
    by_output: the columns read as their type's output (cdc.pg.reading.text_by_output);
    as_text: the columns read as their text, for a sha256 mask (cdc.targets.masking)."""
    exprs = [
        _text_expr(sql.Identifier(c.name), c.spark_type, c.name in by_output)
        if c.name in as_text
        else _source_expr(sql.Identifier(c.name), c.spark_type, c.name in by_output)
        for c in cols
    ]
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
    keys = [F.col(quote(c.name)) for c in columns if c.is_key]
    frame = delta_frame(spark, location, columns)
    return [normal(tuple(r)) for r in frame.orderBy(*keys).collect()]


def delta_frame(
    spark: SparkSession,
    location: str,
    columns: list[pgtypes.Column],
    version: int | None = None,
    current: Callable[[DataFrame], DataFrame] | None = None,
) -> DataFrame:
    """The Delta table's rows (at a version, or the latest) as Spark rows that normal() makes
    comparable with source_query's; current: those of them that stand for the source's
    (the target kind's, cdc.targets.kind.TargetKind.current: not the rows marked deleted)."""
    frame = delta_table.read(spark, TableRef(location), version)
    if current is not None:
        frame = current(frame)
    exprs = [_delta_expr(F.col(quote(c.name)), c.spark_type).alias(c.name) for c in columns]
    return frame.select(*exprs)


def _delta_expr(col: Column, spark_type: str) -> Column:
    if spark_type.startswith("array<"):
        element = spark_type[len("array<") : -1]
        if element in ("date", "timestamp", "timestamp_ntz"):
            return F.transform(col, lambda x: _delta_expr(x, element))
        return col
    if spark_type == "date":
        return F.unix_date(col).cast("string")
    if spark_type in ("timestamp", "timestamp_ntz"):
        return F.unix_micros(col.cast("timestamp")).cast("string")
    return col


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


def key_text(key: tuple[Any, ...]) -> tuple[str | None, ...]:
    """A key in normal form as text, as quarantined_keys gives an event's (integers,
    numerics and strings match; a key of another type may not)."""
    return tuple(None if v is None else _numeric_text(str(v)) for v in key)


def _decimal_text(value: decimal.Decimal) -> str:
    """A numeric without trailing fractional zeros (``1.50`` and ``1.5`` are one key)."""
    text = str(value)
    if "." in text and value.is_finite():
        text = text.rstrip("0").removesuffix(".")
    return "0" if text == "-0" else text


def quarantined_keys(
    spark: SparkSession,
    pipeline: Pipeline,
    source: str,
    key_names: list[str],
    masks: Masking | None = None,
) -> set[tuple[str | None, ...]]:
    """The keys (as key_text gives them) of the source table's open quarantined rows:
    events (their key columns' text values) and snapshot rows (their JSON); a key column
    the target masks (masks: cdc.targets.masking) as the mask makes it of that text."""
    from cdc.engines.spark import decode as spark_decode
    from cdc.targets import quarantine

    rows = quarantine.with_state(
        spark,
        pipeline.table(pipeline.quarantine),
        pipeline.table(quarantine.resolved_name(pipeline.quarantine)),
    )
    if rows is None:
        return set()
    mine = quarantine.open_rows(rows).where(F.col("source") == source)
    typed = spark_decode.with_op_and_map(mine)
    is_row = F.col("ev_type") == quarantine.SNAPSHOT
    keys = [
        F.when(is_row, F.get_json_object("ev_data", "$." + _json_path(k))).otherwise(
            F.col("kv").getItem(k)
        )
        for k in key_names
    ]
    hashed = [masks.of(k) if masks is not None else None for k in key_names]
    out: set[tuple[str | None, ...]] = set()
    for row in typed.select(*keys).distinct().toLocalIterator():
        texts = [v if m is None else masks.value(v, m) for v, m in zip(row, hashed, strict=True)]
        out.add(tuple(_numeric_text(v) for v in texts))
    return out


def _json_path(name: str) -> str:
    return "['" + name.replace("'", "\\'") + "']"


def _numeric_text(text: str | None) -> str | None:
    """An event's key text, numbers without trailing fractional zeros."""
    if text is None:
        return None
    try:
        return _decimal_text(decimal.Decimal(text))
    except decimal.InvalidOperation:
        return text
