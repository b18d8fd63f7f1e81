"""The Delta adapter: every operation on a target table, given its TableRef (cdc.targets.table).

A table format is this module's set of operations: exists / ensure / add_columns / read /
append / overwrite / merge / version / files / optimize / vacuum on Spark, and LocalTable
for reads without a JVM (delta-rs). A write given a Commit carries Delta's idempotent-write
marks (txnAppId / txnVersion): a rerun of the batch after a crash skips it. Delta commits
optimistically; ``retry_conflicts`` is the one place that recognises a concurrent
modification and runs the step again.

Tables are created without column mapping, so that every reader of Delta reads them
(delta-rs' ``to_pyarrow_table`` reads NULL in place of a mapped column's values,
cdc.targets.readers), unless a column's name cannot be stored as it is (``needs_mapping``: a
PostgreSQL column name may hold spaces and punctuation that Parquet refuses); a column added
later under such a name turns mapping on in place first (``add_columns``). Without deletion
vectors unless the session's
``spark.databricks.delta.properties.defaults.enableDeletionVectors`` asks for them: a table
without them takes small batches from the driver (cdc.engines.arrow.write), and gets them
when it grows past that path's size (``enable_deletion_vectors``). On a local path, the
table's existence, schema and properties are read from its log without a JVM (LocalTable).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from pyspark.sql import DataFrame, DataFrameWriter, SparkSession
from pyspark.sql.types import StructType

from cdc.targets import catalog
from cdc.targets.table import Commit, TableRef, quote

__all__ = [
    "LocalTable",
    "add_columns",
    "append",
    "enable_deletion_vectors",
    "ensure",
    "exists",
    "files",
    "is_concurrent_conflict",
    "is_mapped",
    "local_log_head",
    "local_path",
    "merge",
    "needs_mapping",
    "optimize",
    "overwrite",
    "properties",
    "read",
    "retry_conflicts",
    "retype",
    "schema",
    "set_properties",
    "spark_table",
    "unset_property",
    "vacuum",
    "version",
]

log = logging.getLogger("cdc.merge")
T = TypeVar("T")

COLUMN_MAPPING = "delta.columnMapping.mode"
# the characters Delta refuses in a column name of a table without column mapping (Parquet's
# schema syntax; Delta's SchemaUtils.checkFieldNames)
UNSTORABLE = frozenset(" ,;{}()\n\t=")
TXN_APP = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"
MERGE_SOURCE = "cdc_batch_source"  # the view a MERGE reads its source from, as ``s``
DELETION_VECTORS = "delta.enableDeletionVectors"
CONFLICTS = (
    "CommitFailedError",  # delta-rs (cdc.engines.arrow.write)
    "ConcurrentAppendException",
    "ConcurrentDeleteReadException",
    "ConcurrentDeleteDeleteException",
    "ConcurrentTransactionException",
    "ConcurrentWriteException",
    "MetadataChangedException",
    "ProtocolChangedException",
    "DELTA_CONCURRENT",
)


def local_path(ref: TableRef) -> str | None:
    """The folder of a table on a local path (a plain path or a file: URL), else None."""
    if not ref.is_path:
        return None
    location = ref.location
    if location.startswith("file:"):
        return urllib.parse.urlparse(location).path
    return None if "://" in location else location


def exists(spark: SparkSession, ref: TableRef) -> bool:
    from delta.tables import DeltaTable

    path = local_path(ref)
    if path is not None:
        from deltalake import DeltaTable as LogReader

        return LogReader.is_deltatable(path)
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
    local = LocalTable.open_local(ref)
    if local is not None:
        return local.schema()
    return spark.table(ref.sql_name).schema


def read(spark: SparkSession, ref: TableRef, version: int | None = None) -> DataFrame:
    """The table's rows (at a version, or the latest)."""
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return reader.load(ref.location) if ref.is_path else reader.table(ref.location)


