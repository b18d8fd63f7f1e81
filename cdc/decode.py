"""Events to typed rows, in Spark: one DataFrame of decoded rows per table, one of bad events.

json and urlenc are decoded inside the JVM (``from_json`` into a string map;
``str_to_map`` and ``try_url_decode``); sql events go through sqlglot in an Arrow UDF. Every
format ends as a map column -> text value, which is then cast to the column's Spark type
(cdc.pgtypes). ``present`` lists the columns an event carries: all of them for json and
urlenc (less ignored ones), the changed ones and the key for a sql UPDATE, the key for a sql
DELETE.

A bad event goes to quarantine with the reason: unknown table, undecodable payload, a value
that does not cast to its column's type, a missing key.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, MapType, StringType

from cdc import pgarray, sqlformat
from cdc.pgtypes import Column

META = ["ev_id", "ev_time", "ev_txid", "tick_id", "op"]


@dataclass(frozen=True)
class Decoded:
    rows: DataFrame  # META + present + the typed columns
    bad: DataFrame  # the raw events + reason
    cached: DataFrame

    def release(self) -> None:
        self.cached.unpersist()


def _sql_map(op: str | None, data: str | None) -> dict[str, str | None] | None:
    if op not in ("I", "U", "D") or data is None:
        return None
    try:
        return sqlformat.parse(op, data)
    except sqlformat.SqlEventError:
        return None


def _array_elements(text: str | None) -> list[str | None] | None:
    if text is None:
        return None
    try:
        return pgarray.parse(text)
    except pgarray.ArrayLiteralError:
        return None


sql_map_udf = F.udf(_sql_map, MapType(StringType(), StringType()), useArrow=True)
array_udf = F.udf(_array_elements, ArrayType(StringType()), useArrow=True)


def with_op_and_map(events: DataFrame) -> DataFrame:
    """Adds fmt (json / urlenc / sql), op (I U D R) and kv (column -> text) to raw events."""
    ev_type = F.col("ev_type")
    fmt = (
        F.when(ev_type.startswith("{"), F.lit("json"))
        .when(ev_type.rlike("^[IUD]:"), F.lit("urlenc"))
        .when(ev_type.isin("I", "U", "D", "R"), F.lit("sql"))
    )
    json_op = F.get_json_object(ev_type, "$.op")
    op = F.when(
        fmt == "json",
        F.when(json_op == "TRUNCATE", F.lit("R")).otherwise(F.substring(json_op, 1, 1)),
    ).when(fmt.isNotNull(), F.substring(ev_type, 1, 1))
    urlenc = F.transform_values(
        F.transform_keys(
            F.str_to_map(F.col("ev_data"), F.lit("&"), F.lit("=")), lambda k, _: F.try_url_decode(k)
        ),
        lambda _, v: F.try_url_decode(v),
    )
    kv = (
        F.when(F.col("op") == "R", F.create_map())
        .when(
            F.col("fmt") == "json",
            F.from_json(F.col("ev_data"), MapType(StringType(), StringType())),
        )
        .when(F.col("fmt") == "urlenc", urlenc)
    )
    typed = events.withColumn("fmt", fmt).withColumn("op", op)
    # Spark evaluates a Python UDF on every row of its input, whatever the CASE around it:
    # only sql events go through sqlglot, the others stay in the JVM
    is_sql = (F.col("fmt") == "sql") & (F.col("op") != "R")
    in_jvm = typed.where(~is_sql | is_sql.isNull()).withColumn("kv", kv)
    in_python = typed.where(is_sql).withColumn("kv", sql_map_udf(F.col("op"), F.col("ev_data")))
    return in_jvm.unionByName(in_python)


def _cast(raw: SparkColumn, spark_type: str) -> SparkColumn:
    if spark_type.startswith("array<"):
        element = spark_type[len("array<") : -1]
        return F.transform(array_udf(raw), lambda x: _cast(x, element))
    if spark_type == "string":
        return raw
    if spark_type == "binary":
        return F.when(
            raw.startswith("\\x"), F.try_to_binary(F.substring(raw, 3, 1 << 30), F.lit("hex"))
        )
    if spark_type == "timestamp":
        # PostgreSQL writes the offset as +HH, +HH:MM or +HH:MM:SS
        text = F.regexp_replace(raw, r"([+-]\d\d)$", "$1:00")
        return F.try_to_timestamp(text)
    return raw.try_cast(spark_type)


def decode_table(events: DataFrame, columns: list[Column]) -> Decoded:
    """The typed rows of one table's events (with op, fmt and kv added), and its bad events.

    Each value is cast once: the casts go into columns of a cached frame that both the rows
    and the bad events are taken from (call Decoded.release() when done)."""
    keys = [c.name for c in columns if c.is_key]
    slots = {c.name: f"__v{i}" for i, c in enumerate(columns)}
    staged = events.select(
        "*",
        *[_cast(F.col("kv").getItem(c.name), c.spark_type).alias(slots[c.name]) for c in columns],
    )
    bad_cols = F.filter(
        F.array(
            *[
                F.when(F.col("kv").getItem(name).isNotNull() & F.col(slot).isNull(), F.lit(name))
                for name, slot in slots.items()
            ]
        ),
        lambda x: x.isNotNull(),
    )
    missing_key = F.filter(
        F.array(*[F.when(F.col("kv").getItem(k).isNull(), F.lit(k)) for k in keys]),
        lambda x: x.isNotNull(),
    )
    reason = (
        F.when(F.col("op").isNull(), F.lit("unknown event type"))
        .when(
            F.col("kv").isNull(),
            F.concat(F.lit("undecodable "), F.coalesce(F.col("fmt"), F.lit("")), F.lit(" payload")),
        )
        .when(
            (F.col("op") != "R") & (F.size(missing_key) > 0),
            F.concat(F.lit("no value for key column "), F.array_join(missing_key, ", ")),
        )
        .when(
            F.size(bad_cols) > 0,
            F.concat(
                F.lit("value does not cast to the column type: "), F.array_join(bad_cols, ", ")
            ),
        )
    )
    checked = staged.withColumn("reason", reason).cache()
    rows = checked.where(F.col("reason").isNull()).select(
        *[F.col(m) for m in META],
        F.coalesce(F.map_keys(F.col("kv")), F.array().cast("array<string>")).alias("present"),
        *[F.col(slot).alias(name) for name, slot in slots.items()],
    )
    bad = checked.where(F.col("reason").isNotNull())
    return Decoded(rows, bad, checked)
