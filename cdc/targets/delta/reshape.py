"""The Delta adapter's changes to a target's columns that follow the source's schema
(cdc.targets.schema_changes decides which): a column renamed in place, and the table
rewritten with columns in wider types.

- ``rename_column``: ``ALTER TABLE ... RENAME COLUMN``, which Delta allows only with column
  mapping by name: turned on first when the table lacks it (a one-way upgrade of its protocol
  to reader 2 / writer 5 or 7; the files keep their column names, the renamed column is
  then stored under its old name). Spark, delta-rs' writes (measured: a MERGE and an append
  write the renamed column into its physical name, Spark reads them back) and delta-rs'
  QueryBuilder read and write such a table; delta-rs' pyarrow reads give NULL in place of
  the renamed column and polars refuses the table (cdc.targets.readers).
- ``rewrite_types``: every row cast to the wider types, written over the table with
  ``overwriteSchema`` in ONE commit (no reader sees a part of it), without Delta's
  typeWidening feature, so every reader that read the table reads it after. Delta keeps the
  table's properties, column comments, protocol, partitioning (given again), its ``txn``
  marks (the cdc commit identity: the rewrite carries none of its own, so the batch that
  follows is written, not taken for written) and its column mapping (the rewritten columns
  get new physical names). It does not keep (measured with Delta 4.4) the clustering
  columns, set again after in a metadata-only commit (marked pending by the property
  ``cdc.rewrite`` before the rewrite, unmarked after), nor NOT NULL: Delta writes a
  DataFrame's schema as nullable, and Spark refuses to make a column NOT NULL again, so the
  key columns are nullable after a rewrite (the caller records the key in a property
  first). Delta refuses it on a table with the change data feed that had a column renamed
  or dropped (DELTA_BLOCK_COLUMN_MAPPING_AND_CDC_OPERATION), and it would show every row in
  the feed as deleted and inserted again: such a table is widened instead.
- ``detail``: the table's size (a rewrite's cost follows it), partition and clustering
  columns.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cdc.targets.delta.local import COLUMN_MAPPING, is_mapped
from cdc.targets.delta.on_spark import properties, read, set_properties, unset_property
from cdc.targets.table import TableRef, quote

__all__ = [
    "REWRITE_PENDING",
    "Detail",
    "detail",
    "finish_rewrite",
    "rename_column",
    "rewrite_types",
]

log = logging.getLogger("cdc.schema_drift")

REWRITE_PENDING = "cdc.rewrite"  # target property: what a rewrite still has to set again


@dataclass(frozen=True)
class Detail:
    """What ``DESCRIBE DETAIL`` says of a table: its live files' bytes, and the partition and
    clustering columns a rewrite must keep."""

    size: int
    partitions: list[str]
    clustering: list[str]


def detail(spark: SparkSession, ref: TableRef) -> Detail:
    row = spark.sql(f"describe detail {ref.sql_name}").collect()[0].asDict()
    return Detail(
        int(row.get("sizeInBytes") or 0),
        list(row.get("partitionColumns") or []),
        list(row.get("clusteringColumns") or []),
    )


def rename_column(spark: SparkSession, ref: TableRef, old: str, new: str) -> None:
    """Renames a column in place, turning column mapping by name on first when needed."""
    if not is_mapped(properties(spark, ref)):
        set_properties(spark, ref, {COLUMN_MAPPING: "name"})
        log.info("%s: column mapping by name turned on to rename a column", ref.location)
    spark.sql(f"alter table {ref.sql_name} rename column {quote(old)} to {quote(new)}")


def rewrite_types(
    spark: SparkSession,
    ref: TableRef,
    types: dict[str, str],
    found: Detail,
    note: str,
    before: dict[str, str],
) -> None:
    """Rewrites the table with each column of types (Delta name -> Spark type) cast to its
    type, in one commit whose commitInfo.userMetadata is note; the properties before (what
    the table's schema no longer says after: its key) are set first, with the mark
    ``cdc.rewrite`` of the clustering columns to set again after (``finish_rewrite``).
    found: the table's ``detail``."""
    frame = read(spark, ref)
    cast = [
        F.col(quote(f.name)).cast(types[f.name]).alias(f.name, metadata=f.metadata)
        if f.name in types
        else F.col(quote(f.name))
        for f in frame.schema.fields
    ]
    writer = (
        frame.select(*cast)
        .write.format("delta")
        .mode("overwrite")
        .option("overwriteSchema", "true")
        .option("userMetadata", json.dumps({"cdc.rewrite": note}))
    )
    if found.partitions:
        writer = writer.partitionBy(*found.partitions)
    marks = dict(before)
    if found.clustering:
        marks[REWRITE_PENDING] = json.dumps({"cluster_by": found.clustering})
    if marks:
        set_properties(spark, ref, marks)
    if ref.is_path:
        writer.save(ref.location)
    else:
        writer.saveAsTable(ref.location)
    if found.clustering:
        finish_rewrite(spark, ref, json.loads(marks[REWRITE_PENDING]))


def finish_rewrite(spark: SparkSession, ref: TableRef, restore: dict[str, list[str]]) -> None:
    """Sets the clustering columns a rewrite does not keep (its ``cdc.rewrite`` mark) again,
    then drops the mark; a drain killed in between does it on its next batch."""
    clustering = restore.get("cluster_by", [])
    if clustering:
        columns = ", ".join(quote(c) for c in clustering)
        spark.sql(f"alter table {ref.sql_name} cluster by ({columns})")
    unset_property(spark, ref, REWRITE_PENDING)
