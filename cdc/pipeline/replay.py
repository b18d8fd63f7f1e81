"""``cdc quarantine replay | discard``: quarantined events of a table applied once the cause is
fixed, or acknowledged (cdc.targets.quarantine keeps what became of each).

**Replay** of source table X, under the consumer's drain lock (no batch meanwhile), in a
numbered run n:

1. *Plan.* X's open events (not snapshot rows) are classified, and the plan is appended to
   the resolutions table in one commit (marked with the run: done once):

   - an event quarantined because a target of X was failing (its reason names the target)
     is **superseded**: a target is only recovered by ``cdc resync``, whose snapshot, taken
     after every such event, shows it (a replay refuses to run while a target of X is still
     failing);
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

2. *Apply.* The planned events, in ev_id order, go through the drain's path: the target
   follows the source's schema (cdc.targets.schema_drift), the events are decoded
   (cdc.engines.spark.decode), folded per key and MERGEd (mirror) or appended (history), in one
   commit per target marked with the idempotent-write identity ``<drain appId>#replay`` /
   run n: a replay killed after some commits and run again skips those targets.
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
"""

from __future__ import annotations

import bisect
import datetime as dt
import logging
import os
import signal
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import partial, reduce
from operator import and_

import psycopg
from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, DoubleType, FloatType, StructType

from cdc import failures, formats
from cdc.config import Pipeline, TableMap
from cdc.engines.spark import decode as spark_decode
from cdc.engines.spark import fold as spark_fold
from cdc.engines.spark.decode import cast_text
from cdc.errors import CdcError
from cdc.pg import pgtypes
from cdc.pg import source as source_module
from cdc.rows import TableBatch, is_numeric_text, meta
from cdc.targets import delta_table, failing, quarantine, registry, schema_drift
from cdc.targets.table import Commit, TableRef, app_id, legacy_app_id, quote

log = logging.getLogger("cdc.replay")

# The stage at which a replay kills itself (SIGKILL), for the crash tests: "planned",
# "applied:<target>" (after that target's commit), "applied" (every target committed).
KILL_AT_ENV = "CDC_REPLAY_KILL_AT"
REPLAY_SUFFIX = "#replay"


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


def is_failing_reason(reason: str | None) -> bool:
    """Whether a quarantine reason says the event was sent there because its target was
    failing (cdc.pipeline.apply writes "target <name> cannot be applied: ..." or "target
    <name> is failing since tick ..."); decode and drift reasons never start so."""
    return reason is not None and reason.startswith("target ")


