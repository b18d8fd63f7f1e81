"""A target on a local path read with delta-rs, without a JVM (``LocalTable``): its
existence, schema, properties, features, sizes and the commits an appId made, for status,
the failing marks, the drain's look for commits under an earlier appId, and the driver's
writes (cdc.targets.delta.delta_rs) to the table it opened.
"""

from __future__ import annotations

import logging
import threading
import urllib.parse
from typing import Any

from pyspark.sql.types import StructType

from cdc.targets.delta import object_store
from cdc.targets.delta.commits import commit_stat
from cdc.targets.table import TableRef

__all__ = ["COLUMN_MAPPING", "LocalTable", "is_mapped", "local_path"]

log = logging.getLogger("cdc.merge")

COLUMN_MAPPING = "delta.columnMapping.mode"


def local_path(ref: TableRef) -> str | None:
    """The folder of a table on a local path (a plain path or a file: URL), else None."""
    if not ref.is_path:
        return None
    location = ref.location
    if location.startswith("file:"):
        return urllib.parse.urlparse(location).path
    return None if "://" in location else location


def is_mapped(props: dict[str, str]) -> bool:
    """Whether a table of these properties maps its column names."""
    return props.get(COLUMN_MAPPING, "none") != "none"


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


def _opened(path: str) -> Any:
    """delta-rs' table at path, at its latest version (see LocalTable.open_local). A table
    is brought up to date by one thread at a time; it is not read by two at once (each
    target is one task's in a batch)."""
    from deltalake import DeltaTable

    with _OPENED_LOCK:
        kept = _OPENED.pop(path, None)
    table = None
    if kept is not None and commit_stat(path, kept[1]) == kept[2]:
        table = kept[0]
        if table.version() != kept[1] or commit_stat(path, table.version() + 1) is not None:
            table.update_incremental()
    elif DeltaTable.is_deltatable(path):
        table = DeltaTable(path)
    else:
        raise FileNotFoundError(f"no Delta table at {path}")
    version = table.version()
    stamp = commit_stat(path, version)
    if stamp is not None:  # a version read from a checkpoint alone is not kept
        with _OPENED_LOCK:
            if len(_OPENED) >= _KEPT_OPEN:
                _OPENED.clear()
            _OPENED[path] = (table, version, stamp)
    return table


# tables in object storage opened by LocalTable.reach: URL -> delta-rs table
_REACHED: dict[str, Any] = {}


def _reached(ref: TableRef) -> LocalTable | None:
    """LocalTable.reach of an object store's table (see there)."""

    with _OPENED_LOCK:
        kept = _REACHED.pop(ref.location, None)
    table = None
    if kept is not None:
        try:
            kept.update_incremental()
            table = kept
        except Exception as exc:  # read it again from the start
            log.debug("%s: log not brought up to date: %s", ref.location, exc)
    if table is None:
        opened = LocalTable.open(ref)
        if opened is None:
            return None
        table = opened.table
    with _OPENED_LOCK:
        if len(_REACHED) >= _KEPT_OPEN:
            _REACHED.clear()
        _REACHED[ref.location] = table
    return LocalTable(table)


class LocalTable:
    """A path table read with delta-rs, without a JVM (status, the failing marks, the
    drain's look for commits under an earlier appId)."""

    def __init__(self, table: Any) -> None:
        self._table = table

    @classmethod
    def open(cls, ref: TableRef) -> LocalTable | None:
        """The table, or None when there is none at the path (or ref is a catalog name); a
        path in object storage is read with the options cdc.targets.delta.object_store
        derives from the Spark settings."""
        if not ref.is_path:
            return None
        table = object_store.delta_rs_table(ref.location)
        return None if table is None else cls(table)

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

    @classmethod
    def reach(cls, ref: TableRef) -> LocalTable | None:
        """The table as delta-rs reaches it: on a local path (open_local), or in object
        storage (cdc.targets.delta.object_store). Either is kept open and brought up to date
        with the commits written since, as Spark keeps a table's log: in object storage a
        table opened once costs one listing of its log per look (the drain looks several
        times a batch) instead of reading its log again. None for a catalog name, a table
        not there yet, and one whose log delta-rs cannot read (the caller asks Spark then)."""
        if local_path(ref) is not None:
            return cls.open_local(ref)
        if not object_store.is_object_store(ref.location):
            return None
        try:
            return _reached(ref)
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

    def rows(self) -> int | None:
        """Its live rows: each file's record count from the log less the rows its deletion
        vector removes (delta-rs' ``count()`` counts those too); a count over the table when
        a file has no statistics. None when delta-rs cannot tell: it refuses to read the
        deletion vectors, or the table, of one with Delta's typeWidening feature."""
        import pyarrow as pa
        import pyarrow.compute as pc

        features = self.features()
        records = pa.table(self._table.get_add_actions()).column("num_records")
        if "typeWidening" in features and (records.null_count or "deletionVectors" in features):
            return None
        if records.null_count:
            [row] = self.query("t", "select count(*) as n from t")
            return int(row["n"])
        if "deletionVectors" not in features:
            return int(pc.sum(records).as_py() or 0)
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
