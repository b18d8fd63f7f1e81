"""Events to typed rows, in Spark: one DataFrame of decoded rows per table, one of bad events.

json and urlenc are decoded inside the JVM (``from_json`` into a string map;
``str_to_map`` and ``try_url_decode``); sql events go through sqlglot in an Arrow UDF. Every
format ends as a map column -> text value, which is then cast to the column's Spark type
(cdc.pg.pgtypes). ``present`` lists the columns an event carries: all of them for json and
urlenc (less ignored ones), the changed ones and the key for a sql UPDATE, the key for a sql
DELETE.

A bad event goes to quarantine with the reason: unknown table, undecodable payload, a value
that does not cast to its column's type, a missing key.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, MapType, StringType

from cdc.formats import sql as sqlformat
from cdc.pg import pgarray
from cdc.pg.pgtypes import Column

if TYPE_CHECKING:
    from cdc.targets.schema_drift import Drift

META = ["ev_id", "ev_time", "ev_txid", "tick_id", "op"]
# Decoded frames name every column internally (meta(name), value(i), present(i), REASON,
# RAW), so a source column may be called op, ev_id or reason
REASON = "__reason"  # why an event is bad (null for a good one)
RAW = "__raw"  # the raw event of a bad one
# the raw event, kept for the quarantine
RAW_EVENT = [
    "ev_id",
    "ev_time",
    "ev_txid",
    "ev_type",
    "ev_data",
    "ev_extra1",
    "ev_extra2",
    "ev_extra3",
    "ev_extra4",
]


def quote(name: str) -> str:
    """A column or table name as a Spark SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


@dataclass(frozen=True)
class Facts:
    """What the drain needs to know of one table's decoded events before folding them."""

    events: int
    bad: int
    truncated_at: int | None  # ev_id of the batch's last TRUNCATE of the table
    key_range: tuple[str, str] | None  # lowest and highest first key column value, as text


@dataclass(frozen=True)
class Decoded:
    rows: DataFrame  # meta(n) per META name, value(i) and present(i) per column
    bad: DataFrame  # the raw events, tick_id and reason
    cached: DataFrame

    def release(self) -> None:
        self.cached.unpersist()

    def facts(self, columns: list[Column]) -> Facts:
        """One pass over the decoded events (the first: it fills the cache)."""
        first = F.col(value(next(i for i, c in enumerate(columns) if c.is_key)))
        op = F.col(meta("op"))
        good = F.col(REASON).isNull() & (op != "R")
        row = self.cached.agg(
            F.count("*"),
            F.count(REASON),
            F.max(F.when(op == "R", F.col(meta("ev_id")))),
            # as text: a date past 9999 or before year 1 has no Python form
            F.min(F.when(good, first)).cast("string"),
            F.max(F.when(good, first)).cast("string"),
        ).collect()[0]
        key_range = None if row[3] is None else (row[3], row[4])
        return Facts(row[0], row[1], row[2], key_range)


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


FORMATS = ("json", "urlenc", "sql")
SQL_OPS = ("I", "U", "D")  # the ev_type of a sql-format row event is just its op
URLENC_TYPE = "^[IUD]:"  # urlenc: the op, a colon, the key columns


def with_op_and_map(events: DataFrame, formats: Collection[str] = FORMATS) -> DataFrame:
    """Adds fmt (json / urlenc / sql), op (I U D R) and kv (column -> text) to raw events.

    formats: the formats of the row events present (``formats_of``); leaving out those that
    are absent keeps the plan simple: urlenc decoding is not compiled code (it maps over the
    keys and values), and sql events need a second pass through Python."""
    ev_type = F.col("ev_type")
    fmt = (
        F.when(ev_type.startswith("{"), F.lit("json"))
        .when(ev_type.rlike(URLENC_TYPE), F.lit("urlenc"))
        .when(ev_type.isin(*SQL_OPS, "R"), F.lit("sql"))
    )
    json_op = F.get_json_object(ev_type, "$.op")
    op = F.when(
        fmt == "json",
        F.when(json_op == "TRUNCATE", F.lit("R")).otherwise(F.substring(json_op, 1, 1)),
    ).when(fmt.isNotNull(), F.substring(ev_type, 1, 1))
    kv = F.when(F.col("op") == "R", F.create_map())
    if "json" in formats:
        kv = kv.when(
            F.col("fmt") == "json",
            # PostgreSQL values reach 1 GB; Jackson's default stops strings at 20 MB
            F.from_json(
                F.col("ev_data"),
                MapType(StringType(), StringType()),
                {"maxStringLen": str(2**31 - 1)},
            ),
        )
    if "urlenc" in formats:
        pairs = F.str_to_map(F.col("ev_data"), F.lit("&"), F.lit("="))
        keys_decoded = F.transform_keys(pairs, lambda k, _: F.try_url_decode(k))
        kv = kv.when(
            F.col("fmt") == "urlenc",
            F.transform_values(keys_decoded, lambda _, v: F.try_url_decode(v)),
        )
    typed = events.withColumn("fmt", fmt).withColumn("op", op)
    if "sql" not in formats:
        return typed.withColumn("kv", kv)
    # Spark evaluates a Python UDF on every row of its input, whatever the CASE around it:
    # only sql events go through sqlglot, the others stay in the JVM
    is_sql = (F.col("fmt") == "sql") & (F.col("op") != "R")
    in_jvm = typed.where(~is_sql | is_sql.isNull()).withColumn("kv", kv)
    in_python = typed.where(is_sql).withColumn("kv", sql_map_udf(F.col("op"), F.col("ev_data")))
    return in_jvm.unionByName(in_python)