def replay_commit(pipeline: Pipeline, incarnation: int | None, target: str, run: int) -> Commit:
    """The idempotent-write identity of a replay run's write to a target."""
    return Commit(app_id(pipeline.source, incarnation, target) + REPLAY_SUFFIX, run)


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
                counts = dict(planned_before.collect())
                result.superseded = counts.get(quarantine.SUPERSEDED, 0)
                result.failed = counts.get(quarantine.FAILED, 0)
            else:
                run = self._plan(conn, mine, maps, incarnation, result)
                if run is None:
                    return result
                _stage("planned")
                rows = quarantine.with_state(self.spark, self.qref, self.rref)
                assert rows is not None
                mine = rows.where(F.col("source") == source)
            result.run = run
            planned = mine.where((F.col("state") == quarantine.REPLAYING) & (F.col("run") == run))
            self._apply(conn, planned, maps, incarnation, run, result)
        return result

    def _interrupted(self, mine: DataFrame) -> int | None:
        """The run of an interrupted replay of this table (its plan rows are still the
        current state of some events), or None."""
        top = mine.where(F.col("state") == quarantine.REPLAYING).agg(F.max("run")).first()[0]
        return None if top is None else int(top)

    def _columns(
        self, conn: psycopg.Connection, m: TableMap
    ) -> tuple[list[pgtypes.Column], schema_drift.Fill]:
        queue = self.pipeline.source.capture_queue
        return (
            pgtypes.keyed_columns(conn, m.schema, m.name, queue),
            schema_drift.fill_of(conn, m.schema, m.name),
        )

    def _plan(
        self,
        conn: psycopg.Connection,
        mine: DataFrame,
        maps: list[TableMap],
        incarnation: int | None,
        result: ReplayResult,
    ) -> int | None:
        """Classifies the open events and records the plan; the run, or None (none open)."""
        events = quarantine.open_rows(mine).where(
            F.col("ev_id").isNotNull() & (F.col("ev_type") != quarantine.SNAPSHOT)
        )
        if not events.limit(1).count():
            return None
        run = quarantine.next_run(self.spark, self.rref)
        typed = spark_decode.with_op_and_map(events).cache()
        by_failing = F.col("reason").startswith("target ")  # is_failing_reason
        truncate = F.col("op").isin(*formats.RESET_OPS)  # a TRUNCATE, a table re-created
        superseded: DataFrame | None = None
        for m in maps:
            if not registry.holds_rows(m.mode):
                continue
            found = self._superseded(conn, typed.where(~by_failing & ~truncate), m, incarnation)
            if found is not None:
                superseded = found if superseded is None else superseded.unionByName(found)
        ident = ["ev_id", "tick_id"]
        plan = typed.select(*quarantine.IDENTITY, "op", "reason")
        if superseded is not None:
            hit = superseded.distinct().withColumn("__later", F.lit(True))
            plan = plan.join(hit, on=ident, how="left")
        else:
            plan = plan.withColumn("__later", F.lit(None).cast("boolean"))
        state = (
            F.when(F.col("reason").startswith("target "), F.lit(quarantine.SUPERSEDED))
            .when(truncate, F.lit(quarantine.FAILED))
            .when(F.col("__later"), F.lit(quarantine.SUPERSEDED))
            .otherwise(F.lit(quarantine.REPLAYING))
        )
        why = (
            F.when(
                F.col("reason").startswith("target "),
                F.lit("superseded by the resync of its failing target"),
            )
            .when(
                truncate,
                F.lit(
                    "a TRUNCATE or a re-created table's marker is not replayed (it would empty"
                    " the target of later changes):"
                    f" `cdc resync {result.source}` rebuilds the table"
                ),
            )
            .when(F.col("__later"), F.lit("superseded by a later change of its key in the target"))
        )
        # computed once, before the plan is written to the table it was read from
        rows = plan.select(
            *quarantine.IDENTITY,
            state.alias("state"),
            why.alias("reason"),
            F.lit(run).cast("long").alias("run"),
        ).localCheckpoint()
        typed.unpersist()
        counts = dict(rows.groupBy("state").count().collect())
        quarantine.record(self.spark, self.rref, rows, Commit(self._plan_app(incarnation), run))
        result.superseded = counts.get(quarantine.SUPERSEDED, 0)
        result.failed = counts.get(quarantine.FAILED, 0)
        if result.failed:
            result.reasons["a TRUNCATE or a re-created table's marker is not replayed"] = (
                result.failed
            )
        log.info(
            "%s: replay run %d planned: %d to apply, %d superseded, %d TRUNCATE or marker kept",
            result.source, run, counts.get(quarantine.REPLAYING, 0), result.superseded,
            result.failed,
        )  # fmt: skip
        return run

    def _plan_app(self, incarnation: int | None) -> str:
        return app_id(self.pipeline.source, incarnation, self.rref.location) + "#plan"

    def _superseded(
        self, conn: psycopg.Connection, typed: DataFrame, m: TableMap, incarnation: int | None
    ) -> DataFrame | None:
        """(ev_id, tick_id) of the events whose key's row in mirror target m changed after
        their batch (see the module), or None when there can be none.

        The target's log is read once for its drain commits; an event whose batch started
        from the current version is never superseded and is not compared. For the others,
        each distinct version their batches started from is read once (time travel), and so
        is the current one, each only for the events' keys, all in the one Spark job that
        computes the result."""
        ref = self.pipeline.table(m.target)
        if not delta_table.exists(self.spark, ref):
            return None
        now = delta_table.version(self.spark, ref)
        wanted = [int(r[0]) for r in typed.select("tick_id").distinct().collect()]
        before = versions_before(self._drain_ticks(ref, m.target, incarnation), wanted, now)
        older = {t: v for t, v in before.items() if v != now}
        if not older:
            return None
        columns, _ = self._columns(conn, m)
        keys = [(i, c) for i, c in enumerate(columns) if c.is_key]
        key_names = [f"__k{i}" for i, _ in keys]
        kv = F.col("kv")
        mapping = self.spark.createDataFrame(sorted(older.items()), "tick_id long, __v long")
        events = typed.join(F.broadcast(mapping), on="tick_id").select(
            "ev_id",
            "tick_id",
            "__v",
            *[_key_expr(cast_text(kv.getItem(c.name), c.spark_type), c).alias(f"__k{i}")
              for i, c in keys],
        )  # fmt: skip
        wanted_keys = events.select(*key_names).distinct()
        current = delta_table.read(self.spark, ref, now).schema

        def rows_at(version: int, name: str) -> DataFrame:
            """The events' keys' rows of a version, as (keys, the row in the current schema)."""
            frame = delta_table.read(self.spark, ref, version)
            row = aligned(frame, current)
            return frame.select(
                *[_key_expr(F.col(quote(c.name)), c).alias(f"__k{i}") for i, c in keys],
                row.alias(name),
            ).join(wanted_keys, on=key_names, how="left_semi")

        # a version before the target's creation (-1) holds no row: the join finds none
        states = [
            rows_at(v, "__then").withColumn("__v", F.lit(v).cast("long"))
            for v in sorted(set(older.values()))
            if v >= 0
        ]
        joined = events
        if states:
            joined = joined.join(
                reduce(DataFrame.unionByName, states), on=[*key_names, "__v"], how="left"
            )
        else:
            joined = joined.withColumn("__then", F.lit(None).cast(current))
        joined = joined.join(rows_at(now, "__now"), on=key_names, how="left")
        changed = ~same_row(F.col("__then"), F.col("__now"), current)
        return joined.where(changed).select("ev_id", "tick_id")

    def _drain_ticks(
        self, ref: TableRef, target: str, incarnation: int | None
    ) -> list[tuple[int, int]]:
        """(version, tick) of the target's commits by the drain, from its log's txn actions."""
        src = self.pipeline.source
        apps = {app_id(src, incarnation, target), legacy_app_id(src, target)}
        return delta_table.app_commits(self.spark, ref, apps)

    def _apply(
        self,
        conn: psycopg.Connection,
        planned: DataFrame,
        maps: list[TableMap],
        incarnation: int | None,
        run: int,
        result: ReplayResult,
    ) -> None:
        """Applies the planned events to every target of the table, then records the end."""
        # computed once, before the end is written to the table it was read from
        events = planned.select(
            *[F.col(n) for n, _ in quarantine.SCHEMA], "data_md5"
        ).localCheckpoint()
        count = events.count()
        failed: dict[tuple[int, int], str] = {}
        for m in maps:
            if count:
                self._apply_target(conn, events, m, incarnation, run, failed)
            _stage(f"applied:{m.target}")
        _stage("applied")
        bad = self.spark.createDataFrame(
            [(e, t, why) for (e, t), why in failed.items()],
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
        if count:
            commit = Commit(self._plan_app(incarnation) + "#final", run)
            quarantine.record(self.spark, self.rref, final, commit)
        result.replayed += count - len(failed)
        result.failed += len(failed)
        for why in failed.values():
            result.reasons[why] = result.reasons.get(why, 0) + 1

    def _apply_target(
        self,
        conn: psycopg.Connection,
        events: DataFrame,
        m: TableMap,
        incarnation: int | None,
        run: int,
        failed: dict[tuple[int, int], str],
    ) -> None:
        """One target's share: decoded, folded and written as the drain does; events that do
        not decode or fit go to failed, with the reason."""
        ref = self.pipeline.table(m.target)
        kind = registry.kind(m.mode)
        try:
            columns, fill = self._columns(conn, m)
            drift = schema_drift.reconcile(
                self.spark, None, ref, (m.schema, m.name), columns, kind, fill
            )
            decoded = spark_decode.decode_table(events, drift.columns, spark_decode.FORMATS, drift)
        except Exception as exc:
            self._table_failure(exc, events, failed)
            return
        try:
            facts = decoded.facts(drift.columns)
            for row in decoded.bad.select("ev_id", "tick_id", "reason").collect():
                failed.setdefault((row[0], row[1]), row[2])
            rows = decoded.rows
            if failed:
                # an event failing for one target is not applied to the targets after it
                skip = self.spark.createDataFrame(list(failed), "e long, t long")
                rows = rows.join(
                    skip,
                    (rows[meta("ev_id")] == skip["e"])
                    & (rows[meta("tick_id")] == skip["t"]),
                    "left_anti",
                )
            batch = TableBatch(rows, drift.columns, None, facts.key_range)
            commit = replay_commit(self.pipeline, incarnation, m.target, run)
            write = partial(kind.apply, self.spark, ref, commit, batch)
            delta_table.retry_conflicts(write, f"replay into {m.target}")
        except Exception as exc:
            self._table_failure(exc, events, failed)
        finally:
            decoded.release()

    def _table_failure(
        self, exc: Exception, events: DataFrame, failed: dict[tuple[int, int], str]
    ) -> None:
        failure = failures.classify(exc, self.pipeline.target_path)
        if failure.kind != failures.TABLE:
            raise exc
        for row in events.select("ev_id", "tick_id").collect():
            failed.setdefault((row[0], row[1]), failure.message)

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


def aligned(frame: DataFrame, current: StructType) -> SparkColumn:
    """A row of frame (a version of the target) as a struct of the current schema's columns:
    each cast to its current type (the drift only widens a type, which no value changes), a
    column the version lacks null."""
    have = {f.name for f in frame.schema.fields}
    return F.struct(
        *[
            (F.col(quote(f.name)) if f.name in have else F.lit(None)).cast(f.dataType).alias(f.name)
            for f in current.fields
        ]
    )


def _holds_floats(kind: DataType) -> bool:
    if isinstance(kind, ArrayType):
        return _holds_floats(kind.elementType)
    if isinstance(kind, StructType):
        return any(_holds_floats(f.dataType) for f in kind.fields)
    return isinstance(kind, (FloatType, DoubleType))


def same_row(a: SparkColumn, b: SparkColumn, schema: StructType) -> SparkColumn:
    """Whether two rows (structs of schema, ``aligned``; null: no row) hold the same values,
    typed: a decimal by value (1.50 equals 1.5000), a float exactly (by its shortest text:
    NaN equals NaN, -0.0 differs from 0.0, 0.1 from 0.1000000000000001), every other value
    as Spark compares it (null equals null)."""
    same = [
        (a[f.name].cast("string").eqNullSafe(b[f.name].cast("string")))
        if _holds_floats(f.dataType)
        else a[f.name].eqNullSafe(b[f.name])
        for f in schema.fields
    ]
    both = a.isNotNull() & b.isNotNull() & reduce(and_, same, F.lit(True))
    return (a.isNull() & b.isNull()) | both


def _key_expr(col: SparkColumn, column: pgtypes.Column) -> SparkColumn:
    """A key value as keys match (numeric text without trailing zeros, cdc.engines.spark.fold)."""
    return spark_fold.norm_numeric(col) if is_numeric_text(column) else col


def versions_before(
    ticks: list[tuple[int, int]], wanted: Iterable[int], now: int
) -> dict[int, int]:
    """For each wanted tick, the target's version before its first drain commit of a tick at
    or after that one (the latest version when there is none): the state the event's batch
    started from. ticks: (version, tick) of the drain's commits."""
    by_tick = sorted((t, v) for v, t in ticks)
    firsts = [now + 1] * (len(by_tick) + 1)  # firsts[i]: the lowest version of by_tick[i:]
    for i in range(len(by_tick) - 1, -1, -1):
        firsts[i] = min(by_tick[i][1], firsts[i + 1])
    order = [t for t, _ in by_tick]
    return {tick: firsts[bisect.bisect_left(order, tick)] - 1 for tick in wanted}
