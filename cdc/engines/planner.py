"""The route planner: which engine decodes a table's part of a batch, and which one folds
and writes it, decided in this one place from stated facts, and recorded.

Two engines run the same steps on the same row contract (cdc.rows):

- **arrow**: on the driver, over the Arrow rows COPY read (cdc.engines.arrow: Arrow's
  kernels, a fold in numpy, delta-rs' MERGE). No Spark job: a small batch costs
  milliseconds instead of the dozen Spark jobs of a MERGE;
- **spark**: on the executors (cdc.engines.spark: Spark expressions, Delta's MERGE), which
  also quarantines bad events and scales past one machine.

The decision has two steps, because some facts are known only once the part is decoded:

1. ``decode_route(PartFacts)``, before decoding: the Arrow engine decodes a part only when
   its events are held on the driver within the memory budget (read with COPY, not spilled:
   cdc.pipeline.spool keeps the Arrow engine's peak, EXPANSION times the raw events, within
   ``drain.memory_budget``), the target's kind writes with Arrow, Delta's MERGE source
   setting is the drain's own (``auto``), and either the master is local (the driver is
   where Spark would work too) or the part is small (``SMALL_EVENTS``: on a cluster a large
   part is the executors' work). A large part on a cluster whose events the driver holds is
   still decoded and folded there, where they are (the Arrow decoder and the numpy fold
   take a fraction of a second where Spark's decode and fold take jobs), and its folded
   rows, one per key, are shipped to Spark, which MERGEs them on the executors
   (cdc.engines.shipped; the route ``arrow+spark``). ``drain.engine`` forces one route
   (``spark``: always; ``arrow``: wherever the facts allow it, the way tests run the
   engines over one batch; ``arrow+spark``: the driver's fold and Spark's write).
   A target delta-rs does not write as Spark would by its layout or properties
   (``TARGET_REASONS``, cdc.targets.layout: the change data feed, liquid clustering, a
   timestamp partition column) is written by Spark whatever the part, its rows decoded and
   folded on the driver where they are.
   The Arrow decoder may still answer "undecided" (an event it cannot be sure to decode as
   Spark does, a bad event): then Spark decodes, and the route says why.
2. ``write_route(WriteFacts)``, once decoded: the Arrow engine folds and writes where
   delta-rs writes what Spark would (a target delta-rs reaches, on a local path or in object
   storage with the session's S3A settings, whose protocol delta-rs writes, exact column
   names, no TRUNCATE in the part). Rows Spark decoded may still be written by
   delta-rs when the part is small (Spark folds, the driver collects the one row per key,
   cdc.engines.collected): a Spark MERGE costs seconds whatever its size.

What only the rows show, the Arrow engine checks as it writes (cdc.engines.engine.Declined:
a key compared in a normalised form, the files a MERGE would rewrite beyond delta-rs'
budget, a date beyond years 1-9999, a failure of delta-rs): it declines having committed
nothing, and Spark writes the part, the reason in the route.

The ``Route`` is logged, kept in ``BatchStats.routes`` and written into the target's Delta
commit (``commitInfo.userMetadata``, cdc.targets.table.Commit.metadata), so ``DESCRIBE
HISTORY`` says which engine wrote each commit and why.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

__all__ = [
    "ARROW",
    "CHANGE_DATA_FEED",
    "CLUSTERED",
    "ENGINES",
    "FORCEABLE",
    "SHIPPED",
    "SMALL_EVENTS",
    "SPARK",
    "TARGET_REASONS",
    "ZONELESS_PARTITIONS",
    "ChunkFacts",
    "PartFacts",
    "Route",
    "WriteFacts",
    "chunk_route",
    "decode_route",
    "write_route",
]

ARROW, SPARK = "arrow", "spark"
ENGINES = (ARROW, SPARK)
SHIPPED = "arrow+spark"  # decoded and folded by the Arrow engine, written by Spark's
FORCEABLE = (*ENGINES, SHIPPED)  # the values of drain.engine besides "auto"
# A part of up to this many events is small: on a cluster the driver still decodes and writes
# it (a Spark job costs more than its work), and Spark writes it without the decode cache
# and without Delta's copy of the MERGE source (cdc.pipeline.apply).
SMALL_EVENTS = 10_000
# Why delta-rs 1.6 does not write a target of this layout or these properties
# (cdc.targets.layout; the facts ``change_data_feed``, ``clustered`` and
# ``zoneless_partitions``): Spark writes it. The first was measured: delta-rs writes a MERGE's
# change data (``_change_data``) as Spark does, but a source row that matches no clause (the
# delete of a key the target lacks: a row inserted and deleted within one batch) gives a
# change row of NULLs that fails the target's NOT NULL columns, and the MERGE fails.
CHANGE_DATA_FEED = (
    "a target with the change data feed: delta-rs 1.6 fails a MERGE whose source holds a row"
    " no clause matches (a key deleted that the target lacks) on such a table"
)
CLUSTERED = (
    "a liquid-clustered target (cluster_by): delta-rs 1.6 does not write the clustering"
    " table feature"
)
ZONELESS_PARTITIONS = (
    "a target partitioned by a timestamp column: delta-rs 1.6 writes its partition values"
    " without their zone, which Spark reads in the reader's session time zone"
)
TARGET_REASONS = (CHANGE_DATA_FEED, CLUSTERED, ZONELESS_PARTITIONS)


def _target_reason(change_data_feed: bool, clustered: bool, zoneless: bool) -> str | None:
    """Why delta-rs may not write a target of this layout and properties (None: it may)."""
    if change_data_feed:
        return CHANGE_DATA_FEED
    if clustered:
        return CLUSTERED
    if zoneless:
        return ZONELESS_PARTITIONS
    return None


@dataclass(frozen=True)
class PartFacts:
    """What is known of a table's part of a batch before it is decoded."""

    events: int  # the part's events
    held_on_driver: bool  # read with COPY within the memory budget (its Arrow rows at hand)
    local_master: bool  # Spark's master is local: the driver is where Spark works too
    kind_writes_arrow: bool  # the target's kind has an Arrow write (TargetKind.arrow_writes)
    default_merge_source: bool  # merge.materializeSource is the drain's own ("auto")
    forced: str | None = None  # drain.engine (FORCEABLE), None for the planner's choice
    # the target's (cdc.targets.layout): the change data feed on; liquid-clustered;
    # partitioned by a timestamp column
    change_data_feed: bool = False
    clustered: bool = False
    zoneless_partitions: bool = False

    @property
    def small(self) -> bool:
        return self.events <= SMALL_EVENTS

    @property
    def target_reason(self) -> str | None:
        return _target_reason(self.change_data_feed, self.clustered, self.zoneless_partitions)