def _is_commit(name: str) -> bool:
    """A file of a Delta log that makes it a table: a commit, a checkpoint, the checkpoint
    pointer, or the folder of coordinated commits."""
    stem = name.split(".", 1)[0]
    return (stem.isdigit() and len(stem) == 20) or name in ("_last_checkpoint", "_commits")


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
    if any(_is_commit(name) for name in names):
        return
    log.warning(
        "%s: removing the log of a creation that never committed (%s)",
        location, ", ".join(names) or "empty",
    )  # fmt: skip
    fs.delete(log_path, True)


def ensure(
    spark: SparkSession, ref: TableRef, columns: list[tuple[str, str]], key: list[str]
) -> None:
    """Creates the table (the key columns not nullable; deletion vectors on unless on a
    local path), or adds the columns it lacks."""
    from delta.tables import DeltaTable

    if not exists(spark, ref):
        if ref.is_path:
            clear_uncommitted_log(spark, ref.location)
        builder = DeltaTable.createIfNotExists(spark)
        builder = builder.location(ref.location) if ref.is_path else builder.tableName(ref.location)
        for name, spark_type in columns:
            builder = builder.addColumn(name, spark_type, nullable=name not in key)
        if any(needs_mapping(name) for name, _ in columns):
            builder = builder.property(COLUMN_MAPPING, "name")
        if local_path(ref) is None:
            # no driver-side writes there (cdc.engines.arrow.write): a MERGE that deletes
            # or updates a few rows marks them instead of rewriting whole files
            builder = builder.property(DELETION_VECTORS, "true")
        builder.execute()
        if ref.name:  # a catalog target: its name in the catalog, from now on
            catalog.register_table(spark, ref)
        return
    existing = {f.name.lower() for f in schema(spark, ref).fields}
    add_columns(spark, ref, [(n, t) for n, t in columns if n.lower() not in existing])


def needs_mapping(name: str) -> bool:
    """Whether a column of this name needs column mapping (Delta stores it under another
    name in the files): it holds a character Parquet refuses."""
    return not UNSTORABLE.isdisjoint(name)


def is_mapped(props: dict[str, str]) -> bool:
    """Whether a table of these properties maps its column names."""
    return props.get(COLUMN_MAPPING, "none") != "none"


def add_columns(spark: SparkSession, ref: TableRef, columns: list[tuple[str, str]]) -> None:
    """Adds the columns; one whose name needs column mapping turns it on first, in place
    (the table's protocol is upgraded; its columns keep their names in the files)."""
    if not columns:
        return
    if any(needs_mapping(n) for n, _ in columns) and not is_mapped(properties(spark, ref)):
        set_properties(spark, ref, {COLUMN_MAPPING: "name"})
        log.info("%s: column mapping by name turned on for a new column's name", ref.location)
    cols = ", ".join(f"{quote(n)} {t}" for n, t in columns)
    spark.sql(f"alter table {ref.sql_name} add columns ({cols})")


def _text(text: str) -> str:
    """Text inside a Spark SQL string literal."""
    return text.replace("\\", "\\\\").replace("'", "\\'")


def properties(spark: SparkSession, ref: TableRef) -> dict[str, str]:
    local = LocalTable.open_local(ref)
    if local is not None:
        return local.properties()
    rows = spark.sql(f"show tblproperties {ref.sql_name}").collect()
    return {r[0]: r[1] for r in rows}


def enable_deletion_vectors(spark: SparkSession, ref: TableRef) -> None:
    """Turns deletion vectors on: a MERGE then marks the rows it deletes or updates instead
    of rewriting their files (a one-way upgrade of the table's protocol)."""
    set_properties(spark, ref, {DELETION_VECTORS: "true"})


def set_properties(spark: SparkSession, ref: TableRef, values: dict[str, str]) -> None:
    pairs = ", ".join(f"'{_text(k)}' = '{_text(v)}'" for k, v in values.items())
    spark.sql(f"alter table {ref.sql_name} set tblproperties ({pairs})")


