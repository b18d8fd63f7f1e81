"""Reading a batch into Spark, split by source table: by COPY into Arrow, or by Spark JDBC.

The choice is by size: a batch whose events may number ``jdbc_min_events`` or more (the
event sequence's advance between its ticks) is read by Spark's JDBC source, one ev_id slice
per partition read in parallel by the executors, and cached for the split by table; a
smaller batch (or any batch when JDBC cannot reach the source: a DSN over a unix socket and
no ``source.jdbc_url``, cdc.pg.source.source_jdbc) is read with COPY on the driver
(``cdc.pg.batch.Batch.arrow``) and split in Arrow. ``jdbc_threshold`` is the rule: the
file's ``source.jdbc_min_events``, else DEFAULT_JDBC_MIN_EVENTS, on a local master and on a
cluster alike. A batch the driver holds is decoded and folded there (cdc.engines.planner: on a
cluster a large part's folded rows are MERGEd by the executors, the route ``arrow+spark``);
read by JDBC it is decoded and folded by Spark, which on the standalone cluster of
docs/benchmarks.md drains a 360,000-event batch at half the rate and a 1,000,000-event one at
a third to a half. The read alone turns in JDBC's favour from about 600,000 events there
(bench/batch_read.py), the whole drain at no size the driver's memory budget holds.
A batch read with COPY that outgrows the drain's memory budget (one huge transaction is one
batch whatever its event count) is spilled to Parquet as it is read and split in Spark
(cdc.pipeline.spool); on a cluster without a spill folder it is read again over JDBC, so
there a batch that a sample of its events says will not fit is read over JDBC at once.

Either way the result is the same ``BatchEvents``: counts per configured source (a renamed
table's earlier names count for it, ``cdc.pg.source.table_names``), a frame per configured
source that has events, the events of tables not in the configuration, and per source the
capture formats of its row events. Every frame carries the batch's ``tick_id``. Snapshot
signals (ev_type ``cdc.snapshot``) are never data: they are split out into
``BatchEvents.signals`` and counted nowhere else.

A new way of reading batches goes here: one more ``_read_*`` method and its rule in
``BatchReader.read``.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from cdc import formats as capture_formats
from cdc.config import DrainSettings, Source
from cdc.engines.spark import formats as spark_formats
from cdc.errors import CdcError
from cdc.pg.batch import CSV_BLOCK, EVENT_SCHEMA, Batch
from cdc.pg.jdbc import redacted
from cdc.pg.source import TableNames, source_jdbc
from cdc.pipeline.spool import EXPANSION, Overflow, Spool
from cdc.spark import is_local

__all__ = ["BatchEvents", "BatchReader", "jdbc_threshold"]

log = logging.getLogger("cdc.drain")
T = TypeVar("T")

SIGNAL = "cdc.snapshot"  # ev_type of a snapshot signal: split out of the batch, not applied
# the batch size from which the executors read over JDBC, when the file sets none: below it
# the driver reads with COPY and decodes and folds the batch itself, which is faster on a
# local master and on a cluster (see the module docstring); JDBC is for what the driver
# should not hold (a batch past the memory budget is read again over JDBC on a cluster)
DEFAULT_JDBC_MIN_EVENTS = 2_000_000
# a batch whose events would each need more Arrow bytes than this to outgrow the memory
# budget's share is read with COPY unsampled (a small batch costs no sizing query)
SAMPLE_BEYOND_BYTES = 4096
# the smallest COPY piece a batch is read in (a smaller one parses slower)
MIN_COPY_BLOCK = 1 << 20


def jdbc_threshold(source: Source) -> tuple[int, str]:
    """The batch size (events) from which a batch is read over JDBC, and where it comes from:
    the file's ``source.jdbc_min_events``, else the default."""
    if source.jdbc_min_events is not None:
        return source.jdbc_min_events, "source.jdbc_min_events"
    return DEFAULT_JDBC_MIN_EVENTS, "the default"


