"""Events to typed rows, in Spark: one DataFrame of decoded rows per table, one of bad events.

Each event's format and op come from the format registry (cdc.formats, rendered in Spark by
cdc.engines.spark.formats), and so does its decoder: a Spark expression for a format decoded
inside the JVM (json: ``from_json`` into a string map; urlenc: ``str_to_map`` and
``try_url_decode``), an Arrow UDF for one decoded in Python (sql: sqlglot). Every format ends
as a map column -> text value, which is then cast to the column's Spark type
(cdc.pg.pgtypes) as its entry in cdc.casts says (``cast_text``). ``present(i)`` says
whether an event carries a column: all of them for a full-row format (json, urlenc; less
ignored ones), the changed ones and the key for a sql UPDATE, the key for a sql DELETE.

A bad event goes to quarantine with the reason: unknown table, undecodable payload, a value
that does not cast to its column's type, a missing key.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from functools import cache, reduce
from typing import TYPE_CHECKING

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, MapType, StringType

from cdc import casts, formats
from cdc.engines.spark import formats as spark_formats
from cdc.engines.spark import masking as spark_masking
from cdc.formats import Format
from cdc.pg import pgarray
from cdc.pg.pgtypes import Column
from cdc.rows import META, RAW, RAW_EVENT, REASON, Facts, meta, present, value

if TYPE_CHECKING:
    from cdc.targets.schema_drift import Drift


@dataclass(frozen=True)
class Decoded:
    rows: DataFrame  # meta(n) per META name, value(i) and present(i) per column
    bad: DataFrame  # the raw events, tick_id and reason
    cached: DataFrame  # the lean frame (cached unless decode_table was told not to)
    is_cached: bool = True

    def release(self) -> None:
        if self.is_cached:
            self.cached.unpersist()

    def facts(self, columns: list[Column]) -> Facts:
        """One pass over the decoded events (the first: it fills the cache)."""
        first = F.col(value(next(i for i, c in enumerate(columns) if c.is_key)))
        op = F.col(meta("op"))
        resets = op.isin(*formats.RESET_OPS)
        good = F.col(REASON).isNull() & ~resets
        row = self.cached.agg(
            F.count("*"),
            F.count(REASON),
            F.max(F.when(resets, F.col(meta("ev_id")))),
            # as text: a date past 9999 or before year 1 has no Python form
            F.min(F.when(good, first)).cast("string"),
            F.max(F.when(good, first)).cast("string"),
            F.max(F.when(op == formats.RECREATED_OP, F.col(meta("ev_id")))),
        ).collect()[0]
        key_range = None if row[3] is None else (row[3], row[4])
        return Facts(row[0], row[1], row[2], key_range, row[5])


def _array_elements(text: str | None) -> list[str | None] | None:
    if text is None:
        return None
    try:
        return pgarray.parse(text)
    except pgarray.ArrayLiteralError:
        return None


array_udf = F.udf(_array_elements, ArrayType(StringType()), useArrow=True)


@cache
def _python_udf(fmt: Format) -> Callable[..., SparkColumn]:
    """The Arrow UDF running a Python-decoded format's python_map."""
    return F.udf(fmt.python_map, MapType(StringType(), StringType()), useArrow=True)


FORMATS = formats.NAMES  # every format's name: decode all when the batch's are unknown


def with_op_and_map(events: DataFrame, batch_formats: Collection[str] = FORMATS) -> DataFrame:
    """Adds fmt (its format's name), op (I U D R, X: formats.RECREATED) and kv (column ->
    text) to raw events.

    batch_formats: the formats of the events there (``cdc.formats.formats_of``); leaving out
    those that are absent keeps the plan simple: urlenc decoding is not compiled code (it
    maps over the keys and values), and a Python-decoded format (sql) needs a second pass.
    A TRUNCATE's kv is empty, and so is a RECREATED marker's; an event no format recognises
    has op null."""
    ev_type, fmt, op = F.col("ev_type"), F.col("fmt"), F.col("op")
    typed = events.withColumn("fmt", spark_formats.format_of(ev_type)).withColumn(
        "op", spark_formats.op_of(ev_type, fmt)
    )
    chosen = [f for f in formats.FORMATS if f.name in batch_formats]
    resets = op.isin(*formats.RESET_OPS)
    kv = F.when(resets, F.create_map())
    for f in chosen:
        if f.jvm_map is not None:
            kv = kv.when(fmt == f.name, spark_formats.jvm_map(f.jvm_map, F.col("ev_data")))
    in_python = [f for f in chosen if f.python_map is not None]
    if not in_python:
        return typed.withColumn("kv", kv)
    # Spark evaluates a Python UDF on every row of its input, whatever the CASE around it:
    # only that format's events go through Python, the others stay in the JVM
    is_python = fmt.isin(*[f.name for f in in_python]) & ~resets
    parts = [typed.where(~is_python | is_python.isNull()).withColumn("kv", kv)]
    for f in in_python:
        rows = typed.where((fmt == f.name) & ~resets)
        parts.append(rows.withColumn("kv", _python_udf(f)(op, F.col("ev_data"))))
    return reduce(DataFrame.unionByName, parts)


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


