"""A target table's apply options: what a ``[[tables]]`` entry says beyond its source, target
and mode. Plain values without Spark (the configuration builds them, cdc.config.table_options;
the target kinds, the drain, the snapshot and verify read them).

By the mode they belong to:

- every kind that writes the source's columns: ``exclude_columns`` (kept out of the target),
  ``mask`` (column glob -> method, cdc.targets.masking), ``change_data_feed`` (Delta's change
  data feed on the target), ``type_changes`` (how a source column whose type widened is
  followed: ``rewrite`` the column's files, or ``widen`` with Delta's typeWidening feature;
  None: rewrite a table up to REWRITE_MAX_BYTES, widen a larger one), and the layout
  (``cluster_by`` or ``partition_by``, ``properties`` set on the table);
- mirror: ``deletes`` (``hard``: a delete removes the row; ``soft``: the row stays, marked
  ``__deleted`` with ``__deleted_at``);
- scd2: ``track_history_columns`` / ``track_history_except_columns`` (a change to no tracked
  column updates the current version in place) and ``tombstones`` (a delete keeps a version
  marking it).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DELETES", "MASKS", "TYPE_CHANGES", "TableOptions"]

DELETES = ("hard", "soft")
TYPE_CHANGES = ("rewrite", "widen")
MASKS = ("sha256", "null")


@dataclass(frozen=True)
class TableOptions:
    """One target's apply options (see the module docstring); the defaults change nothing."""

    exclude_columns: tuple[str, ...] = ()  # column globs
    mask: tuple[tuple[str, str], ...] = ()  # (column glob, method), in the file's order
    change_data_feed: bool = False
    type_changes: str | None = None
    cluster_by: tuple[str, ...] = ()
    partition_by: tuple[str, ...] = ()
    properties: tuple[tuple[str, str], ...] = ()
    deletes: str = "hard"
    track_history_columns: tuple[str, ...] | None = None
    track_history_except_columns: tuple[str, ...] = ()
    tombstones: bool = False

    @property
    def soft_deletes(self) -> bool:
        return self.deletes == "soft"
