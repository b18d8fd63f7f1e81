"""The quarantine: one Delta table per pipeline (``target.quarantine``) holding the events
that could not be applied (undecodable, a value that does not fit its column, a table not in
the configuration, a failing target's events), each with its tick and the reason, and the
snapshot rows whose values do not cast (as ev_type 'snapshot'). Only appended to: by the
drain once per batch, marked with the batch's Commit; by the snapshot without one.
"""

from __future__ import annotations

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc.targets import delta_table
from cdc.targets.table import Commit, TableRef

__all__ = ["SCHEMA", "append", "conform"]

SCHEMA = [
    ("ev_id", "long"),
    ("ev_time", "timestamp"),
    ("ev_txid", "long"),
    ("ev_type", "string"),
    ("ev_data", "string"),
    ("ev_extra1", "string"),
    ("ev_extra2", "string"),
    ("ev_extra3", "string"),
    ("ev_extra4", "string"),
    ("tick_id", "long"),
    ("reason", "string"),
]


def conform(frame: DataFrame, values: dict[str, SparkColumn] | None = None) -> DataFrame:
    """The frame's columns as the quarantine's: the frame's own columns of those names, or,
    given values, those values and nulls for the others."""
    if values is None:
        return frame.select(*[F.col(n).cast(t).alias(n) for n, t in SCHEMA])
    return frame.select(*[values.get(n, F.lit(None)).cast(t).alias(n) for n, t in SCHEMA])


def append(
    spark: SparkSession, ref: TableRef, frame: DataFrame, commit: Commit | None = None
) -> None:
    """Appends conformed rows (creating the table first)."""
    delta_table.ensure(spark, ref, SCHEMA, [])
    delta_table.append(frame, ref, commit)
