"""One table's part of a batch: its target made to follow the source's schema, then planned
(cdc.engines.planner), decoded and written by the engines the plan names, its route recorded.

``PartRunner.run`` first brings the target in line with the source's columns
(cdc.targets.schema_drift.reconcile: the drift says how the events are written, the
target's exclusions and masks included, cdc.targets.masking); then the
planner's first step picks the decoding engine; the Arrow engine decodes on the driver
(cdc.engines.arrow.decode) and the kind writes the rows on the Arrow engine (its ``write``,
cdc.engines.engine) unless the engine declines; otherwise Spark decodes
(cdc.engines.spark.decode, bad events kept for the quarantine), the planner's second step
names the writing engine (a small part's folded rows collected for delta-rs,
cdc.engines.collected, or Spark), and the kind writes on it. Both the drain
(cdc.pipeline.apply) and the quarantine's replay (cdc.pipeline.replay_apply) run parts this
way: a replay's part is its quarantined events as one table's frame, with no Arrow rows, so
the planner gives it to Spark.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from functools import partial

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc.config import TableMap
from cdc.engines import planner
from cdc.engines.arrow import decode as arrow_decode
from cdc.engines.arrow.engine import ArrowEngine
from cdc.engines.collected import Collected
from cdc.engines.engine import Declined, Engine
from cdc.engines.shipped import Shipped
from cdc.engines.spark import decode as spark_decode
from cdc.engines.spark.engine import SparkEngine
from cdc.pg import pgtypes
from cdc.pipeline.pool import in_session
from cdc.pipeline.reader import BatchEvents
from cdc.rows import TableBatch, add_time
from cdc.spark import is_local
from cdc.targets import delta_table, masking, quarantine, schema_drift
from cdc.targets.kind import TargetKind
from cdc.targets.table import Commit, TableRef

__all__ = ["MATERIALIZE_SOURCE", "Outcome", "PartRunner", "TablePart"]

# Where Spark writes a small part (cdc.engines.planner.SMALL_EVENTS), it takes the small-part
# path: decoded without a cache, and MERGEd without Delta's copy of the source
# (merge.materializeSource = none). Delta copies a source it cannot prove deterministic;
# ours is (the fold of the batch's events decoded from the batch's Arrow rows: every read
# gives the same rows, and Delta checks that its two reads counted the same), so the MERGE
# writes the same values in the same commit as the large-part path, with a cache, a copy and
# their Spark jobs fewer. Above it (or read by JDBC: a cached frame, which Delta refuses not
# to copy) the decode cache and the copy are kept: they spare decoding and folding twice.
MATERIALIZE_SOURCE = "spark.databricks.delta.merge.materializeSource"


@dataclass
class Outcome:
    """What one table's task did."""

    decoded: spark_decode.Decoded | None = None
    # its bad events (in the task's session, cause BAD_EVENT), when any: known before the
    # write, so kept when the write fails too
    bad: DataFrame | None = None
    failure: str | None = None  # why it cannot be applied (it becomes failing)
    timings: dict[str, float] = field(default_factory=dict)
    seconds: float | None = None
    route: planner.Route | None = None  # the engines that decoded and wrote it, and why


@dataclass(frozen=True)
class TablePart:
    """One table's part of a batch, with the source's schema now."""

    table: TableMap
    events: BatchEvents
    source: tuple[str, str]  # the source table in the catalog (a renamed table's new name)
    columns: list[pgtypes.Column]  # the source's (pgtypes.keyed_columns)
    fill: schema_drift.Fill  # the source's (schema_drift.fill_of)
    ref: TableRef
    commit: Commit
    out: Outcome


