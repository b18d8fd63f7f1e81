"""``cdc quarantine replay | discard``: quarantined events of a table applied once the cause is
fixed, or acknowledged (cdc.targets.quarantine keeps what became of each).

**Replay** of source table X, under the consumer's drain lock (no batch meanwhile), in a
numbered run n:

1. *Plan.* X's open events (not snapshot rows) are classified, and the plan is appended to
   the resolutions table in one commit (marked with the run: done once):

   - an event quarantined because a target of X was failing (its cause says so:
     cdc.targets.quarantine.cause_of) is **superseded**: a target is only recovered by ``cdc
     resync``, whose snapshot, taken after every such event, shows it (a replay refuses to
     run while a target of X is still failing);
   - a TRUNCATE stays quarantined (``failed``): replaying it would empty the target of every
     later change; ``cdc resync`` rebuilds the table instead;
   - any other event of key K is **superseded** when K's row in a mirror target changed
     after the event's batch: K's row before the first drain commit of a tick at or after
     the event's (Delta time travel; the ticks are the drain's txnVersions in the target's
     log) differs from K's row now (present / absent, or any column's value: ``same_row``,
     typed, so a column widened since, numeric(10,2) to numeric(12,4), holds the same 1.50
     in both). A later change of K reached the target; applying the older event over it
     would undo it (the fold's order: the last change of a key wins). The target's log is
     read once; each distinct version the events' batches started from is read once (not
     once per key or event), only for the events' keys, and joined with the current rows in
     one Spark job; an event whose batch started from the current version is not compared
     (nothing came after it);
   - the others are planned (``replaying``).

2. *Apply.* The planned events, in ev_id order, go through the drain's own path, as one
   table's part (cdc.pipeline.parts): the target follows the source's schema
   (cdc.targets.schema_drift), the events are decoded (by Spark: they are not held on the
   driver), folded per key and MERGEd (mirror) or appended (history), in one commit per
   target marked with the idempotent-write identity ``<drain appId>#replay`` / run n: a
   replay killed after some commits and run again skips those targets. An event that failed
   for one target is not applied to the targets after it.
3. *Finish.* Each planned event is marked ``replayed``, or ``failed`` with the new reason
   when it still does not decode or fit (it stays quarantined), in one commit marked with
   the run.

A replay killed between 1 and 3 left ``replaying`` rows: the next replay of X finishes that
run first (the same events, the same run number, so the commits done are skipped), then
plans a new one for what remains open. So every event is applied at most once, and none is
lost.

Not detected (documented in docs/operations.md): a later change that left K's row exactly
as it was before the event's batch (changed and changed back, inserted and deleted again);
such an event is replayed over it.

**Discard** marks open rows ``discarded`` (kept, not counted), by table, reason and time.

The plan is cdc.pipeline.replay_plan, the apply and finish cdc.pipeline.replay_apply.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import signal
from dataclasses import dataclass, field

import psycopg
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc.config import Pipeline
from cdc.errors import CdcError
from cdc.pg import source as source_module
from cdc.pipeline.replay_apply import ReplayApplier
from cdc.pipeline.replay_plan import RESET_KEPT, Planner
from cdc.targets import failing, masking, quarantine

__all__ = ["KILL_AT_ENV", "ReplayResult", "Replayer", "filtered"]

log = logging.getLogger("cdc.replay")

# The stage at which a replay kills itself (SIGKILL), for the crash tests: "planned",
# "applied:<target>" (after that target's commit), "applied" (every target committed).
KILL_AT_ENV = "CDC_REPLAY_KILL_AT"


@dataclass
class ReplayResult:
    source: str
    run: int | None = None  # None: nothing was open
    resumed: bool = False  # the run finished an interrupted one
    replayed: int = 0
    superseded: int = 0
    failed: int = 0
    targets: list[str] = field(default_factory=list)
    reasons: dict[str, int] = field(default_factory=dict)  # failed: new reason -> count


def _stage(name: str) -> None:
    if os.environ.get(KILL_AT_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


class Replayer:
    """Replays and discards a pipeline's quarantined events (see the module)."""

    def __init__(self, pipeline: Pipeline, spark: SparkSession) -> None:
        self.pipeline = pipeline
        self.spark = spark
        self.qref = pipeline.table(pipeline.quarantine)
        self.rref = pipeline.table(quarantine.resolved_name(pipeline.quarantine))

    # ------------------------------------------------------------------ replay

    def replay(self, table: str) -> ReplayResult:
        pipe = self.pipeline
        masking.require_salt_of(pipe)  # before anything is written
        source = pipe.source_name(table)
        maps = [t for t in pipe.tables if t.source == source]
        if not maps:
            raise CdcError(
                f"table {table} is not in the configuration: add it under [[tables]] first,"
                " then replay its quarantined events"
            )
        result = ReplayResult(source, targets=[m.target for m in maps])
        src = pipe.source
        with (
            psycopg.connect(src.dsn, autocommit=True) as conn,
            source_module.drain_lock(conn, src, "replay"),
        ):
            marks = failing.read(self.spark, pipe.table(pipe.failing_table))
            still = [m.target for m in maps if m.target in marks]
            if still:
                raise CdcError(
                    f"target(s) {', '.join(still)} of {source} are failing: `cdc resync"
                    f" {source}` recovers them (its snapshot supersedes their quarantined"
                    " events), then replay"
                )
            incarnation = source_module.incarnation(conn, src)
            rows = quarantine.with_state(self.spark, self.qref, self.rref)
            if rows is None:
                return result
            mine = rows.where(F.col("source") == source)
            run = self._interrupted(mine)
            if run is not None:
                result.resumed = True
                log.info("%s: finishing replay run %d, which was interrupted", source, run)
                planned_before = mine.where(F.col("run") == run).groupBy("state").count()
                self._count_plan(dict(planned_before.collect()), result)
            else:
                plan = Planner(pipe, self.spark).plan(conn, mine, maps, incarnation, source)
                if plan is None:
                    return result
                run = plan.run
                self._count_plan(plan.counts, result)
                if result.failed:
                    result.reasons[RESET_KEPT] = result.failed
                _stage("planned")
                rows = quarantine.with_state(self.spark, self.qref, self.rref)
                assert rows is not None
                mine = rows.where(F.col("source") == source)
            result.run = run
            planned = mine.where((F.col("state") == quarantine.REPLAYING) & (F.col("run") == run))
            done = ReplayApplier(pipe, self.spark, _stage).apply(
                conn, planned, maps, incarnation, run
            )
        result.replayed += done.replayed
        result.failed += len(done.failed)
        for why in done.failed.values():
            result.reasons[why] = result.reasons.get(why, 0) + 1
        return result

    @staticmethod
    def _count_plan(counts: dict[str, int], result: ReplayResult) -> None:
        """The plan's superseded and kept (failed) events, into the result."""
        result.superseded = counts.get(quarantine.SUPERSEDED, 0)
        result.failed = counts.get(quarantine.FAILED, 0)

    def _interrupted(self, mine: DataFrame) -> int | None:
        """The run of an interrupted replay of this table (its plan rows are still the
        current state of some events), or None."""
        top = mine.where(F.col("state") == quarantine.REPLAYING).agg(F.max("run")).first()[0]
        return None if top is None else int(top)

    # ------------------------------------------------------------------ discard

    def discard(
        self,
        table: str | None,
        reason: str | None,
        before: dt.datetime | None,
        dry_run: bool = False,
    ) -> dict[str, int]:
        """Marks the open rows that match (table, a reason containing the text, quarantined
        before a time) discarded; returns their count per table."""
        rows = quarantine.with_state(self.spark, self.qref, self.rref)
        if rows is None:
            return {}
        chosen = filtered(quarantine.open_rows(rows), self.pipeline, table, reason, before)
        chosen = chosen.localCheckpoint()  # before the marks go to the table it reads
        counts = {r[0]: r[1] for r in chosen.groupBy("source").count().collect()}
        if dry_run or not counts:
            return counts
        run = quarantine.next_run(self.spark, self.rref)
        marks = chosen.select(
            *quarantine.IDENTITY,
            F.lit(quarantine.DISCARDED).alias("state"),
            F.lit("discarded by cdc quarantine discard").alias("reason"),
            F.lit(run).cast("long").alias("run"),
        )
        quarantine.record(self.spark, self.rref, marks)
        return counts


def filtered(
    rows: DataFrame,
    pipeline: Pipeline,
    table: str | None,
    reason: str | None,
    before: dt.datetime | None,
) -> DataFrame:
    """The rows of one table (as configured or named), whose current reason contains the
    text, quarantined (ev_time) before a time."""
    if table is not None:
        rows = rows.where(F.col("source") == pipeline.source_name(table))
    if reason is not None:
        rows = rows.where(F.col("current_reason").contains(reason))
    if before is not None:
        rows = rows.where(F.col("ev_time") < F.lit(before))
    return rows