def _hex(raw: SparkColumn) -> SparkColumn:
    """The bytes of a bytea's hex output (``\\x`` and two hex digits a byte)."""
    prefix = casts.BINARY_PREFIX
    return F.when(
        raw.startswith(prefix),
        F.try_to_binary(F.substring(raw, len(prefix) + 1, 1 << 30), F.lit("hex")),
    )


# per cdc.casts.SparkCast, the Spark function of a text (as rewritten) and its type
SPARK_CASTS: dict[casts.SparkCast, Callable[[SparkColumn, str], SparkColumn]] = {
    "as_is": lambda text, _: text,
    "try_cast": lambda text, spark_type: text.try_cast(spark_type),
    "try_to_timestamp": lambda text, _: F.try_to_timestamp(text),
    "hex": lambda text, _: _hex(text),
    "elements": lambda text, spark_type: _cast_array(text, casts.element_type(spark_type) or ""),
}


def cast_text(raw: SparkColumn, spark_type: str) -> SparkColumn:
    """A PostgreSQL text value (as events carry it) cast to a Spark type, as its entry in
    cdc.casts says: BC years made astronomical, the text rewritten, cast where it matches
    the entry's Spark forms; null when it does not cast."""
    entry = casts.entry(spark_type)
    text = astronomical(raw) if entry.bc else raw
    if entry.spark_rewrite is not None:
        text = F.regexp_replace(text, *entry.spark_rewrite)
    typed = SPARK_CASTS[entry.spark](text, spark_type)
    return typed if entry.spark_forms is None else F.when(text.rlike(entry.spark_forms), typed)


def any_of(conditions: list[SparkColumn]) -> SparkColumn:
    return reduce(lambda a, b: a | b, conditions, F.lit(False))


def decode_table(
    events: DataFrame,
    columns: list[Column],
    batch_formats: Collection[str] = FORMATS,
    drift: Drift | None = None,
    cache: bool = True,
) -> Decoded:
    """The typed rows of one table's raw events, and its bad events, from one cached frame
    (cache=False: not cached, for a small batch whose every read decodes again).

    Each value is decoded and cast once, into a lean cached frame: META, per column its
    typed value (``value(i)``) and whether the event carries it (``present(i)``), the reason
    of a bad event, and the raw event only for bad ones. Call Decoded.release() when done.
    batch_formats: as for with_op_and_map. drift (cdc.targets.schema_drift): the source's
    schema against the target's: columns carry the types written, and its checks come before
    the cast's; its masking (cdc.targets.masking) applies: excluded columns are read as
    absent, a masked column is decoded in its source's type (a value that does not cast
    makes a bad event, as any), then masked (cdc.engines.spark.masking)."""
    keys = [c.name for c in columns if c.is_key]
    kv = F.col("kv")
    masks = drift.masking if drift is not None else None
    masked = masks.at(columns) if masks is not None else {}
    if masks is not None:
        columns = masks.decoded(columns)
    slots = [(c, value(i)) for i, c in enumerate(columns)]
    typed = with_op_and_map(events, batch_formats)
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
            ~F.col("op").isin(*formats.RESET_OPS) & missing_key,
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
            *[
                spark_masking.masked(F.col(s), masked[i], masks).alias(s)
                if i in masked and masks is not None
                else F.col(s)
                for i, (_, s) in enumerate(slots)
            ],
            *[
                F.coalesce(F.array_contains("__keys", c.name), F.lit(False)).alias(present(i))
                for i, c in enumerate(columns)
            ],
            REASON,
            F.when(F.col(REASON).isNotNull(), raw).alias(RAW),
        )
    )
    if cache:
        lean = lean.cache()
    rows = lean.where(F.col(REASON).isNull()).drop(REASON, RAW)
    bad = lean.where(F.col(REASON).isNotNull()).select(
        f"{RAW}.*", F.col(meta("tick_id")).alias("tick_id"), F.col(REASON).alias("reason")
    )
    return Decoded(rows, bad, lean, cache)
