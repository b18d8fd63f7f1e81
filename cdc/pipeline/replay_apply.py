"""A replay's apply and finish (steps 2 and 3 of cdc.pipeline.replay): the planned events go
through the drain's own path, target by target (cdc.pipeline.parts: the target follows the
source's schema, then the events are decoded, folded and written), under the replay's own
commit identity; then each planned event is marked replayed, or failed with its new reason.

The planned events are one table's part whose frame is not held on the driver (no Arrow
rows), so the route planner gives it to Spark, which keeps the bad events with their
reasons; every format is decoded (the events' own are not known here).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import psycopg
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc import failures
from cdc.config import Pipeline, TableMap
from cdc.engines.spark import decode as spark_decode
from cdc.pipeline.parts import Outcome, PartRunner, TablePart
from cdc.pipeline.reader import BatchEvents
from cdc.pipeline.replay_plan import columns_of, plan_app
from cdc.targets import quarantine
from cdc.targets.table import Commit, app_id

__all__ = ["REPLAY_SUFFIX", "Applied", "ReplayApplier", "replay_commit"]

log = logging.getLogger("cdc.replay")

REPLAY_SUFFIX = "#replay"


def replay_commit(pipeline: Pipeline, incarnation: int | None, target: str, run: int) -> Commit:
    """The idempotent-write identity of a replay run's write to a target: a run killed after
    some commits and done again skips those targets."""
    return Commit(app_id(pipeline.source, incarnation, target) + REPLAY_SUFFIX, run)


@dataclass
class Applied:
    """What a run's apply did: the events applied, and those that failed, with why."""

    events: int = 0  # the planned events
    failed: dict[tuple[int, int], str] = field(default_factory=dict)  # (ev_id, tick) -> why

    @property
    def replayed(self) -> int:
        return self.events - len(self.failed)


def quarantined_part(source: str, events: DataFrame, count: int) -> BatchEvents:
    """Quarantined events as one table's part of a batch: a frame, no Arrow rows, every
    format (cdc.engines.spark.decode.FORMATS)."""
    return BatchEvents(
        counts={source: count},
        tables={source: events},
        strays=None,
        formats={source: set(spark_decode.FORMATS)},
    )


class ReplayApplier:
    """Applies a run's planned events and records the end (see the module)."""

    def __init__(
        self, pipeline: Pipeline, spark: SparkSession, stage: Callable[[str], None]
    ) -> None:
        self.pipeline = pipeline
        self.spark = spark
        self.stage = stage  # called after each target ("applied:<target>") and at the end
        self.rref = pipeline.table(quarantine.resolved_name(pipeline.quarantine))
        self.parts = PartRunner.of(spark, pipeline.drain.engine)

    def apply(
        self,
        conn: psycopg.Connection,
        planned: DataFrame,
        maps: list[TableMap],
        incarnation: int | None,
        run: int,
    ) -> Applied:
        """Applies the planned events to every target of the table, then records the end."""
        # computed once, before the end is written to the table it was read from
        events = planned.select(
            *[F.col(n) for n, _ in quarantine.SCHEMA], "data_md5"
        ).localCheckpoint()
        done = Applied(events.count())
        for m in maps:
            if done.events:
                self._apply_target(conn, events, m, incarnation, run, done)
            self.stage(f"applied:{m.target}")
        self.stage("applied")
        bad = self.spark.createDataFrame(
            [(e, t, why) for (e, t), why in done.failed.items()],
            "ev_id long, tick_id long, __why string",
        )
        final = events.join(bad, on=["ev_id", "tick_id"], how="left").select(
            F.col("ev_extra1").alias("source"),
            "ev_id",
            "tick_id",
            "data_md5",
            F.when(F.col("__why").isNotNull(), F.lit(quarantine.FAILED))
            .otherwise(F.lit(quarantine.REPLAYED))
            .alias("state"),
            F.col("__why").alias("reason"),
            F.lit(run).cast("long").alias("run"),
        )
        if done.events:
            commit = Commit(plan_app(self.pipeline, incarnation) + "#final", run)
            quarantine.record(self.spark, self.rref, final, commit)
        return done

    def _apply_target(
        self,
        conn: psycopg.Connection,
        events: DataFrame,
        m: TableMap,
        incarnation: int | None,
        run: int,
        done: Applied,
    ) -> None:
        """One target's share, as the drain applies a table's part: an event that failed for
        a target before is not applied to this one; events that do not decode or fit go to
        done.failed with their reason, and all of them when the table cannot be applied."""
        failed = done.failed
        if failed:
            skip = self.spark.createDataFrame(list(failed), "ev_id long, tick_id long")
            events = events.join(skip, on=["ev_id", "tick_id"], how="left_anti")
        out = Outcome()
        try:
            columns, fill = columns_of(conn, self.pipeline, m)
            part = TablePart(
                m,
                quarantined_part(m.source, events, done.events - len(failed)),
                (m.schema, m.name),
                columns,
                fill,
                self.pipeline.table(m.target),
                replay_commit(self.pipeline, incarnation, m.target, run),
                out,
            )
            self.parts.run(part, self.spark)
        except Exception as exc:
            failure = failures.classify(exc, self.pipeline.target_path)
            if failure.kind != failures.TABLE:
                raise
            _keep_bad(out, failed)  # known before the write: their own reasons first
            for row in events.select("ev_id", "tick_id").collect():
                failed.setdefault((row[0], row[1]), failure.message)
        else:
            _keep_bad(out, failed)
        finally:
            if out.decoded is not None:
                out.decoded.release()


def _keep_bad(out: Outcome, failed: dict[tuple[int, int], str]) -> None:
    """The part's bad events into failed, with their reasons."""
    if out.bad is not None:
        for row in out.bad.select("ev_id", "tick_id", "reason").collect():
            failed.setdefault((row[0], row[1]), row[2])
