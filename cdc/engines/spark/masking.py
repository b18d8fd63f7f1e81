"""The masks of cdc.targets.masking in Spark: a sha256 mask renders each value's text in the
JVM (the same text as the Arrow engine's, cdc.engines.arrow.masking) and hashes it in a
Python UDF holding the salt, so that the salt is never part of a query plan (which Spark's
UI, event log and some error messages show); a null mask is a typed NULL.

Used where Spark's rows get their target columns: the decode of a batch's or a replay's events
(cdc.engines.spark.decode), a snapshot chunk (``named``) and the replay's key match
(cdc.pipeline.replay_plan).
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from cdc.targets.masking import NULL, Masked, Masking, hasher
from cdc.targets.table import quote

__all__ = ["masked", "named", "text"]

INTEGERS = ("short", "int", "long")


def text(col: SparkColumn, spark_type: str) -> SparkColumn:
    """A value's text as PostgreSQL outputs it (cdc.targets.masking.HASHABLE's types): a
    date in DateStyle ISO, its year before 1 as ``... BC``, past 9999 in more digits."""
    if spark_type == "date":
        year = F.year(col)
        day = F.format_string(
            "%04d-%02d-%02d", F.when(year > 0, year).otherwise(1 - year), F.month(col),
            F.dayofmonth(col),
        )  # fmt: skip
        return F.when(col.isNotNull(), F.concat(day, F.when(year > 0, "").otherwise(" BC")))
    if spark_type in INTEGERS:
        return col.cast("string")
    return col


def _hasher(salt: bytes, pg_type: str) -> Callable[[SparkColumn], SparkColumn]:
    """The UDF hashing texts with the salt (held by the function, not by the plan)."""
    return F.udf(hasher(salt, pg_type), StringType(), useArrow=True)


def masked(col: SparkColumn, mask: Masked, masking: Masking) -> SparkColumn:
    """A column's values (in the source's type) as the target holds them."""
    if mask.method == NULL:
        return F.lit(None).cast(mask.source_type)
    assert masking.salt is not None, "resolve() gives every sha256 mask its salt"
    return _hasher(masking.salt, mask.pg_type)(text(col, mask.source_type))


def named(frame: DataFrame, masking: Masking) -> DataFrame:
    """Rows named as the source's columns, as the target's columns: the excluded ones left
    out, the masked ones masked."""
    out = []
    for c in masking.columns:
        mask = masking.of(c.name)
        col = F.col(quote(c.name))
        out.append(col if mask is None else masked(col, mask, masking).alias(c.name))
    return frame.select(*out)