def unset_property(spark: SparkSession, ref: TableRef, name: str) -> None:
    spark.sql(f"alter table {ref.sql_name} unset tblproperties ('{_text(name)}')")


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


@contextmanager
def _committing(spark: SparkSession, commit: Commit) -> Iterator[None]:
    """Delta's txnAppId / txnVersion for the SQL writes in the block."""
    spark.conf.set(TXN_APP, commit.app_id)
    spark.conf.set(TXN_VERSION, str(commit.version))
    try:
        yield
    finally:
        spark.conf.unset(TXN_APP)
        spark.conf.unset(TXN_VERSION)


def _write(frame: DataFrame, ref: TableRef, mode: str, commit: Commit | None) -> None:
    writer: DataFrameWriter = frame.write.format("delta").mode(mode)
    if commit is not None:
        writer = writer.option("txnAppId", commit.app_id).option("txnVersion", commit.version)
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
    spark: SparkSession, ref: TableRef, source: DataFrame, on: str, clauses: str, commit: Commit
) -> None:
    """``MERGE INTO`` the table (as ``t``) from source (as ``s``) ``ON on`` with the
    ``WHEN`` clauses, marked with the commit."""
    source.createOrReplaceTempView(MERGE_SOURCE)
    with _committing(spark, commit):
        spark.sql(f"merge into {ref.sql_name} t using {MERGE_SOURCE} s on {on} {clauses}")


def local_log_head(ref: TableRef) -> int | None:
    """The latest version of a table on a local path, from its log's file names only (no
    JVM, no log parsing: Delta never removes the latest commit file): -1 when it has no
    log. None when this cannot be told so (a catalog table, a remote path)."""
    if not ref.is_path:
        return None
    location = ref.location
    if "://" in location or location.startswith("file:"):
        if not location.startswith("file:"):
            return None
        location = urllib.parse.urlparse(location).path
    try:
        names = os.listdir(os.path.join(location, "_delta_log"))
    except FileNotFoundError:
        return -1
    except OSError:
        return None
    versions = [
        int(n[:20]) for n in names if len(n) == 25 and n.endswith(".json") and n[:20].isdigit()
    ]
    return max(versions, default=-1)


def version(spark: SparkSession, ref: TableRef) -> int:
    """The table's latest version."""
    return spark_table(spark, ref).history(1).collect()[0]["version"]


def files(spark: SparkSession, ref: TableRef) -> int:
    return int(spark.sql(f"describe detail {ref.sql_name}").collect()[0]["numFiles"])


def optimize(spark: SparkSession, ref: TableRef, zorder: str | None = None) -> None:
    """Compacts the table's files (ordered by the zorder column, when given)."""
    order = f" zorder by ({quote(zorder)})" if zorder is not None else ""
    spark.sql(f"optimize {ref.sql_name}{order}").collect()


def vacuum(spark: SparkSession, ref: TableRef, retain_hours: int) -> None:
    """Deletes the files that left the table more than retain_hours ago."""
    spark.sql(f"vacuum {ref.sql_name} retain {int(retain_hours)} hours").collect()


def is_concurrent_conflict(exc: BaseException) -> bool:
    """Whether a Spark error is one of Delta's concurrent-modification conflicts."""
    text = f"{type(exc).__name__} {exc}"
    return any(marker in text for marker in CONFLICTS)


def retry_conflicts(step: Callable[[], T], what: str, attempts: int = 5) -> T:
    """Runs step, again after a concurrent-modification conflict (with a growing pause)."""
    for attempt in range(1, attempts + 1):
        try:
            return step()
        except Exception as exc:
            if attempt == attempts or not is_concurrent_conflict(exc):
                raise
            log.info("%s: concurrent Delta commit, retrying (%d/%d)", what, attempt, attempts)
            time.sleep(0.5 * attempt)
    raise AssertionError("unreachable")


