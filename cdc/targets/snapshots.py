"""The progress of chunked snapshots: a small Delta table beside the quarantine
(``<quarantine>_snapshots``), appended to, never rewritten.

One row per target and save: the snapshot's state (``running`` while chunks remain,
``copied`` once the last chunk is written, ``done`` once the drain applied a batch whose
tick is after the last chunk's snapshot, ``failed`` with the reason), the last key copied
(its columns' text values as a JSON list), the rows and chunks copied so far, the
PostgreSQL snapshot the last chunk was read in (``txid_snapshot`` text, its xmax and the
server clock just after it was taken), the tick at which the drain was asked for it (a
signal's batch), and a per-target ``seq`` that orders the rows (a target's row with the
highest seq is its state).

Why Delta and not a PostgreSQL table: it works for both queue engines (a PgQ queue has no
schema of ours to hold a table) and for any role the drain or ``cdc snapshot`` runs as (a
plain ``cdc_reader`` member cannot create or write tables in the source), and it lives with
the targets it describes: a target folder moved or recreated comes with its progress, or
without it.

A row is saved after the chunk's Delta commit (never before): a process killed in between
redoes that chunk, which is harmless (cdc.pipeline.snapshot).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from pyspark.sql import SparkSession

from cdc.engines.arrow import write as driver_writes
from cdc.pg import pgtypes
from cdc.targets import delta_table
from cdc.targets.delta import delta_rs
from cdc.targets.table import TableRef, quote

__all__ = ["COPIED", "DONE", "FAILED", "RUNNING", "SCHEMA", "Progress", "read", "read_local"]

RUNNING, COPIED, DONE, FAILED = "running", "copied", "done", "failed"
SCHEMA = [
    ("target", "string"),
    ("source", "string"),
    ("state", "string"),  # running | copied | done | failed
    ("last_key", "string"),  # JSON list of the key columns' text values; null: none yet
    ("rows", "long"),
    ("chunks", "long"),
    ("snapshot", "string"),  # txid_snapshot text of the last chunk's read
    ("xmax", "long"),  # its xmax
    ("snapshot_at", "timestamp"),  # the server's clock just after it was taken
    ("position", "long"),  # the consumer's last applied tick when the last chunk was read
    ("tick_id", "long"),  # the tick of the batch whose signal asked for it (null: cdc snapshot)
    ("reason", "string"),
    ("started", "timestamp"),
    ("updated", "timestamp"),
    ("seq", "long"),
]


def table_name(quarantine: str) -> str:
    """The target name of the progress table, beside the quarantine."""
    return f"{quarantine}_snapshots"


@dataclass(frozen=True)
class Progress:
    """One target's snapshot state (a row of the progress table)."""

    target: str
    source: str
    state: str = RUNNING
    last_key: tuple[str, ...] | None = None
    rows: int = 0
    chunks: int = 0
    snapshot: str | None = None
    xmax: int | None = None
    snapshot_at: dt.datetime | None = None
    position: int | None = None
    tick_id: int | None = None
    reason: str | None = None
    started: dt.datetime | None = None
    updated: dt.datetime | None = None
    seq: int = 0

    @classmethod
    def start(cls, target: str, source: str, tick_id: int | None, seq: int) -> Progress:
        now = dt.datetime.now(dt.UTC)
        return cls(target, source, tick_id=tick_id, started=now, updated=now, seq=seq)

    def next(self, **changes: Any) -> Progress:
        """The following state (seq + 1, updated now)."""
        return replace(self, **changes, seq=self.seq + 1, updated=dt.datetime.now(dt.UTC))

    def row(self) -> tuple[Any, ...]:
        key = None if self.last_key is None else json.dumps(list(self.last_key))
        # aware datetimes: PySpark would read naive ones in the process's local time zone
        times = [
            None if t is None else t.astimezone(dt.UTC)
            for t in (self.snapshot_at, self.started, self.updated)
        ]
        return (
            self.target, self.source, self.state, key, self.rows, self.chunks, self.snapshot,
            self.xmax, times[0], self.position, self.tick_id, self.reason, times[1], times[2],
            self.seq,
        )  # fmt: skip

    @classmethod
    def of_row(cls, row: dict[str, Any]) -> Progress:
        key = row.get("last_key")

        def utc(value: Any) -> dt.datetime | None:
            # Spark returns naive datetimes in the local time zone; delta-rs aware ones
            return None if value is None else value.astimezone(dt.UTC)

        return cls(
            row["target"], row["source"], row["state"],
            None if key is None else tuple(json.loads(key)), int(row["rows"] or 0),
            int(row["chunks"] or 0), row.get("snapshot"), row.get("xmax"),
            utc(row.get("snapshot_at")), row.get("position"), row.get("tick_id"),
            row.get("reason"), utc(row.get("started")), utc(row.get("updated")),
            int(row["seq"] or 0),
        )  # fmt: skip


def latest(rows: list[dict[str, Any]]) -> dict[str, Progress]:
    """Each target's state among these rows of the progress table (its highest seq)."""
    last: dict[str, dict[str, Any]] = {}
    for row in rows:
        seen = last.get(row["target"])
        if seen is None or row["seq"] >= seen["seq"]:
            last[row["target"]] = row
    return {target: Progress.of_row(row) for target, row in last.items()}


def read(spark: SparkSession, ref: TableRef) -> dict[str, Progress]:
    """Every target's snapshot state (no table: none): read with delta-rs on a local
    path (no Spark job), else with Spark."""
    if delta_table.local_path(ref) is not None:
        return read_local(ref)
    if not delta_table.exists(spark, ref):
        return {}
    return latest([row.asDict() for row in delta_table.read(spark, ref).collect()])


def read_local(ref: TableRef) -> dict[str, Progress]:
    """Every target's snapshot state, read with delta-rs (no JVM; a path location only):
    for ``cdc status``."""
    table = delta_table.LocalTable.open(ref)
    if table is None:
        return {}
    return latest(table.query("p", "select * from p"))


def save(spark: SparkSession, ref: TableRef, states: list[Progress]) -> None:
    """Appends these states, in one commit (creating the table first): with delta-rs on a
    local path it may write (no Spark job: a chunk's save cost more than a second), else
    with Spark."""
    if not states:
        return
    delta_table.ensure(spark, ref, SCHEMA, [])
    local = delta_table.LocalTable.open_local(ref)
    if local is not None and driver_writes.writable(local, SCHEMA, [], any_size=True):
        import pyarrow as pa

        schema = pa.schema([(n, pgtypes.arrow_type(t)) for n, t in SCHEMA])
        rows = pa.Table.from_pylist(
            [dict(zip(schema.names, s.row(), strict=True)) for s in states], schema
        )
        write = partial(delta_rs.append, local, rows, SCHEMA)
        delta_table.retry_conflicts(write, "snapshot progress")
        return
    schema = ", ".join(f"{quote(n)} {t}" for n, t in SCHEMA)
    frame = spark.createDataFrame([s.row() for s in states], schema)
    delta_table.retry_conflicts(lambda: delta_table.append(frame, ref), "snapshot progress")