def formats_of(ev_type: pa.ChunkedArray | pa.Array) -> set[str]:
    """The formats of the row events among these ev_types, for with_op_and_map."""
    found = set()
    if pc.any(pc.starts_with(ev_type, "{")).as_py():
        found.add("json")
    if pc.any(pc.match_substring_regex(ev_type, URLENC_TYPE)).as_py():
        found.add("urlenc")
    if pc.any(pc.is_in(ev_type, pa.array(SQL_OPS))).as_py():
        found.add("sql")
    return found


def format_flags() -> list[SparkColumn]:
    """Per format, whether a group of raw events holds it: aggregates for a Spark frame, the
    counterpart of formats_of."""
    ev_type = F.col("ev_type")
    return [
        F.max(ev_type.startswith("{")).alias("json"),
        F.max(ev_type.rlike(URLENC_TYPE)).alias("urlenc"),
        F.max(ev_type.isin(*SQL_OPS)).alias("sql"),
    ]


# PostgreSQL's ISO output of dates and timestamps (DateStyle ISO; json's with a "T"): the
# year has 4 digits or more, " BC" follows for years before 1. Spark's casts accept more
# (anything after the date, so "0044-03-15 BC" would read as 44 AD): only this form is cast.
DATE_TEXT = r"^-?\d{4,}-\d\d-\d\d$"
TIMESTAMP_TEXT = r"^-?\d{4,}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d{1,6})?"
OFFSET_TEXT = r"[+-]\d\d(:\d\d){0,2}$"


def astronomical(raw: SparkColumn) -> SparkColumn:
    """A date or timestamp text with " BC" as Spark reads years before 1: PostgreSQL and
    Spark both count days in the proleptic Gregorian calendar, PostgreSQL's year N BC is
    Spark's year 1 - N (1 BC is year 0, 44 BC is -43)."""
    body = raw.substr(F.lit(1), F.length(raw) - 3)
    year = F.regexp_extract(body, r"^(\d+)-", 1).cast("int")
    astro_year = F.when(year == 1, F.lit("0000")).otherwise(
        F.concat(F.lit("-"), F.lpad((year - 1).cast("string"), 4, "0"))
    )
    return F.when(
        raw.endswith(" BC"), F.concat(astro_year, F.regexp_replace(body, r"^\d+", ""))
    ).otherwise(raw)


def _cast_array(raw: SparkColumn, element: str) -> SparkColumn:
    """An array literal cast element-wise; null (so: does not cast) when the literal is not
    one-dimensional with lower bound 1, or when any element that is not NULL does not cast to
    the element type (infinity in a date[], NaN in a numeric(10,2)[]): never a NULL element
    in place of a value."""
    pairs = F.transform(
        array_udf(raw), lambda x: F.struct(x.alias("t"), cast_text(x, element).alias("v"))
    )
    failed = F.exists(pairs, lambda p: p["t"].isNotNull() & p["v"].isNull())
    return F.when(~failed, F.transform(pairs, lambda p: p["v"]))