# the features a table of a legacy protocol (writer version below 7, reader below 3) has
# by its versions alone
LEGACY_WRITER = {
    2: {"appendOnly", "invariants"},
    3: {"checkConstraints"},
    4: {"changeDataFeed", "generatedColumns"},
    5: {"columnMapping"},
    6: {"identityColumns"},
}
LEGACY_READER = {2: {"columnMapping"}}

# local tables opened by LocalTable.open_local: path -> (delta-rs table, a version it was
# read at, the stat of that version's commit file)
_OPENED: dict[str, tuple[Any, int, tuple[int, int, int]]] = {}
_OPENED_LOCK = threading.Lock()
_KEPT_OPEN = 1024  # tables kept open at most (then all are read again)


def _commit_stat(path: str, version: int) -> tuple[int, int, int] | None:
    try:
        found = os.stat(os.path.join(path, "_delta_log", f"{version:020d}.json"))
    except OSError:
        return None
    return (found.st_ino, found.st_mtime_ns, found.st_size)


def _opened(path: str) -> Any:
    """delta-rs' table at path, at its latest version (see LocalTable.open_local). A table
    is brought up to date by one thread at a time; it is not read by two at once (each
    target is one task's in a batch)."""
    from deltalake import DeltaTable

    with _OPENED_LOCK:
        kept = _OPENED.pop(path, None)
    table = None
    if kept is not None and _commit_stat(path, kept[1]) == kept[2]:
        table = kept[0]
        if table.version() != kept[1] or _commit_stat(path, table.version() + 1) is not None:
            table.update_incremental()
    elif DeltaTable.is_deltatable(path):
        table = DeltaTable(path)
    else:
        raise FileNotFoundError(f"no Delta table at {path}")
    version = table.version()
    stamp = _commit_stat(path, version)
    if stamp is not None:  # a version read from a checkpoint alone is not kept
        with _OPENED_LOCK:
            if len(_OPENED) >= _KEPT_OPEN:
                _OPENED.clear()
            _OPENED[path] = (table, version, stamp)
    return table