class Lazy(Mapping[str, T]):
    """Values by table, each made on first use: a table written from the driver
    (cdc.engines.arrow.decode) never needs its Spark frame, nor its formats."""

    def __init__(self, make: Callable[[str], T], names: list[str]) -> None:
        self._make = make
        self._names = names
        self._made: dict[str, T] = {}

    def __getitem__(self, name: str) -> T:
        if name not in self._names:
            raise KeyError(name)
        if name not in self._made:
            self._made[name] = self._make(name)
        return self._made[name]

    def __contains__(self, name: object) -> bool:
        return name in self._names  # without making the frame (Mapping's would)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


@dataclass
class BatchEvents:
    """A batch's events: counts per source table (ev_extra1), a frame per configured table
    that has events, and the events of tables not in the configuration (or None). Read with
    COPY, also each table's raw events as Arrow (``arrow``)."""

    counts: dict[str | None, int]
    tables: Mapping[str, DataFrame]
    strays: DataFrame | None
    formats: Mapping[str, set[str]]  # per table, the formats of its row events
    cached: DataFrame | None = None
    # the snapshot signals (ev_type SIGNAL): (ev_extra1, ev_data) in event order; never data
    signals: list[tuple[str | None, str | None]] = field(default_factory=list)
    arrow: dict[str, pa.Table] = field(default_factory=dict)  # read with COPY: raw events
    spool: Spool | None = None  # a batch spilled to Parquet (the frames read its file)
    route: str = "copy"  # how it was read: "copy", "spilled", "jdbc" (cdc.pipeline.reader)
    rule: str = ""  # why: the batch's size against jdbc_min_events (jdbc_threshold)

    @property
    def on_driver(self) -> bool:
        """Whether the events are held on the driver (read with COPY, within the budget)."""
        return self.cached is None and self.spool is None

    def release(self) -> None:
        if self.cached is not None:
            self.cached.unpersist()
        if self.spool is not None:
            self.spool.remove()