def cast_text(raw: SparkColumn, spark_type: str) -> SparkColumn:
    """A PostgreSQL text value (as events carry it) cast to a Spark type; null when it does
    not cast."""
    if spark_type.startswith("array<"):
        return _cast_array(raw, spark_type[len("array<") : -1])
    if spark_type == "string":
        return raw
    if spark_type == "binary":
        return F.when(
            raw.startswith("\\x"), F.try_to_binary(F.substring(raw, 3, 1 << 30), F.lit("hex"))
        )
    if spark_type == "date":
        text = astronomical(raw)
        return F.when(text.rlike(DATE_TEXT), text.try_cast("date"))
    if spark_type == "timestamp_ntz":
        text = astronomical(raw)
        return F.when(text.rlike(TIMESTAMP_TEXT + "$"), text.try_cast("timestamp_ntz"))
    if spark_type == "timestamp":
        # PostgreSQL writes the offset as +HH, +HH:MM or +HH:MM:SS
        text = F.regexp_replace(astronomical(raw), r"([+-]\d\d)$", "$1:00")
        return F.when(text.rlike(TIMESTAMP_TEXT + OFFSET_TEXT), F.try_to_timestamp(text))
    return raw.try_cast(spark_type)


def meta(name: str) -> str:
    """The internal name of a META column in decoded frames."""
    return "__" + name


def value(index: int) -> str:
    """The internal name of columns[index]'s typed value in decoded frames."""
    return f"__v{index}"


def present(index: int) -> str:
    """The name of the boolean column saying whether an event carries columns[index]."""
    return f"__p{index}"


def any_of(conditions: list[SparkColumn]) -> SparkColumn:
    return reduce(lambda a, b: a | b, conditions, F.lit(False))


def decode_table(
    events: DataFrame,
    columns: list[Column],
    formats: Collection[str] = FORMATS,
    drift: Drift | None = None,
) -> Decoded:
    """The typed rows of one table's raw events, and its bad events, from one cached frame.

    Each value is decoded and cast once, into a lean cached frame: META, per column its
    typed value (``value(i)``) and whether the event carries it (``present(i)``), the reason
    of a bad event, and the raw event only for bad ones. Call Decoded.release() when done.
    formats: as for with_op_and_map. drift (cdc.targets.schema_drift): the source's schema against
    the target's: columns carry the types written, and its checks come before the cast's."""
    keys = [c.name for c in columns if c.is_key]
    kv = F.col("kv")
    slots = [(c, value(i)) for i, c in enumerate(columns)]
    typed = with_op_and_map(events, formats)
    if drift is not None:
        typed = typed.withColumn("kv", drift.rewrite_kv(kv))
    staged = typed.select(
        "*", *[cast_text(kv.getItem(c.name), c.spark_type).alias(s) for c, s in slots]
    )
    # the conditions are cheap; the texts are built only for the bad events
    missing_key = any_of([kv.getItem(k).isNull() for k in keys])
    bad_value = any_of([kv.getItem(c.name).isNotNull() & F.col(s).isNull() for c, s in slots])
    reason = (
        F.when(F.col("op").isNull(), F.lit("unknown event type"))
        .when(
            kv.isNull(),
            F.concat(F.lit("undecodable "), F.coalesce(F.col("fmt"), F.lit("")), F.lit(" payload")),
        )
        .when(
            (F.col("op") != "R") & missing_key,
            F.concat(
                F.lit("no value for key column "),
                F.concat_ws(", ", *[F.when(kv.getItem(k).isNull(), F.lit(k)) for k in keys]),
            ),
        )
    )
    if drift is not None:
        drifted = drift.reason(kv)
        reason = reason.when(drifted.isNotNull(), drifted)
    reason = reason.when(
        bad_value,
        F.concat(
            F.lit("value does not cast to the column type: "),
            F.concat_ws(
                ", ",
                *[
                    F.when(kv.getItem(c.name).isNotNull() & F.col(s).isNull(), F.lit(c.name))
                    for c, s in slots
                ],
            ),
        ),
    )
    raw = F.struct(*[F.col(n) for n in RAW_EVENT])
    lean = (
        staged.withColumn(REASON, reason)
        .withColumn("__keys", F.map_keys(kv))
        .select(
            *[F.col(n).alias(meta(n)) for n in META],
            *[s for _, s in slots],
            *[
                F.coalesce(F.array_contains("__keys", c.name), F.lit(False)).alias(present(i))
                for i, c in enumerate(columns)
            ],
            REASON,
            F.when(F.col(REASON).isNotNull(), raw).alias(RAW),
        )
        .cache()
    )
    rows = lean.where(F.col(REASON).isNull()).drop(REASON, RAW)
    bad = lean.where(F.col(REASON).isNotNull()).select(
        f"{RAW}.*", F.col(meta("tick_id")).alias("tick_id"), F.col(REASON).alias("reason")
    )
    return Decoded(rows, bad, lean)
