"""The quarantine: one Delta table per pipeline (``target.quarantine``) holding the events
that could not be applied (undecodable, a value that does not fit its column, a table not in
the configuration, a failing target's events), each with its tick, the reason (text, for
people) and the cause (one of ``CAUSES``, for the code: the replay reads it), and the
snapshot rows whose values do not cast (as ev_type 'snapshot'). Only appended to: by the
drain once per batch, marked with the batch's Commit; by the snapshot without one. Rows of
versions before the cause was stored have none: ``cause_of`` reads theirs from the reason.

What became of a quarantined row is kept beside it, in ``<quarantine>_resolved`` (appended
to, never rewritten, like the failing marks): one row per quarantined row and run of ``cdc
quarantine replay`` or ``discard``, with its state. A quarantined row is known by its
identity: source table (ev_extra1), ev_id, tick_id and the md5 of ev_data (snapshot rows
have no ev_id). Its state is its resolution row of the highest run (within a run, the final
row over the plan's ``replaying`` row):

- none, ``replaying`` (a replay planned it and was interrupted) or ``failed`` (a replay
  tried it and it still does not apply, with the new reason): **open**, counted by status;
- ``replayed`` (applied by a replay), ``superseded`` (a later change of its key reached the
  target first, or a resync's snapshot showed it), ``discarded`` (acknowledged by ``cdc
  quarantine discard``): resolved, kept for audit, not counted.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from cdc.targets import delta_table
from cdc.targets.table import Commit, TableRef, quote

if TYPE_CHECKING:
    from cdc.config import Pipeline

__all__ = [
    "CAUSES",
    "OPEN",
    "RESOLVED",
    "RESOLVED_SCHEMA",
    "SCHEMA",
    "append",
    "cause_of",
    "conform",
    "latest",
    "open_counts",
    "open_counts_of",
    "record",
    "resolved_name",
    "with_state",
]

SCHEMA = [
    ("ev_id", "long"),
    ("ev_time", "timestamp"),
    ("ev_txid", "long"),
    ("ev_type", "string"),
    ("ev_data", "string"),
    ("ev_extra1", "string"),
    ("ev_extra2", "string"),
    ("ev_extra3", "string"),
    ("ev_extra4", "string"),
    ("tick_id", "long"),
    ("reason", "string"),
    ("cause", "string"),  # one of CAUSES; null in rows of earlier versions (cause_of)
]

# What sent a row to the quarantine (its ``cause``):
BAD_EVENT = "bad_event"  # the event does not decode or fit its target (the reason says why)
STRAY = "stray"  # an event of a table the pipeline does not replicate
FAILING_TARGET = "failing_target"  # an event of a table with a failing target (its resync)
SNAPSHOT_ROW = "snapshot"  # a snapshot row whose values do not cast
CAUSES = (BAD_EVENT, STRAY, FAILING_TARGET, SNAPSHOT_ROW)

REPLAYING, FAILED = "replaying", "failed"
REPLAYED, SUPERSEDED, DISCARDED = "replayed", "superseded", "discarded"
RESOLVED = frozenset({REPLAYED, SUPERSEDED, DISCARDED})
OPEN = "open"  # the state shown for a row without any resolution
SNAPSHOT = "snapshot"  # ev_type of a snapshot row that did not cast

RESOLVED_SCHEMA = [
    ("source", "string"),  # the row's ev_extra1
    ("ev_id", "long"),
    ("tick_id", "long"),
    ("data_md5", "string"),  # md5 of its ev_data ('' when null)
    ("state", "string"),  # replaying | replayed | superseded | failed | discarded
    ("reason", "string"),  # failed: the new reason; superseded: by what; discarded: a note
    ("run", "long"),  # the replay or discard run that wrote it, increasing per pipeline
    ("at", "timestamp"),
]
IDENTITY = ["source", "ev_id", "tick_id", "data_md5"]


def resolved_name(quarantine: str) -> str:
    """The target name of the resolutions table, beside the quarantine."""
    return f"{quarantine}_resolved"


def conform(frame: DataFrame, values: dict[str, SparkColumn] | None = None) -> DataFrame:
    """The frame's columns as the quarantine's: the frame's own columns of those names, or,
    given values, those values and nulls for the others. Every producer states the cause."""
    if values is None:
        return frame.select(*[F.col(n).cast(t).alias(n) for n, t in SCHEMA])
    assert "cause" in values, "a quarantined row states its cause"
    return frame.select(*[values.get(n, F.lit(None)).cast(t).alias(n) for n, t in SCHEMA])


def cause_of(frame: DataFrame) -> SparkColumn:
    """The cause of each quarantined row of frame: its stored one. The compatibility rule for
    rows of earlier versions, which stored none (null, or a table without the column): the
    cause is read from what those versions wrote, and only here. A reason starting "target "
    was a failing target's event (cdc.pipeline.quarantined wrote "target X cannot be applied:
    ..." and "target X is failing since tick ...", and no other reason starts so); ev_type
    'snapshot' a snapshot row; "table not in the configuration" and "table refused by the
    configuration: ..." an event of a table not replicated; any other a bad event."""
    reason = F.col("reason")
    legacy = (
        F.when(reason.startswith("target "), F.lit(FAILING_TARGET))
        .when(F.col("ev_type") == SNAPSHOT, F.lit(SNAPSHOT_ROW))
        .when(
            (reason == "table not in the configuration")
            | reason.startswith("table refused by the configuration: "),
            F.lit(STRAY),
        )
        .otherwise(F.lit(BAD_EVENT))
    )
    stored = F.col("cause") if "cause" in frame.columns else F.lit(None).cast("string")
    return F.coalesce(stored, legacy)