@dataclass(frozen=True)
class Route:
    """Which engine decodes the part and which one writes it, and why."""

    decode: str
    write: str
    why: str

    def __str__(self) -> str:
        engines = self.decode if self.decode == self.write else f"{self.decode}+{self.write}"
        return f"{engines} ({self.why})"

    def metadata(self) -> str:
        """The route as the Delta commit records it (commitInfo.userMetadata)."""
        return json.dumps({"cdc.decode": self.decode, "cdc.write": self.write, "cdc.why": self.why})

    def decoded_by(self, engine: str, why: str) -> Route:
        """The route once the part was decoded by engine (the Arrow decoder undecided)."""
        return Route(engine, engine, why)


def decode_route(facts: PartFacts) -> Route:
    """Step 1: the engine that decodes the part (see the module docstring)."""
    if facts.forced == SPARK:
        return Route(SPARK, SPARK, "drain.engine = spark")
    if not facts.held_on_driver:
        return Route(
            SPARK, SPARK, "events not held on the driver (read by JDBC, spilled, or replayed)"
        )
    if not facts.kind_writes_arrow:
        return Route(SPARK, SPARK, "the target kind writes with Spark only")
    if not facts.default_merge_source:
        return Route(SPARK, SPARK, "merge.materializeSource set by the submitter")
    if facts.forced == SHIPPED:
        return Route(ARROW, SPARK, f"drain.engine = {SHIPPED}")
    if facts.target_reason is not None:  # the driver decodes and folds, Spark writes
        return Route(ARROW, SPARK, facts.target_reason)
    if facts.forced == ARROW:
        return Route(ARROW, ARROW, "drain.engine = arrow")
    if facts.local_master:
        return Route(ARROW, ARROW, "local master, events on the driver")
    if facts.small:
        return Route(ARROW, ARROW, f"small part (<= {SMALL_EVENTS:,} events) on a cluster")
    return Route(
        ARROW,
        SPARK,
        f"large part (> {SMALL_EVENTS:,} events) on a cluster: folded on the driver,"
        " written by the executors",
    )


