"""A table's history as delta-rs reads it, without a JVM, for reads as of a tick
(cdc.ops.at_tick): the commits' commitInfo (``commit_infos``: a batch's commit records its
tick and appId in userMetadata, cdc.targets.table.Commit.user_metadata), the ``txn`` actions
of given commits read from the log's JSON files (``txn_actions``: commits written before
the tick was recorded), the idempotent-write version an appId holds now (``held_tick``), and
the table's rows at a version (``rows_at``).

Every read takes a TableRef on a local path or in object storage (the storage options of
cdc.targets.delta.object_store); a catalog target's folder is read as a path.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from cdc.targets.delta import object_store
from cdc.targets.table import TableRef

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["commit_infos", "held_tick", "latest_version", "open_log", "rows_at", "txn_actions"]

log = logging.getLogger("cdc.merge")


def open_log(ref: TableRef, version: int | None = None) -> Any | None:
    """delta-rs' table at ref (at version, or its latest), None when there is no table."""
    return object_store.delta_rs_table(ref.location, version)


def latest_version(table: Any) -> int:
    return int(table.version())


def held_tick(table: Any, app_ids: Iterable[str]) -> int | None:
    """The latest version (a tick) any of app_ids committed in the table as it is now (its
    ``txn`` actions, kept by checkpoints too), None when none did."""
    found = [table.transaction_version(a) for a in app_ids]
    held = [int(v) for v in found if v is not None]
    return max(held, default=None)


def commit_infos(table: Any, limit: int | None = None) -> list[dict[str, Any]]:
    """The commitInfo of the table's last limit commits (all when None), latest first, each
    with its ``version``; commits whose JSON file the log no longer keeps are not there."""
    return list(table.history(limit))


def txn_actions(ref: TableRef, versions: Iterable[int]) -> dict[int, dict[str, int]]:
    """appId -> txn version of the ``txn`` actions of each of the commits (their JSON files
    in the log); a commit whose file is gone maps to nothing."""
    import pyarrow.fs as pafs
    from deltalake.fs import DeltaStorageHandler

    options = object_store.storage_options(ref.location)
    files = pafs.PyFileSystem(DeltaStorageHandler(ref.location, options))
    found: dict[int, dict[str, int]] = {}
    for version in sorted(set(versions)):
        try:
            with files.open_input_stream(f"_delta_log/{version:020d}.json") as stream:
                text = stream.read().decode()
        except (FileNotFoundError, OSError) as exc:
            log.debug("%s: commit %d not read: %s", ref.location, version, exc)
            continue
        actions = (json.loads(line) for line in text.splitlines() if line.strip())
        found[version] = {
            a["txn"]["appId"]: int(a["txn"]["version"]) for a in actions if "txn" in a
        }
    return found


def rows_at(ref: TableRef, version: int) -> pa.Table:
    """The table's rows at version, read through delta-rs' query engine (which reads mapped
    column names and deletion vectors: cdc.targets.readers)."""
    import pyarrow as pa
    from deltalake import QueryBuilder

    table = open_log(ref, version)
    if table is None:
        raise FileNotFoundError(f"no Delta table at {ref.location}")
    found = QueryBuilder().register("t", table).execute("select * from t")
    return pa.RecordBatchReader.from_stream(found).read_all()
