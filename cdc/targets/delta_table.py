"""The Delta adapter's operations, by the names its callers use (the modules are in
cdc.targets.delta, whose docstring describes the adapter): a table format is this set of
operations on a target given its TableRef (cdc.targets.table).

The operations are looked up here when called (``delta_table.merge(...)``), so that a
caller or a benchmark's timing probe sees one place.
"""

from __future__ import annotations

from cdc.targets.delta.commits import (
    app_commits,
    is_concurrent_conflict,
    local_log_head,
    retry_conflicts,
)
from cdc.targets.delta.history import (
    commit_infos,
    held_tick,
    latest_version,
    open_log,
    rows_at,
    txn_actions,
)
from cdc.targets.delta.local import COLUMN_MAPPING, LocalTable, is_mapped, local_path
from cdc.targets.delta.on_spark import (
    add_columns,
    append,
    drop_not_null,
    enable_deletion_vectors,
    ensure,
    exists,
    files,
    holds_none_between,
    keep_properties,
    merge,
    needs_mapping,
    optimize,
    overwrite,
    properties,
    purge_marked,
    read,
    retype,
    schema,
    set_properties,
    spark_table,
    unset_property,
    vacuum,
    version,
)
from cdc.targets.delta.reshape import (
    REWRITE_PENDING,
    Detail,
    detail,
    finish_rewrite,
    rename_column,
    rewrite_types,
)

__all__ = [
    "COLUMN_MAPPING",
    "REWRITE_PENDING",
    "Detail",
    "LocalTable",
    "add_columns",
    "app_commits",
    "append",
    "commit_infos",
    "detail",
    "drop_not_null",
    "enable_deletion_vectors",
    "ensure",
    "exists",
    "files",
    "finish_rewrite",
    "held_tick",
    "holds_none_between",
    "is_concurrent_conflict",
    "is_mapped",
    "keep_properties",
    "latest_version",
    "local_log_head",
    "local_path",
    "merge",
    "needs_mapping",
    "open_log",
    "optimize",
    "overwrite",
    "properties",
    "purge_marked",
    "read",
    "rename_column",
    "retry_conflicts",
    "retype",
    "rewrite_types",
    "rows_at",
    "schema",
    "set_properties",
    "spark_table",
    "txn_actions",
    "unset_property",
    "vacuum",
    "version",
]