@dataclass(frozen=True)
class WriteFacts:
    """What is known of a decoded part and its target before it is written."""

    decoded_by: str  # the engine that decoded it
    small: bool  # PartFacts.small, and held on the driver
    kind_writes_arrow: bool
    target_reached: bool  # delta-rs opened the target's log (a local path or object storage)
    target_writable: bool  # delta-rs writes this target as Spark would (ArrowEngine.refuses)
    truncated: bool  # the part holds a TRUNCATE or the marker of a re-created table
    forced: str | None = None
    change_data_feed: bool = False  # PartFacts'
    clustered: bool = False
    zoneless_partitions: bool = False


def write_route(route: Route, facts: WriteFacts) -> Route:
    """Step 2: the engine that folds and writes the decoded part."""
    why = _spark_write_reason(facts)
    if why is None:
        return Route(facts.decoded_by, ARROW, route.why)
    return Route(facts.decoded_by, SPARK, why if facts.decoded_by == ARROW else route.why)


def _spark_write_reason(facts: WriteFacts) -> str | None:
    """Why Spark must write the part (None: the Arrow engine may)."""
    if facts.forced in (SPARK, SHIPPED):  # the write is Spark's either way
        return f"drain.engine = {facts.forced}"
    if not facts.kind_writes_arrow:
        return "the target kind writes with Spark only"
    target = _target_reason(facts.change_data_feed, facts.clustered, facts.zoneless_partitions)
    if target is not None:
        return target
    if facts.decoded_by == SPARK and not facts.small:
        return "a large part decoded by Spark"
    if facts.truncated:
        return "a TRUNCATE overwrites the target"
    if not facts.target_reached:
        return "delta-rs does not reach the target"
    if not facts.target_writable:
        return "delta-rs cannot write this target as Spark would"
    return None


@dataclass(frozen=True)
class ChunkFacts:
    """What is known of a snapshot chunk's targets before it is read (cdc.pipeline.snapshot_job)."""

    local_master: bool
    kinds_write_arrow: bool  # every target's kind has an Arrow write
    targets_reached: bool  # delta-rs reaches every target: a local path or object storage
    targets_writable: bool  # delta-rs writes every existing target as Spark would
    forced: str | None = None
    change_data_feed: bool = False  # a target has the change data feed (PartFacts')
    clustered: bool = False  # a target is liquid-clustered
    zoneless_partitions: bool = False  # a target is partitioned by a timestamp column


def chunk_route(facts: ChunkFacts) -> Route:
    """The engine that casts and writes a snapshot chunk: the Arrow engine on a local master,
    for targets delta-rs may write (each chunk an append, when the target holds no row in
    the chunk's key range: else Spark MERGEs it, as it does a value the Arrow cast is
    undecided about)."""
    if facts.forced == SPARK:
        return Route(SPARK, SPARK, "drain.engine = spark")
    if not facts.kinds_write_arrow:
        return Route(SPARK, SPARK, "a target kind writes with Spark only")
    target = _target_reason(facts.change_data_feed, facts.clustered, facts.zoneless_partitions)
    if target is not None:
        return Route(SPARK, SPARK, target)
    if not facts.targets_reached:
        return Route(SPARK, SPARK, "delta-rs does not reach a target")
    if not facts.targets_writable:
        return Route(SPARK, SPARK, "delta-rs cannot write a target as Spark would")
    if facts.forced == ARROW:
        return Route(ARROW, ARROW, "drain.engine = arrow")
    if not facts.local_master:
        return Route(SPARK, SPARK, "a cluster master: the executors read and write chunks")
    return Route(ARROW, ARROW, "local master, local targets")
