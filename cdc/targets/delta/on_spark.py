"""The Delta adapter's operations through Spark, given a target's TableRef: exists / ensure /
add_columns / read / append / overwrite / merge / version / files / optimize / vacuum, and
the table's properties. A write given a Commit carries Delta's idempotent-write marks
(cdc.targets.delta.commits); on a local path, existence, schema and properties come from the
log without a JVM (cdc.targets.delta.local).
"""

from __future__ import annotations

import logging
from typing import Any

from pyspark.sql import DataFrame, DataFrameWriter, SparkSession
from pyspark.sql.types import StructType

from cdc.targets import catalog
from cdc.targets.delta import object_store, spark_sql
from cdc.targets.delta.commits import committing, is_commit_file
from cdc.targets.delta.local import COLUMN_MAPPING, LocalTable, is_mapped, local_path
from cdc.targets.layout import Layout
from cdc.targets.merge_plan import Bounds, MergePlan
from cdc.targets.table import Commit, TableRef, quote

__all__ = [
    "add_columns",
    "append",
    "drop_not_null",
    "enable_deletion_vectors",
    "ensure",
    "exists",
    "files",
    "holds_none_between",
    "keep_properties",
    "merge",
    "needs_mapping",
    "optimize",
    "overwrite",
    "properties",
    "purge_marked",
    "read",
    "retype",
    "schema",
    "set_properties",
    "spark_table",
    "unset_property",
    "vacuum",
    "version",
]

log = logging.getLogger("cdc.merge")

# the characters Delta refuses in a column name of a table without column mapping (Parquet's
# schema syntax; Delta's SchemaUtils.checkFieldNames)
UNSTORABLE = frozenset(" ,;{}()\n\t=")
MERGE_SOURCE = "cdc_batch_source"  # the view a batch's MERGE reads its source from, as ``s``
CHUNK_SOURCE = "cdc_snapshot_chunk"  # the view a snapshot chunk's MERGE reads, as ``s``
DELETION_VECTORS = "delta.enableDeletionVectors"


def exists(spark: SparkSession, ref: TableRef) -> bool:
    from delta.tables import DeltaTable

    path = local_path(ref)
    if path is not None:
        from deltalake import DeltaTable as LogReader

        return LogReader.is_deltatable(path)
    if object_store.is_object_store(ref.location) and LocalTable.reach(ref) is not None:
        return True  # delta-rs read its log: no Spark job (else Spark answers)
    if ref.is_path:
        return DeltaTable.isDeltaTable(spark, ref.location)
    return spark.catalog.tableExists(ref.location)


def spark_table(spark: SparkSession, ref: TableRef) -> Any:
    """delta-spark's DeltaTable of the table (for update and history)."""
    from delta.tables import DeltaTable

    if ref.is_path:
        return DeltaTable.forPath(spark, ref.location)
    return DeltaTable.forName(spark, ref.location)


def schema(spark: SparkSession, ref: TableRef) -> StructType:
    local = LocalTable.reach(ref)  # a local path or object storage: no Spark job
    if local is not None:
        return local.schema()
    return spark.table(ref.sql_name).schema


def read(spark: SparkSession, ref: TableRef, version: int | None = None) -> DataFrame:
    """The table's rows (at a version, or the latest)."""
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return reader.load(ref.location) if ref.is_path else reader.table(ref.location)


