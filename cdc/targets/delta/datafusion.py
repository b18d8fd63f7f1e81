"""Queries over target tables with delta-rs' QueryBuilder (DataFusion SQL), without a JVM: the
tables of ``cdc sql``'s datafusion engine (cdc.ops.query_datafusion).

``open_table`` opens a target's table (at its latest version, or at a version of its log:
``DeltaTable(..., version=)``), in object storage with the options
cdc.targets.delta.object_store derives from the S3A settings; ``refusals`` names the
features of its protocol that QueryBuilder refuses (cdc.targets.readers), so that a caller
can take Spark instead. A ``Tables`` session registers tables under names, a table as it is
or empty with its columns (a table that had no data yet at a tick), and ``execute`` runs one
statement: its rows as an Arrow table, at most ``limit`` of them (the rest of the result is
never computed).

The session folds unquoted identifiers to lower case, as PostgreSQL does
(``datafusion.sql_parser.enable_ident_normalization``; delta-rs leaves it off): a table is
registered under its name in lower case and found written in any case; a column whose name
holds capitals is written in double quotes. information_schema is on, for ``show tables``
and ``show columns from t``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cdc.targets import readers
from cdc.targets.delta import object_store

if TYPE_CHECKING:
    import pyarrow as pa

    from cdc.targets.table import TableRef

__all__ = ["QUERY_BUILDER", "SESSION_CONFIG", "QueryFailed", "Tables", "open_table", "refusals"]

QUERY_BUILDER = "delta-rs QueryBuilder"  # its entry in cdc.targets.readers.READERS
SESSION_CONFIG = {
    "datafusion.sql_parser.enable_ident_normalization": "true",
    "datafusion.catalog.information_schema": "true",
}
HIDDEN = "__cdc_whole_"  # the prefix of a table an empty one is a view of


class QueryFailed(Exception):
    """delta-rs or DataFusion refused or failed: its message (it may span lines)."""


def open_table(ref: TableRef, version: int | None = None) -> Any | None:
    """delta-rs' table at ref's path (at version, else its latest), or None when there is
    no Delta table there (or ref is a catalog name). QueryFailed when the log cannot be read
    at that version (its commit file removed by log retention, or never written)."""
    if not ref.is_path:
        return None
    try:
        return object_store.delta_rs_table(ref.location, version)
    except Exception as exc:
        raise QueryFailed(_text(exc)) from None


def refusals(table: Any) -> list[str]:
    """The features of the table's protocol that QueryBuilder refuses to read (delta-rs
    checks them before it reads: the table would be an error, never wrong rows)."""
    protocol = table.protocol()
    found = {*(protocol.reader_features or ()), *(protocol.writer_features or ())}
    refused = readers.READERS[QUERY_BUILDER]
    return sorted(f for f in found if refused.get(f) == readers.REFUSES)


def _text(exc: BaseException) -> str:
    return str(exc).strip() or type(exc).__name__


class Tables:
    """One DataFusion session over registered tables; statements run one after the other
    in it (a view one creates is there for the next)."""

    def __init__(self) -> None:
        from deltalake import QueryBuilder

        self._builder = QueryBuilder(SESSION_CONFIG)

    def add(self, name: str, table: Any, *, empty: bool = False) -> None:
        """Registers table under name (in lower case); empty: its columns, no rows."""
        name = name.lower()
        if not empty:
            self._builder.register(name, table)
            return
        self._builder.register(HIDDEN + name, table)
        self.execute(f"create view {_ident(name)} as select * from {_ident(HIDDEN + name)}"
                     " where false")  # fmt: skip

    def execute(self, statement: str, limit: int = 0) -> pa.Table:
        """The statement's rows (at most limit; 0: all). QueryFailed with DataFusion's
        message when it refuses or fails the statement."""
        import pyarrow as pa

        try:
            reader = pa.RecordBatchReader.from_stream(self._builder.execute(statement))
            if limit <= 0:
                return reader.read_all()
            batches, rows = [], 0
            while rows < limit:
                try:
                    batch = reader.read_next_batch()
                except StopIteration:
                    break
                batches.append(batch)
                rows += batch.num_rows
            reader.close()  # the rest is never computed
            return pa.Table.from_batches(batches, reader.schema).slice(0, limit)
        except Exception as exc:
            raise QueryFailed(_text(exc)) from None


def _ident(name: str) -> str:
    """A name as DataFusion's quoted identifier."""
    return '"' + name.replace('"', '""') + '"'