def append(
    spark: SparkSession, ref: TableRef, frame: DataFrame, commit: Commit | None = None
) -> None:
    """Appends conformed rows (creating the table first)."""
    delta_table.ensure(spark, ref, SCHEMA, [])
    delta_table.append(frame, ref, commit)


# ---------------------------------------------------------------- states (pure)


def _rank(state: str) -> int:
    """Within one run, the plan's row comes before the final one."""
    return 0 if state == REPLAYING else 1


def latest(rows: Iterable[dict[str, Any]]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Each identity's current resolution row among rows of the resolutions table."""
    best: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in rows:
        key = tuple(row[n] for n in IDENTITY)
        order = (row["run"] or 0, _rank(row["state"]))
        seen = best.get(key)
        if seen is None or order >= (seen["run"] or 0, _rank(seen["state"])):
            best[key] = row
    return best


def is_open(state: str | None) -> bool:
    return state not in RESOLVED


# ---------------------------------------------------------------- read with delta-rs (no JVM)


def open_counts(quarantine: TableRef, resolved: TableRef) -> dict[str | None, int]:
    """The open quarantined rows per source table (ev_extra1), read with delta-rs (no JVM; a
    path location only, else {}): what ``cdc status`` counts."""
    table = delta_table.LocalTable.open(quarantine)
    if table is None:
        return {}
    marks = delta_table.LocalTable.open(resolved)
    if marks is None:
        rows = table.query("q", "select ev_extra1, count(*) as n from q group by ev_extra1")
        return {row["ev_extra1"]: row["n"] for row in rows}
    done = {
        k for k, r in latest(marks.query("r", "select * from r")).items() if not is_open(r["state"])
    }
    groups = table.query(
        "q",
        "select ev_extra1 as source, ev_id, tick_id, md5(coalesce(ev_data, '')) as data_md5,"
        " count(*) as n from q group by 1, 2, 3, 4",
    )
    counts: dict[str | None, int] = {}
    for g in groups:
        if tuple(g[n] for n in IDENTITY) in done:
            continue
        counts[g["source"]] = counts.get(g["source"], 0) + g["n"]
    return counts


def open_counts_of(pipeline: Pipeline) -> dict[str | None, int]:
    """open_counts of a pipeline's quarantine."""
    return open_counts(
        pipeline.table(pipeline.quarantine),
        pipeline.table(resolved_name(pipeline.quarantine)),
    )


# ---------------------------------------------------------------- read and write with Spark


def _identity(frame: DataFrame) -> DataFrame:
    """The rows with their identity and their cause (cause_of: a row of an earlier version
    gets the one its reason tells)."""
    return (
        frame.withColumn("source", F.col("ev_extra1"))
        .withColumn("data_md5", F.md5(F.coalesce(F.col("ev_data"), F.lit(""))))
        .withColumn("cause", cause_of(frame))
    )


def resolutions(spark: SparkSession, resolved: TableRef) -> DataFrame | None:
    """The current resolution row of each identity (None: no table yet)."""
    if not delta_table.exists(spark, resolved):
        return None
    rows = delta_table.read(spark, resolved)
    rank = F.when(F.col("state") == REPLAYING, 0).otherwise(1)
    order = Window.partitionBy(*IDENTITY).orderBy(F.col("run").desc(), rank.desc())
    return (
        rows.withColumn("__n", F.row_number().over(order))
        .where(F.col("__n") == 1)
        .select(
            *IDENTITY,
            F.col("state"),
            F.col("reason").alias("new_reason"),
            F.col("run"),
            F.col("at").alias("resolved_at"),
        )
    )


def with_state(spark: SparkSession, quarantine: TableRef, resolved: TableRef) -> DataFrame | None:
    """The quarantined rows (their ``cause`` as cause_of reads it) with their identity,
    ``state`` (OPEN when never resolved), ``current_reason`` (a failed replay's new reason,
    else the quarantine's), ``run`` and ``resolved_at`` (None: no quarantine yet)."""
    if not delta_table.exists(spark, quarantine):
        return None
    rows = _identity(delta_table.read(spark, quarantine)).dropDuplicates([*IDENTITY])
    marks = resolutions(spark, resolved)
    if marks is None:
        return rows.select(
            "*",
            F.lit(OPEN).alias("state"),
            F.col("reason").alias("current_reason"),
            F.lit(None).cast("long").alias("run"),
            F.lit(None).cast("timestamp").alias("resolved_at"),
        )
    cond = [rows[n].eqNullSafe(marks[n]) for n in IDENTITY]
    joined = rows.join(marks, on=cond[0] & cond[1] & cond[2] & cond[3], how="left")
    state = F.coalesce(marks["state"], F.lit(OPEN))
    reason = F.when(marks["state"] == FAILED, marks["new_reason"]).otherwise(rows["reason"])
    return joined.select(
        *[rows[n] for n, _ in SCHEMA],
        rows["source"],
        rows["data_md5"],
        state.alias("state"),
        reason.alias("current_reason"),
        marks["run"],
        marks["resolved_at"],
    )


def open_rows(frame: DataFrame) -> DataFrame:
    """The rows of with_state that are open."""
    return frame.where(~F.col("state").isin(*sorted(RESOLVED)))


def next_run(spark: SparkSession, resolved: TableRef) -> int:
    """The number of a new replay or discard run: one more than any so far."""
    if not delta_table.exists(spark, resolved):
        return 1
    top = delta_table.read(spark, resolved).agg(F.max("run")).first()[0]
    return int(top or 0) + 1


def record(
    spark: SparkSession,
    resolved: TableRef,
    rows: DataFrame,
    commit: Commit | None = None,
) -> None:
    """Appends resolution rows (columns source, ev_id, tick_id, data_md5, state, reason,
    run; ``at`` is now), creating the table first; with commit, once per (appId, run)."""
    delta_table.ensure(spark, resolved, RESOLVED_SCHEMA, [])
    frame = rows.select(
        *[F.col(quote(n)).cast(t).alias(n) for n, t in RESOLVED_SCHEMA if n != "at"],
        F.current_timestamp().alias("at"),
    )
    delta_table.append(frame, resolved, commit)