def clear_uncommitted_log(spark: SparkSession, location: str) -> None:
    """Removes the ``_delta_log`` folder of a table whose first commit never happened (a
    process killed while creating it leaves the folder, empty or with a temporary file, and
    Delta then refuses to create the table there: DELTA_TABLE_NOT_FOUND). Nothing was ever
    committed in it, so nothing is lost; a log with any commit is left alone."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    log_path = jvm.org.apache.hadoop.fs.Path(location.rstrip("/") + "/_delta_log")
    fs = log_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    if not fs.exists(log_path):
        return
    names = [status.getPath().getName() for status in fs.listStatus(log_path)]
    if any(is_commit_file(name) for name in names):
        return
    log.warning(
        "%s: removing the log of a creation that never committed (%s)",
        location, ", ".join(names) or "empty",
    )  # fmt: skip
    fs.delete(log_path, True)


def ensure(
    spark: SparkSession,
    ref: TableRef,
    columns: list[tuple[str, str]],
    key: list[str],
    layout: Layout | None = None,
) -> None:
    """Creates the table (the key columns not nullable; deletion vectors on unless delta-rs
    reaches it: a local path or object storage) laid out as layout says (clustered or
    partitioned, its properties, column comments: cdc.targets.layout), or adds the columns
    it lacks and sets the layout's properties it lacks."""
    from delta.tables import DeltaTable

    layout = layout or Layout()
    if not exists(spark, ref):
        if ref.is_path:
            clear_uncommitted_log(spark, ref.location)
        builder = DeltaTable.createIfNotExists(spark)
        builder = builder.location(ref.location) if ref.is_path else builder.tableName(ref.location)
        for name, spark_type in columns:
            comment = layout.comment(name)
            builder = builder.addColumn(name, spark_type, nullable=name not in key, comment=comment)
        if layout.cluster_by:
            builder = builder.clusterBy(*layout.cluster_by)
        if layout.partition_by:
            builder = builder.partitionedBy(*layout.partition_by)
        if any(needs_mapping(name) for name, _ in columns):
            builder = builder.property(COLUMN_MAPPING, "name")
        if local_path(ref) is None and not object_store.is_object_store(ref.location):
            # delta-rs does not reach it, so no driver-side writes (cdc.engines.arrow.write):
            # a MERGE that deletes or updates a few rows marks them instead of rewriting
            # whole files
            builder = builder.property(DELETION_VECTORS, "true")
        for name, value in layout.properties:  # the file's, over the defaults above
            builder = builder.property(name, value)
        builder.execute()
        if ref.name:  # a catalog target: its name in the catalog, from now on
            catalog.register_table(spark, ref)
        return
    existing = {f.name.lower() for f in schema(spark, ref).fields}
    missing = [(n, t) for n, t in columns if n.lower() not in existing]
    add_columns(spark, ref, missing, dict(layout.comments))
    keep_properties(spark, ref, dict(layout.properties))


def needs_mapping(name: str) -> bool:
    """Whether a column of this name needs column mapping (Delta stores it under another
    name in the files): it holds a character Parquet refuses."""
    return not UNSTORABLE.isdisjoint(name)


def add_columns(
    spark: SparkSession,
    ref: TableRef,
    columns: list[tuple[str, str]],
    comments: dict[str, str] | None = None,
) -> None:
    """Adds the columns (with their comments, when given); one whose name needs column
    mapping turns it on first, in place (the table's protocol is upgraded; its columns keep
    their names in the files)."""
    if not columns:
        return
    if any(needs_mapping(n) for n, _ in columns) and not is_mapped(properties(spark, ref)):
        set_properties(spark, ref, {COLUMN_MAPPING: "name"})
        log.info("%s: column mapping by name turned on for a new column's name", ref.location)
    notes = comments or {}
    cols = ", ".join(
        f"{quote(n)} {t}" + (f" comment '{spark_sql.text(notes[n])}'" if n in notes else "")
        for n, t in columns
    )
    spark.sql(f"alter table {ref.sql_name} add columns ({cols})")


def properties(spark: SparkSession, ref: TableRef) -> dict[str, str]:
    local = LocalTable.reach(ref)  # a local path or object storage: no Spark job
    if local is not None:
        return local.properties()
    rows = spark.sql(f"show tblproperties {ref.sql_name}").collect()
    return {r[0]: r[1] for r in rows}


def keep_properties(
    spark: SparkSession, ref: TableRef, wanted: dict[str, str], known: dict[str, str] | None = None
) -> None:
    """Sets the wanted properties the table lacks or holds another value of (known: its
    properties, when read already), in one commit; nothing when it holds them all."""
    if not wanted:
        return
    held = properties(spark, ref) if known is None else known
    held = {k.lower(): v for k, v in held.items()}  # Delta spells its own keys its way
    todo = {k: v for k, v in wanted.items() if held.get(k.lower()) != v}
    if todo:
        set_properties(spark, ref, todo)
        pairs = ", ".join(f"{k}={v}" for k, v in todo.items())
        log.info("%s: properties set: %s", ref.location, pairs)


def enable_deletion_vectors(spark: SparkSession, ref: TableRef) -> None:
    """Turns deletion vectors on: a MERGE then marks the rows it deletes or updates instead
    of rewriting their files (a one-way upgrade of the table's protocol)."""
    set_properties(spark, ref, {DELETION_VECTORS: "true"})


def set_properties(spark: SparkSession, ref: TableRef, values: dict[str, str]) -> None:
    pairs = ", ".join(f"'{spark_sql.text(k)}' = '{spark_sql.text(v)}'" for k, v in values.items())
    spark.sql(f"alter table {ref.sql_name} set tblproperties ({pairs})")


def unset_property(spark: SparkSession, ref: TableRef, name: str) -> None:
    spark.sql(f"alter table {ref.sql_name} unset tblproperties ('{spark_sql.text(name)}')")


