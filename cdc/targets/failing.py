"""The failing marks of a pipeline's targets: a small Delta table beside the quarantine
(``<quarantine>_failing``), appended to, never rewritten.

A row says that a target became failing at a tick, and why (``state = 'failing'``), or that
``cdc resync`` recovered it (``state = 'resynced'``); a target's last row is its state. The
drain writes a batch's new marks in one commit marked with the batch's idempotent-write
version (a rerun after a crash does not write them twice), before it quarantines the events
and finishes the batch: a failing target's events of that batch and of every later batch
go to the quarantine until a resync, so a crash at any point loses none of them.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cdc.targets import delta_table
from cdc.targets.table import Commit, TableRef, quote

SCHEMA = [
    ("target", "string"),
    ("source", "string"),
    ("state", "string"),  # failing | resynced
    ("reason", "string"),
    ("tick_id", "long"),
    ("at", "timestamp"),
]
FAILING = "failing"
RESYNCED = "resynced"


@dataclass(frozen=True)
class Mark:
    target: str
    source: str
    reason: str
    tick_id: int | None  # the tick of the batch at which it became failing
    at: dt.datetime | None


def current(rows: list[dict[str, Any]]) -> dict[str, Mark]:
    """The failing targets among these rows of the marks table (each target's last row)."""
    last: dict[str, dict[str, Any]] = {}
    for row in sorted(rows, key=lambda r: (r["at"] is not None, r["at"] or 0)):
        last[row["target"]] = row
    return {
        target: Mark(target, row["source"], row["reason"], row["tick_id"], row["at"])
        for target, row in last.items()
        if row["state"] == FAILING
    }


def read(spark: SparkSession, ref: TableRef) -> dict[str, Mark]:
    """The failing targets, read with Spark (no table: none)."""
    if not delta_table.exists(spark, ref):
        return {}
    return current([row.asDict() for row in delta_table.read(spark, ref).collect()])


class Cache:
    """The failing marks as one drain knows them: read once, and again only when the marks
    table's log moved since (``cdc resync`` cleared a mark, this drain added one), or on
    every call when that cannot be told cheaply (a catalog table, a remote path:
    ``delta_table.local_log_head``)."""

    def __init__(self, ref: TableRef) -> None:
        self.ref = ref
        self._head: int | None = None
        self._marks: dict[str, Mark] | None = None

    def current(self, spark: SparkSession) -> dict[str, Mark]:
        head = delta_table.local_log_head(self.ref)
        if self._marks is None or head is None or head != self._head:
            self._marks = read(spark, self.ref)
            self._head = head
        return dict(self._marks)


def read_local(ref: TableRef) -> dict[str, Mark]:
    """The failing targets, read with delta-rs (no JVM; a path location only)."""
    table = delta_table.LocalTable.open(ref)
    if table is None:
        return {}
    return current(table.query("f", "select * from f"))


def _append(
    spark: SparkSession, ref: TableRef, rows: list[tuple[Any, ...]], commit: Commit | None
) -> None:
    delta_table.ensure(spark, ref, SCHEMA, [])
    schema = ", ".join(f"{quote(n)} {t}" for n, t in SCHEMA)
    frame = spark.createDataFrame(rows, schema).withColumn("at", F.current_timestamp())
    delta_table.append(frame, ref, commit)


def mark(
    spark: SparkSession, ref: TableRef, commit: Commit, marks: dict[str, tuple[str, str]]
) -> None:
    """Marks targets failing at the batch's tick (commit.version): {target: (source,
    reason)}, in one commit with the batch's idempotent-write marks."""
    if marks:
        rows = [
            (name, source, FAILING, reason, commit.version, None)
            for name, (source, reason) in sorted(marks.items())
        ]
        _append(spark, ref, rows, commit)


def clear(
    spark: SparkSession, ref: TableRef, source: str, targets: list[str], tick_id: int | None
) -> None:
    """Marks the targets of a source recovered (cdc resync), as of the consumer's tick."""
    rows = [(name, source, RESYNCED, "resynced", tick_id, None) for name in targets]
    _append(spark, ref, rows, None)