class LocalTable:
    """A path table read with delta-rs, without a JVM (status, the failing marks, the
    drain's look for commits under an earlier appId)."""

    def __init__(self, table: Any) -> None:
        self._table = table

    @classmethod
    def open(cls, ref: TableRef) -> LocalTable | None:
        """The table, or None when there is none at the path (or ref is a catalog name)."""
        from deltalake import DeltaTable

        if not ref.is_path or not DeltaTable.is_deltatable(ref.location):
            return None
        return cls(DeltaTable(ref.location))

    @classmethod
    def open_local(cls, ref: TableRef) -> LocalTable | None:
        """open, for a table on a local path only: None for a remote one too, and for one
        whose log delta-rs cannot read (the caller asks Spark then).

        The drain asks for the same table several times a batch (exists, properties,
        schema, the write): an opened table is kept (``_OPENED``) and brought up to date
        with the commits written since (``update_incremental``), as long as the commit it
        was read at is still the same file (a log's commits are never rewritten: a
        different file there is a table made again, which is read from the start)."""
        path = local_path(ref)
        if path is None:
            return None
        try:
            return cls(_opened(path))
        except Exception as exc:
            log.debug("%s: log not read without a JVM: %s", ref.location, exc)
            return None

    @property
    def table(self) -> Any:
        """delta-rs' DeltaTable."""
        return self._table

    def version(self) -> int:
        return self._table.version()

    def schema(self) -> StructType:
        """The table's schema, as Spark reads it (the log holds Spark's schema JSON)."""
        import json

        return StructType.fromJson(json.loads(self._table.schema().to_json()))

    def properties(self) -> dict[str, str]:
        """Its properties as SHOW TBLPROPERTIES lists them: the metadata's configuration,
        the protocol's versions and each of its features as ``delta.feature.<name>``."""
        protocol = self._table.protocol()
        features = {*(protocol.reader_features or ()), *(protocol.writer_features or ())}
        return {
            **dict(self._table.metadata().configuration),
            "delta.minReaderVersion": str(protocol.min_reader_version),
            "delta.minWriterVersion": str(protocol.min_writer_version),
            **{f"delta.feature.{f}": "supported" for f in features},
        }

    def features(self) -> set[str]:
        """Every feature the table's protocol asks of a reader or writer: the listed ones,
        and those a legacy version implies."""
        protocol = self._table.protocol()
        found = {*(protocol.reader_features or ()), *(protocol.writer_features or ())}
        for version, implied in LEGACY_WRITER.items():
            if protocol.min_writer_version < 7 and protocol.min_writer_version >= version:
                found |= implied
        for version, implied in LEGACY_READER.items():
            if protocol.min_reader_version < 3 and protocol.min_reader_version >= version:
                found |= implied
        return found

    def is_mapped(self) -> bool:
        """Whether its column names are mapped (a table may support the feature with its
        mode ``none``: then its files hold the names as they are)."""
        return is_mapped(dict(self._table.metadata().configuration))

    def size(self) -> int:
        """Bytes of its live files."""
        import pyarrow as pa
        import pyarrow.compute as pc

        sizes = pa.table(self._table.get_add_actions(flatten=True)).column("size_bytes")
        return int(pc.sum(sizes).as_py() or 0)

    def bytes_between(self, column: str, low: object, high: object) -> int:
        """Bytes of its live files that may hold a row whose column lies between low and
        high: those whose statistics (min, max) overlap that range, and those without
        statistics for the column."""
        import pyarrow as pa
        import pyarrow.compute as pc

        actions = pa.table(self._table.get_add_actions(flatten=True))
        sizes = actions.column("size_bytes")
        field = next((f for f in self._table.schema().fields if f.name == column), None)
        if field is None:
            return int(pc.sum(sizes).as_py() or 0)
        physical = (field.metadata or {}).get("delta.columnMapping.physicalName", column)
        least, most = f"min.{physical}", f"max.{physical}"
        if least not in actions.column_names or most not in actions.column_names:
            return int(pc.sum(sizes).as_py() or 0)
        kind = actions.column(least).type
        outside = pc.or_(
            pc.less(actions.column(most), pa.scalar(low, kind)),
            pc.greater(actions.column(least), pa.scalar(high, kind)),
        )
        touched = pc.invert(pc.fill_null(outside, False))
        return int(pc.sum(sizes.filter(touched)).as_py() or 0)

    def rows(self) -> int:
        """Its live rows: each file's record count from the log less the rows its deletion
        vector removes (delta-rs' ``count()`` counts those too); a count over the table when
        a file has no statistics."""
        import pyarrow as pa
        import pyarrow.compute as pc

        records = pa.table(self._table.get_add_actions()).column("num_records")
        if records.null_count:
            [row] = self.query("t", "select count(*) as n from t")
            return int(row["n"])
        vectors = pa.table(self._table.deletion_vectors()).column("selection_vector")
        deleted = pc.sum(pc.invert(pc.list_flatten(vectors))).as_py() if len(vectors) else 0
        return int(pc.sum(records).as_py() or 0) - int(deleted or 0)

    def committed(self, app_id: str) -> int | None:
        """The last version (tick) that appId committed, or None."""
        return self._table.transaction_version(app_id)

    def query(self, name: str, statement: str) -> list[dict[str, Any]]:
        """The rows of a SQL query over the table, registered under name."""
        import pyarrow as pa
        from deltalake import QueryBuilder

        # through the query engine: it reads column-mapped tables (to_pyarrow does not)
        result = QueryBuilder().register(name, self._table).execute(statement).read_all()
        return pa.table(result).to_pylist()
