"""One table's stream events with typed values: ``row``, a struct of the source's columns.

The source gives every value as the text the capture wrote (``columns``, exact whatever the
type); ``typed`` casts them in Spark with the drain's casts (cdc.engines.spark.decode.
``cast_text``, from cdc.casts): numeric(p,s) to decimal(p,s), timestamptz to timestamp,
arrays to arrays, the same values the drain writes to Delta. A column an event does not
carry (a sql-format UPDATE's unchanged columns, a DELETE's non-key columns) is null in
``row``: ``columns`` still tells an absent column (no entry) from a NULL (a null entry).
A text that does not cast leaves its field null and says so in ``reason``, as the drain's
quarantine does.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdc.engines.spark.decode import cast_text
from cdc.pg.pgtypes import Column

__all__ = ["ROW", "typed"]

ROW = "row"  # the struct column of typed values


def typed(events: DataFrame, columns: list[Column]) -> DataFrame:
    """The events (cdc.stream.events' rows) with ``row``: each column's text cast to its
    Spark type; ``reason`` names the columns whose text does not cast."""
    texts = F.col("columns")
    fields = [cast_text(texts.getItem(c.name), c.spark_type).alias(c.name) for c in columns]
    framed = events.withColumn(ROW, F.struct(*fields))
    failed = [
        F.when(
            texts.getItem(c.name).isNotNull() & F.col(ROW).getField(c.name).isNull(), F.lit(c.name)
        )
        for c in columns
    ]
    cast_reason = F.concat(
        F.lit("value does not cast to the column type: "), F.concat_ws(", ", *failed)
    )
    any_failed = F.concat_ws("", *failed) != F.lit("")
    return framed.withColumn("reason", F.coalesce(F.col("reason"), F.when(any_failed, cast_reason)))
