"""The engine interface: the operations a target kind writes a table's rows with, the same on
both engines, so that a kind (cdc.targets.mirror, cdc.targets.history, ...) is written once
against it and runs on either.

An engine is made for one target (its TableRef, and for the Arrow engine its log opened with
delta-rs) and holds that engine's rows: a Spark DataFrame (cdc.engines.spark.engine), an
Arrow table (cdc.engines.arrow.engine), or Spark's rows collected into Arrow for the Arrow
engine to write (cdc.engines.collected: a small part Spark decoded). The rows follow the row
contract (cdc.rows): decoded rows (meta, value and present columns) into ``fold``, folded
rows (value, has, ACTION, RESET, match_key) out of it.

Which engine runs a part is not the kind's choice: the route planner decides
(cdc.engines.planner), and the pipeline makes the engine (cdc.pipeline.parts,
cdc.pipeline.snapshot_job). The Arrow engine may still decline a write that the planner
could not rule out beforehand (the files a MERGE would rewrite beyond its budget, a date
beyond year 9999, a failure of delta-rs): it raises ``Declined`` with the reason, having
committed nothing, and the pipeline hands the part to Spark with that reason in the route.
Concurrent commits are never declined: they are raised for the retry
(cdc.targets.delta.commits.retry_conflicts).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from datetime import datetime

    from cdc.pg.pgtypes import Column
    from cdc.rows import Versioning
    from cdc.targets.merge_plan import Bounds, MergePlan
    from cdc.targets.table import Commit

__all__ = ["Declined", "Engine", "Named"]

# (source column, target name, Spark type): a column of rows as the target names and types it
Named = tuple[str, str, str]


class Declined(Exception):
    """The engine does not write this part as the other engine would; nothing was committed.
    The message is the reason, recorded in the route."""


class Engine(Protocol):
    """What a target kind asks of an engine, for one target (see the module docstring)."""

    name: str  # cdc.engines.planner.ARROW or SPARK: the engine that writes

    # -- a batch's rows
    def fold(self, rows: Any, columns: list[Column], soft: bool = False) -> Any:
        """One action per key (the fold's rules, cdc.engines.spark.fold); soft: with the
        columns of a target that keeps deleted rows (cdc.rows.GONE, GONE_AT, KEEPS)."""

    def after(self, rows: Any, ev_id: int) -> Any:
        """The decoded rows after the event ev_id (a batch's last TRUNCATE of the table)."""

    def versions(
        self, rows: Any, columns: list[Column], rules: Versioning, bounds: Bounds | None
    ) -> Any:
        """Versioned rows (cdc.rows; the rules in cdc.targets.scd2) of the decoded rows and
        the target's current versions of their keys (within bounds, when given), read by
        the engine."""

    def changes(self, rows: Any, columns: list[Column], at: datetime) -> Any:
        """A snapshot chunk's rows (named as the source's columns) as decoded rows: each
        an UPDATE at time ``at``, in a transaction of its own (a versioned target's seed)."""

    def upserted(self, folded: Any) -> Any:
        """The folded rows whose action is an upsert."""

    def kept(self, folded: Any) -> Any:
        """The soft fold's rows that a target lacking their key gets (cdc.rows.KEEPS)."""

    def time_of(self, rows: Any, ev_id: int) -> int:
        """The ev_time of decoded rows' event ev_id, in microseconds since 1970 (UTC)."""

    def with_values(self, rows: Any, values: list[tuple[str, str, Any]]) -> Any:
        """rows with columns added, each (name, Spark type, value) one value in every row."""

    def named(self, rows: Any, columns: list[Named]) -> Any:
        """rows' source columns as the target names and types them, in that order."""

    def key_range(
        self, folded: Any, columns: list[Column], decoded: tuple[str, str] | None
    ) -> tuple[Any, Any] | None:
        """The first-key range a batch's MERGE may touch (the decoder's range, decoded, or
        one the engine reads from the folded rows)."""

    def merge(self, rows: Any, columns: list[Column], plan: MergePlan, commit: Commit) -> None:
        """MERGEs folded rows into the target as the plan says, in one commit marked with
        commit (nothing when the target holds that commit already)."""

    def append(self, rows: Any, schema: list[tuple[str, str]], commit: Commit) -> None:
        """Appends rows (named as the target's schema) in one commit marked with commit."""

    def overwrite(self, rows: Any, schema: list[tuple[str, str]], commit: Commit) -> None:
        """Replaces the target's rows with rows (named as its schema), in one commit."""

    # -- a snapshot chunk's rows (named as the source's columns, cast to the target's types)
    def chunk_bounds(self, rows: Any, columns: list[Column]) -> tuple[Any, Any] | None:
        """The chunk's lowest and highest first key, as the target compares them."""

    def holds_none_between(self, bounds: Bounds) -> bool:
        """Whether the target holds no row within the bounds."""

    def append_chunk(self, rows: Any, columns: list[Column], schema: list[tuple[str, str]]) -> None:
        """Appends a chunk's rows, with no commit identity (a snapshot's)."""

    def merge_chunk(self, rows: Any, columns: list[Column], plan: MergePlan) -> None:
        """MERGEs a chunk's rows as whole rows (MergePlan.for_snapshot_chunk)."""