def retype(
    spark: SparkSession, ref: TableRef, column: str, spark_type: str, known: dict[str, str]
) -> None:
    """Widens a column to spark_type (Delta's type widening, enabled first when the table's
    properties, known, lack it; known is updated)."""
    wanted = {"delta.enableTypeWidening": "true"}
    if spark_type == "timestamp_ntz":
        wanted["delta.feature.timestampNtz"] = "supported"
    todo = {k: v for k, v in wanted.items() if known.get(k) != v}
    if todo:
        set_properties(spark, ref, todo)
        known.update(todo)
    spark.sql(f"alter table {ref.sql_name} alter column {quote(column)} type {spark_type}")


def drop_not_null(spark: SparkSession, ref: TableRef, column: str) -> None:
    spark.sql(f"alter table {ref.sql_name} alter column {quote(column)} drop not null")


def _write(frame: DataFrame, ref: TableRef, mode: str, commit: Commit | None) -> None:
    writer: DataFrameWriter = frame.write.format("delta").mode(mode)
    if commit is not None:
        writer = writer.option("txnAppId", commit.app_id).option("txnVersion", commit.version)
        recorded = commit.user_metadata
        if recorded is not None:
            writer = writer.option("userMetadata", recorded)
    if ref.is_path:
        writer.save(ref.location)
    else:
        writer.saveAsTable(ref.location)


def append(frame: DataFrame, ref: TableRef, commit: Commit | None = None) -> None:
    """Appends the rows (skipped when commit's appId already committed its version)."""
    _write(frame, ref, "append", commit)


def overwrite(frame: DataFrame, ref: TableRef, commit: Commit | None = None) -> None:
    """Replaces the table's rows, in one commit (skipped as append is)."""
    _write(frame, ref, "overwrite", commit)


def merge(
    spark: SparkSession,
    ref: TableRef,
    source: DataFrame,
    plan: MergePlan,
    commit: Commit | None = None,
) -> None:
    """``MERGE INTO`` the table (as ``t``) from source (as ``s``) as the plan says
    (cdc.targets.delta.spark_sql), marked with the commit when given (a batch's; a snapshot
    chunk's has none). The two read different views, so that neither replaces the other's
    in a session."""
    view = CHUNK_SOURCE if commit is None else MERGE_SOURCE
    source.createOrReplaceTempView(view)
    with committing(spark, commit):
        spark.sql(spark_sql.statement(plan, ref.sql_name, view))


def purge_marked(spark: SparkSession, ref: TableRef, flag: str, at: str, before: int) -> int:
    """Deletes the rows marked deleted (the boolean column flag) at a time (the timestamp
    column at) before ``before``, in microseconds since 1970 (UTC), in one commit; returns
    how many rows it deleted."""
    found = spark.sql(
        f"delete from {ref.sql_name} where {quote(flag)}"
        f" and {quote(at)} < timestamp_micros({int(before)})"
    ).collect()
    return int(found[0][0]) if found else 0


def holds_none_between(spark: SparkSession, ref: TableRef, bounds: Bounds) -> bool:
    """Whether the table holds no row within the bounds (files whose statistics lie outside
    them are not read)."""
    condition = spark_sql.between(bounds)
    return read(spark, ref).alias("t").where(condition).limit(1).count() == 0


def version(spark: SparkSession, ref: TableRef) -> int:
    """The table's latest version."""
    return spark_table(spark, ref).history(1).collect()[0]["version"]


def files(spark: SparkSession, ref: TableRef) -> int:
    return int(spark.sql(f"describe detail {ref.sql_name}").collect()[0]["numFiles"])


def optimize(spark: SparkSession, ref: TableRef, zorder: str | None = None) -> None:
    """Compacts the table's files, ordered by the zorder column when given; a
    liquid-clustered table's are clustered by its clustering columns instead (Delta refuses
    ZORDER BY on it), and a partition column is not ZORDERed by (Delta refuses that too)."""
    if zorder is not None:
        found = spark.sql(f"describe detail {ref.sql_name}").collect()[0]
        if found["clusteringColumns"] or zorder in (found["partitionColumns"] or []):
            zorder = None
    order = f" zorder by ({quote(zorder)})" if zorder is not None else ""
    spark.sql(f"optimize {ref.sql_name}{order}").collect()


def vacuum(spark: SparkSession, ref: TableRef, retain_hours: int) -> None:
    """Deletes the files that left the table more than retain_hours ago."""
    spark.sql(f"vacuum {ref.sql_name} retain {int(retain_hours)} hours").collect()