class BatchReader:
    """Reads the batches of one source into one Spark session (see the module's docstring)."""

    def __init__(
        self, spark: SparkSession, source: Source, drain: DrainSettings | None = None
    ) -> None:
        self.spark = spark
        self.source = source
        drain = drain or DrainSettings()
        # the raw events' share of the budget: the driver path peaks at EXPANSION times them
        self.held_limit = max(1, drain.memory_budget // EXPANSION)
        local = is_local(spark)
        # a folder Spark's executors read: any local one on a local master
        self.spill_dir = drain.spill_dir or (tempfile.gettempdir() if local else None)
        self.jdbc_min_events, self.threshold_from = jdbc_threshold(source)

    def read(self, batch: Batch, names: TableNames) -> BatchEvents:
        """The batch's events, split by source table: by COPY into Arrow (split there), or,
        for a large batch, by Spark JDBC (cached, split in Spark); read with COPY past the
        memory budget, spilled to Parquet (split in Spark). The result's ``rule`` says why."""
        size = batch.events_upper_bound
        large = size >= self.jdbc_min_events
        rule = (
            f"up to {size:,} events {'>=' if large else '<'} jdbc_min_events"
            f" {self.jdbc_min_events:,} ({self.threshold_from})"
        )
        if not large and (outgrows := self._outgrows(batch)) is not None:
            large, rule = True, f"{rule}, but {outgrows}"
        if large:
            jdbc = source_jdbc(self.source)  # one short connection (cdc.pg.source)
            if jdbc is not None:
                events = self._read_jdbc(batch, names, *jdbc)
                events.rule = rule
                return events
            rule += ", but JDBC cannot reach the source"
            log.warning(
                "batch %d is large but JDBC cannot follow the DSN (a unix socket) and no"
                " source.jdbc_url is set: read with COPY",
                batch.batch_id,
            )
        events = self._read_with_copy(batch, names)
        events.rule = rule if events.route == "copy" else f"{rule}; over the memory budget"
        return events

    def _outgrows(self, batch: Batch) -> str | None:
        """Why a batch must be read by JDBC although below jdbc_min_events: where COPY would
        read it twice (a cluster without a spill folder reads a batch past the memory
        budget's share again over JDBC), a sample of its events (Batch.sampled_bytes_per_event)
        says it would not fit. None when it may fit, or where it is not asked."""
        if self.spill_dir is not None or batch.events_upper_bound * SAMPLE_BEYOND_BYTES <= (
            self.held_limit
        ):
            return None
        per_event = batch.sampled_bytes_per_event()
        if per_event is None or batch.events_upper_bound * per_event <= self.held_limit:
            return None
        return (
            f"about {batch.events_upper_bound * per_event:,.0f} bytes of events (sampled),"
            f" over the memory budget's share of {self.held_limit:,} bytes"
        )

    def _read_with_copy(self, batch: Batch, names: TableNames) -> BatchEvents:
        """The batch read with COPY on the driver: kept in Arrow within the memory budget,
        else spilled to Parquet or (no spill folder) read again over JDBC."""
        spool = Spool(self.held_limit, self.spill_dir)
        # COPY pieces no larger than the events held: a piece is held about three times over
        # while it is parsed, so a small budget is not outgrown by the reading itself
        block = max(MIN_COPY_BLOCK, min(CSV_BLOCK, self.held_limit))
        try:
            # closed on an overflow: psycopg cancels the COPY, the connection stays usable
            with contextlib.closing(batch.arrow(block)) as stream:
                for events in stream:
                    spool.add(events)
            spool.close()
        except Overflow:
            spool.remove()
            return self._read_again(batch, names)
        except BaseException:
            spool.remove()
            raise
        if spool.spilled:
            log.info(
                "batch %d: %.1f MB of events, over the memory budget's share of %.1f MB:"
                " spilled to %s, applied by Spark",
                batch.batch_id, spool.bytes / 1e6, self.held_limit / 1e6, spool.path,
            )  # fmt: skip
            return self._read_spilled(batch, names, spool)
        return self._read_copy(batch, names, spool.table())

    def _read_again(self, batch: Batch, names: TableNames) -> BatchEvents:
        """A batch that outgrew the budget on a cluster without a spill folder: read again
        by the executors over JDBC, or refused with the ways out."""
        jdbc = source_jdbc(self.source)
        if jdbc is None:
            raise CdcError(
                f"batch {batch.batch_id} (tick {batch.tick_id}) holds more events than the"
                f" drain's memory budget lets the driver hold ({self.held_limit:,} bytes of"
                " events), and neither a spill folder nor JDBC can take it to the executors:"
                " set drain.spill_dir to a folder every Spark node reads, or give the source"
                " a DSN with a host (not a unix socket) or a source.jdbc_url, or raise"
                " drain.memory_budget"
            )
        log.info(
            "batch %d outgrew the memory budget's share of %.1f MB: read again over JDBC",
            batch.batch_id, self.held_limit / 1e6,
        )  # fmt: skip
        return self._read_jdbc(batch, names, *jdbc)

    def _read_copy(self, batch: Batch, names: TableNames, table: pa.Table) -> BatchEvents:
        """The batch read with COPY into one Arrow table, split by table in Arrow."""
        known = set(names.events)
        ev_ids = table.column("ev_id")
        if len(ev_ids) > 1 and not pc.all(pc.less(ev_ids[:-1], ev_ids[1:])).as_py():
            table = table.sort_by("ev_id")  # get_batch_events orders them: never expected
        is_signal = pc.fill_null(pc.equal(table.column("ev_type"), SIGNAL), False)
        signals: list[tuple[str | None, str | None]] = []
        if pc.any(is_signal).as_py():
            found = table.filter(is_signal).sort_by("ev_id")
            signals = list(
                zip(
                    found.column("ev_extra1").to_pylist(),
                    found.column("ev_data").to_pylist(),
                    strict=True,
                )
            )
            table = table.filter(pc.invert(is_signal))
        column = table.column("ev_extra1")
        counts: dict[str | None, int] = {
            row["values"]: row["counts"] for row in pc.value_counts(column).to_pylist()
        }

        def frame(rows: pa.Table) -> DataFrame:
            return self.spark.createDataFrame(rows).withColumn(
                "tick_id", F.lit(batch.tick_id).cast("long")
            )

        strays = None
        if set(counts) - known:
            in_config = pc.fill_null(pc.is_in(column, pa.array(sorted(known))), False)
            strays = frame(table.filter(pc.invert(in_config)))
        arrow = {}
        for source in sorted({names.events[name] for name in counts if name in known}):
            aliases = pa.array(names.names_of(source))
            arrow[source] = table.filter(pc.fill_null(pc.is_in(column, aliases), False))
        tables = Lazy(lambda source: frame(arrow[source]), list(arrow))
        formats = Lazy(
            lambda source: capture_formats.formats_of(arrow[source].column("ev_type")), list(arrow)
        )
        counts = by_source(names, counts)
        return BatchEvents(counts, tables, strays, formats, signals=signals, arrow=arrow)

    def _read_jdbc(
        self, batch: Batch, names: TableNames, url: str, props: dict[str, str]
    ) -> BatchEvents:
        """The batch through Spark's JDBC source, one slice of ev_ids per partition, read in
        parallel by the executors, and cached for the split by table."""
        log.debug(
            "batch %d: read over JDBC from %s in %d slices",
            batch.batch_id, redacted(url), self.source.jdbc_partitions,
        )  # fmt: skip
        frames = [
            self.spark.read.jdbc(url, batch.jdbc_query(lo, hi), properties=props)
            for lo, hi in batch.jdbc_slices(self.source.jdbc_partitions)
        ]
        frame = frames[0]
        for other in frames[1:]:
            frame = frame.unionByName(other)
        frame = _events(frame, batch).cache()
        events = self._split_in_spark(frame, names, cached=frame)
        events.route = "jdbc"
        return events

    def _read_spilled(self, batch: Batch, names: TableNames, spool: Spool) -> BatchEvents:
        """A batch spilled to Parquet (cdc.pipeline.spool), read and split by Spark."""
        try:
            frame = _events(self.spark.read.parquet(spool.uri()), batch)
            events = self._split_in_spark(frame, names)
        except BaseException:
            spool.remove()
            raise
        events.spool, events.route = spool, "spilled"
        return events

    def _split_in_spark(
        self, frame: DataFrame, names: TableNames, cached: DataFrame | None = None
    ) -> BatchEvents:
        """A batch's events in Spark, split by table there: counts, signals and formats in
        one aggregate."""
        known = set(names.events)
        is_signal = F.coalesce(F.col("ev_type") == SIGNAL, F.lit(False))
        facts = (
            frame.groupBy("ev_extra1")
            .agg(
                F.count("*").alias("n"),
                F.count(F.when(is_signal, 1)).alias("signals"),
                *spark_formats.format_flags(),
            )
            .collect()
        )
        signals: list[tuple[str | None, str | None]] = []
        if any(row.signals for row in facts):
            found = frame.where(is_signal).orderBy("ev_id").select("ev_extra1", "ev_data")
            signals = [(row.ev_extra1, row.ev_data) for row in found.collect()]
            frame = frame.where(~is_signal)
        counts = {row.ev_extra1: row.n - row.signals for row in facts if row.n > row.signals}
        formats: dict[str, set[str]] = {}
        for row in facts:
            if row.ev_extra1 in known and row.n > row.signals:
                source = names.events[row.ev_extra1]
                formats.setdefault(source, set()).update(f for f in capture_formats.NAMES if row[f])
        tables = {
            source: frame.where(F.col("ev_extra1").isin(*names.names_of(source)))
            for source in formats
        }
        counts = by_source(names, counts)
        strays = None
        if set(counts) - known:
            strays = frame.where(
                ~F.col("ev_extra1").isin(*sorted(known)) | F.col("ev_extra1").isNull()
            )
        return BatchEvents(counts, tables, strays, formats, cached=cached, signals=signals)


def _events(frame: DataFrame, batch: Batch) -> DataFrame:
    """A batch's events read by Spark, typed as ``EVENT_SCHEMA`` and with the batch's tick."""
    frame = frame.select(
        *[F.col(f.name).cast(f.dataType).alias(f.name) for f in from_arrow_schema(EVENT_SCHEMA)]
    )
    return frame.withColumn("tick_id", F.lit(batch.tick_id).cast("long"))


def by_source(names: TableNames, counts: dict[str | None, int]) -> dict[str | None, int]:
    """Event counts per event table name, summed per configured source (renamed tables'
    earlier names count for their table); other names as they are."""
    summed: dict[str | None, int] = {}
    for name, n in counts.items():
        key = names.events.get(name, name) if name is not None else None
        summed[key] = summed.get(key, 0) + n
    return summed