@dataclass(frozen=True)
class PartRunner:
    """Runs table parts with the drain's settings (see the module docstring)."""

    local_master: bool  # Spark's master is local
    materialize: str  # the drain's own merge.materializeSource ("auto" unless submitted)
    engine: str | None  # drain.engine: None lets the planner choose

    @classmethod
    def of(cls, spark: SparkSession, engine: str | None) -> PartRunner:
        """A runner with the session's settings: its master, its own merge.materializeSource
        (spark-submit --conf: kept for large parts), and drain.engine (None: the planner's
        choice, else the one engine forced)."""
        materialize = spark.conf.get(MATERIALIZE_SOURCE, "auto") or "auto"
        return cls(local_master=is_local(spark), materialize=materialize, engine=engine)

    def run(self, part: TablePart, spark: SparkSession) -> None:
        """Brings the target in line with the source's schema, then decodes and writes the
        part by the planned engines; part.out gets the route. Raises what the drain
        classifies (cdc.failures): a table that cannot be applied, or the infrastructure."""
        kind = part.table.kind
        masks = masking.resolve(
            kind.options, part.columns, ".".join(part.source), listed=not part.table.rule
        )
        drift = schema_drift.reconcile(
            spark, None, part.ref, part.source, part.columns, kind, part.fill, masks
        )
        route = planner.decode_route(self.facts(part, kind))
        if route.decode == planner.ARROW:
            route = self.on_driver(part, kind, drift, route, spark)
        if route.decode == planner.SPARK:
            self.in_spark(part, kind, drift, route, spark)

    def facts(self, part: TablePart, kind: TargetKind) -> planner.PartFacts:
        """What the planner is told of a part before it is decoded."""
        source = part.table.source
        layout = kind.layout(part.ref, part.columns)
        return planner.PartFacts(
            events=part.events.counts.get(source, 0),
            held_on_driver=part.events.on_driver and source in part.events.arrow,
            local_master=self.local_master,
            kind_writes_arrow=kind.writes_on_driver,
            default_merge_source=self.materialize == "auto",
            forced=self.engine,
            change_data_feed=layout.change_data_feed,
            clustered=layout.clustered,
            zoneless_partitions=layout.zoneless_partitions,
        )

    def on_driver(
        self,
        part: TablePart,
        kind: TargetKind,
        drift: schema_drift.Drift,
        route: planner.Route,
        spark: SparkSession,
    ) -> planner.Route:
        """The part decoded by the Arrow engine (cdc.engines.arrow.decode) and written as
        the route says: by the Arrow engine, or folded on the driver and written by Spark
        (cdc.engines.shipped); the route it took: Spark decodes and writes it when the
        target is not one delta-rs writes as Spark would (for the Arrow engine's write),
        when the Arrow decoder is undecided, or when the engine declines the write."""
        engine: Engine
        if route.write == planner.SPARK:
            engine = Shipped(spark, part.ref)
        else:
            engine = ArrowEngine(part.ref)
            refused = engine.refuses(kind.columns(drift.columns), drift.columns)
            if refused is not None:
                return route.decoded_by(planner.SPARK, refused)
        raw = part.events.arrow[part.table.source]
        started = time.monotonic()
        # the commit's version is the batch's tick (cdc.targets.table.Commit)
        rows = arrow_decode.decode(raw, drift.columns, drift, part.commit.version)
        add_time(part.out.timings, "decode", started)
        if rows is None:
            return route.decoded_by(planner.SPARK, "the Arrow decoder was undecided")
        if route.write == planner.SPARK:  # a fixed Arrow table: no copy of the MERGE source
            spark.conf.set(MATERIALIZE_SOURCE, "none")
        declined = self.write(part, kind, engine, TableBatch(rows, drift.columns), route)
        if declined is not None:
            return route.decoded_by(planner.SPARK, declined)
        part.out.route = route
        return route

    def in_spark(
        self,
        part: TablePart,
        kind: TargetKind,
        drift: schema_drift.Drift,
        route: planner.Route,
        spark: SparkSession,
    ) -> None:
        """The table's events decoded in Spark (cdc.engines.spark.decode: its bad events kept
        for the quarantine) and written by its kind on the engine the planner's second step
        names: a small part's folded rows may be collected and written by delta-rs
        (cdc.engines.collected), else Spark writes them."""
        started = time.monotonic()
        told = self.facts(part, kind)
        small = told.small and told.held_on_driver and told.default_merge_source
        out, columns = part.out, drift.columns
        frame = in_session(part.events.tables[part.table.source], spark)
        out.decoded = spark_decode.decode_table(
            frame, columns, part.events.formats[part.table.source], drift, cache=not small
        )
        facts = out.decoded.facts(columns)  # decodes, into the cache
        add_time(out.timings, "decode", started)
        if facts.bad:
            out.bad = out.decoded.bad.withColumn("cause", F.lit(quarantine.BAD_EVENT))
            if facts.recreated_at is not None and kind.holds_rows:
                # a dropped table's events, which the marker of its successor empties away
                out.bad = out.bad.where(F.col("ev_id") > facts.recreated_at)
        batch = TableBatch(out.decoded.rows, columns, facts.truncated_at, facts.key_range)
        spark.conf.set(MATERIALIZE_SOURCE, "none" if small else self.materialize)
        local = delta_table.LocalTable.reach(part.ref)  # its log, read once
        facts = self.write_facts(kind, part.ref, batch, local, small)
        route = planner.write_route(route, facts)
        if route.write == planner.ARROW:
            declined = self.write(part, kind, Collected(part.ref, local), batch, route)
            if declined is None:
                out.route = route
                return
            route = replace(route, write=planner.SPARK, why=declined)
        self.write(part, kind, SparkEngine(spark, part.ref, local), batch, route)
        out.route = route

    def write_facts(
        self,
        kind: TargetKind,
        ref: TableRef,
        batch: TableBatch,
        local: delta_table.LocalTable | None,
        small: bool,
    ) -> planner.WriteFacts:
        """What the planner is told of a part Spark decoded, before it is written; whether
        delta-rs may write the target is asked only when nothing else keeps the part in
        Spark."""
        layout = kind.layout(ref, batch.columns)
        facts = planner.WriteFacts(
            decoded_by=planner.SPARK,
            small=small,
            kind_writes_arrow=kind.writes_on_driver,
            target_reached=local is not None,
            target_writable=True,
            truncated=batch.truncated_at is not None,
            forced=self.engine,
            change_data_feed=layout.change_data_feed,
            clustered=layout.clustered,
            zoneless_partitions=layout.zoneless_partitions,
        )
        spark_route = planner.Route(planner.SPARK, planner.SPARK, "")
        if local is None or planner.write_route(spark_route, facts).write == planner.SPARK:
            return facts
        refused = ArrowEngine(ref, local).refuses(kind.columns(batch.columns), batch.columns)
        return replace(facts, target_writable=refused is None)

    def write(
        self,
        part: TablePart,
        kind: TargetKind,
        engine: Engine,
        batch: TableBatch,
        route: planner.Route,
    ) -> str | None:
        """The kind's write of the batch on the engine, in one commit marked with the
        part's Commit and the route; the reason when the engine declined it (nothing
        committed), None when written. Seconds under "fold+merge"."""
        commit = replace(part.commit, metadata=route.metadata())
        started = time.monotonic()
        try:
            # an OPTIMIZE (cdc maintain) may commit meanwhile: the write is idempotent
            delta_table.retry_conflicts(
                partial(kind.write, engine, commit, batch), f"table {part.table.target}"
            )
        except Declined as exc:
            return str(exc)
        finally:
            add_time(part.out.timings, "fold+merge", started)
        return None
