"""One source table's chunked snapshot: the chunk step (read, write, save the progress) and
the saved states it starts from or resumes (cdc.pipeline.snapshot has the algorithm).

A chunk is read by cdc.pipeline.chunks under the lock its caller holds (the table's, or the
drain's), written to every mirror target of the table by a whole-row MERGE
(cdc.targets.mirror.Mirror.upsert), its rows that do not cast sent to the quarantine, and
only then is its progress saved (cdc.targets.snapshots): a process killed in between does
the chunk again, harmlessly. Where every target is a local mirror delta-rs may write, the
chunk is read with COPY into Arrow, cast there (cdc.engines.arrow.decode.cast_rows: the
Spark casts' answers, or none) and written by the kind on the Arrow engine
(cdc.engines.arrow.engine: an append by delta-rs when the target holds no row of the chunk's
key range); anything the Arrow engine declines is written by Spark as above. Each target
gets the chunk's rows as it holds them: its excluded columns left out, its masked ones masked
(cdc.targets.masking; ``Job._ensure`` also follows its recorded masking).
"""

from __future__ import annotations

import logging
import os
import signal
from functools import cached_property, partial

import psycopg
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc import failures
from cdc.config import Pipeline, TableMap
from cdc.engines import planner
from cdc.engines.arrow import decode as arrow_decode
from cdc.engines.arrow import masking as arrow_masking
from cdc.engines.arrow import write as driver_writes
from cdc.engines.arrow.engine import ArrowEngine
from cdc.engines.engine import Declined
from cdc.engines.spark import masking as spark_masking
from cdc.engines.spark.engine import SparkEngine
from cdc.errors import ConfigError
from cdc.pg import pgtypes, reading
from cdc.pg import source as source_module
from cdc.pipeline import chunks
from cdc.pipeline.chunks import ChunkPlan
from cdc.spark import is_local
from cdc.targets import delta_table, mask_record, masking, quarantine, snapshots
from cdc.targets.delta import object_store
from cdc.targets.snapshots import COPIED, FAILED, RUNNING, Progress
from cdc.targets.table import TableRef

__all__ = [
    "CHUNK_ROWS",
    "JDBC_MIN_ROWS",
    "KILL_AT_ENV",
    "PARTITIONS",
    "Job",
    "failure_of",
    "masked",
    "new_states",
    "resumable",
    "stage",
    "states_for",
    "store_of",
]

log = logging.getLogger("cdc.snapshot")

# fault injection for the tests: "read" (SIGKILL after reading a chunk, before writing it),
# "merged:N" (after chunk N's Delta commit, before its progress is saved), "chunk:N" (after
# chunk N's progress is saved)
KILL_AT_ENV = "CDC_SNAPSHOT_KILL_AT"
PARTITIONS = 8  # parallel JDBC reads by key range within a chunk (--partitions)
CHUNK_ROWS = 200_000  # rows per chunk (--chunk-rows)
JDBC_MIN_ROWS = 50_000  # a smaller chunk is read with COPY, even over TCP


def stage(name: str) -> None:
    if os.environ.get(KILL_AT_ENV) == name:  # fault injection for the tests
        os.kill(os.getpid(), signal.SIGKILL)


class Job:
    """One source table's chunked snapshot into its mirror targets (one state per target,
    moving together)."""

    def __init__(
        self,
        pipeline: Pipeline,
        spark: SparkSession,
        targets: list[TableMap],
        states: list[Progress],
        chunk_rows: int = CHUNK_ROWS,
        partitions: int = PARTITIONS,
    ) -> None:
        if chunk_rows < 1:
            raise ConfigError(f"--chunk-rows must be 1 or more, not {chunk_rows}")
        self.pipeline, self.spark, self.targets = pipeline, spark, targets
        self.states = states
        self.chunk_rows, self.partitions = chunk_rows, partitions
        self.jdbc_min_rows = JDBC_MIN_ROWS
        self.on_driver = is_local(spark)  # the planner's local_master
        self.engine = pipeline.drain.engine  # the planner's choice, or one engine forced
        self.estimate: int | None = None
        self.quarantined = 0

    @property
    def source(self) -> str:
        return self.targets[0].source

    @property
    def state(self) -> Progress:
        return self.states[0]

    def save(self, **changes: object) -> None:
        self.states = [s.next(**changes) for s in self.states]
        snapshots.save(self.spark, store_of(self.pipeline), self.states)

    def fail(self, reason: str) -> None:
        log.error("snapshot of %s failed: %s", self.source, reason)
        self.save(state=FAILED, reason=reason)

    @cached_property
    def jdbc(self) -> tuple[str, dict[str, str]] | None:
        """The JDBC URL and properties of the source (None: read with COPY)."""
        return source_module.source_jdbc(self.pipeline.source)

    def chunk(self, position: int | None) -> int:
        """Reads and writes the next chunk (the table's or the drain's lock held by the
        caller), then saves the progress; returns the rows it read. The state becomes COPIED
        when the chunk was the last."""
        src, table = self.pipeline.source, self.targets[0]
        after = self.state.last_key
        number = self.state.chunks + 1
        jdbc = self.jdbc
        with chunks.ChunkReader(
            src.dsn, table.schema, table.name, src.capture_queue, jdbc is not None
        ) as reader:
            if self.estimate is None:
                self.estimate = reader.estimate()
            plan, read = self._read_and_write(reader, after)
            if not plan.rows:
                for target in self.targets:  # an empty table: its target exists all the same
                    self._ensure(target, reader.columns)
            stage(f"merged:{number}")
            last = plan.rows < self.chunk_rows
            self.save(
                state=COPIED if last else RUNNING,
                last_key=plan.last_key or after,
                rows=self.state.rows + read,
                chunks=number,
                snapshot=reader.snapshot,
                xmax=reader.xmax,
                snapshot_at=reader.snapshot_at,
                position=position,
            )
        stage(f"chunk:{number}")
        return read

    def _read_and_write(
        self, reader: chunks.ChunkReader, after: chunks.Key | None
    ) -> tuple[ChunkPlan, int]:
        """Reads the chunk after the key and writes it to every target: its plan, and the
        rows read."""
        if self._route(reader.columns).write == planner.ARROW:
            # COPY into Arrow, cast and appended on the driver where that is exact
            plan, data = reader.read_next_arrow(after, self.chunk_rows)
            written = self._write_on_driver(data, reader.columns)
            if written is not None or data is None:
                return plan, written or 0
            raw = reader.frame(self.spark, data)
        else:
            plan = reader.plan(after, self.chunk_rows, self.partitions)
            jdbc = self.jdbc
            if not plan.rows:
                return plan, 0
            if jdbc is not None and plan.rows >= self.jdbc_min_rows:
                raw = reader.read_jdbc(self.spark, after, plan, *jdbc)
            else:
                raw = reader.read_copy(self.spark, after, plan)
        return plan, self._write(chunks.typed(raw, reader.columns), reader.columns)

    def _route(self, columns: list[pgtypes.Column]) -> planner.Route:
        """The route planner's engine for the table's chunks (every target one whose log
        delta-rs may write, on a local path or in object storage: an existing target, or
        one to be created, which Spark creates without deletion vectors)."""
        kinds, reached, writable = True, True, True
        for target in self.targets:
            ref, kind = self.pipeline.table(target.target), target.kind
            kinds = kinds and kind.writes_on_driver
            on_path = delta_table.local_path(ref) is not None
            reached = reached and (on_path or object_store.is_object_store(ref.location))
            if not (kinds and reached):
                break
            table = delta_table.LocalTable.reach(ref)
            held = list(masked(target, columns).columns)  # as the target holds them
            schema = kind.columns(held)
            if table is not None and not driver_writes.writable(table, schema, held, True):
                writable = False
        layouts = [t.kind.layout(self.pipeline.table(t.target), columns) for t in self.targets]
        facts = planner.ChunkFacts(
            self.on_driver,
            kinds,
            reached,
            writable,
            self.engine,
            change_data_feed=any(layout.change_data_feed for layout in layouts),
            clustered=any(layout.clustered for layout in layouts),
            zoneless_partitions=any(layout.zoneless_partitions for layout in layouts),
        )
        route = planner.chunk_route(facts)
        log.debug("snapshot of %s: %s", self.source, route)
        return route

    def _write_on_driver(self, data: pa.Table | None, columns: list[pgtypes.Column]) -> int | None:
        """Writes a chunk's rows cast on the driver (cdc.engines.arrow.decode.cast_rows)
        to every target on the Arrow engine (each an append: Mirror.upsert); returns the rows
        read, or None when the chunk must be written by Spark (a value the driver does not
        cast for certain, a target that holds rows in the chunk's range). A target appended to
        before another one refuses is MERGEd again by Spark: the same rows."""
        if data is None:
            return None
        typed = arrow_decode.cast_rows(data, columns)
        if typed is None:
            return None
        stage("read")
        for target in self.targets:
            ref, masks = self._ensure(target, columns)
            rows = arrow_masking.named(typed, masks) if masks.active else typed
            write = partial(target.kind.upsert, ArrowEngine(ref), rows, list(masks.columns))
            try:
                delta_table.retry_conflicts(write, f"snapshot of {target.target}")
            except Declined as exc:
                log.debug("snapshot of %s: Spark writes the chunk: %s", target.target, exc)
                return None
        return typed.num_rows

    def _write(self, typed: DataFrame, columns: list[pgtypes.Column]) -> int:
        """Writes a chunk's rows to every target (those that do not cast to the
        quarantine); returns the rows read."""
        frame = typed.persist()
        try:
            read, bad = frame.agg(F.count("*"), F.count("__reason")).collect()[0]
            stage("read")
            good = frame.where(F.col("__reason").isNull()).drop("__reason", "__raw")
            for target in self.targets:
                ref, masks = self._ensure(target, columns)
                rows = spark_masking.named(good, masks) if masks.active else good
                engine = SparkEngine(self.spark, ref)
                write = partial(target.kind.upsert, engine, rows, list(masks.columns))
                # an OPTIMIZE (cdc maintain) may commit meanwhile: the MERGE is idempotent
                delta_table.retry_conflicts(write, f"snapshot of {target.target}")
            if bad:
                self._quarantine(frame, bad)
        finally:
            frame.unpersist()
        return int(read)

    def _ensure(
        self, target: TableMap, columns: list[pgtypes.Column]
    ) -> tuple[TableRef, masking.Masking]:
        """The target and its masking (cdc.targets.masking) for the chunk's source columns:
        an existing target's recorded masking followed (cdc.targets.mask_record: one
        written under other rules is refused), then the target made with the columns it
        holds (or given those it lacks), a new one's masking recorded."""
        ref = self.pipeline.table(target.target)
        masks = masked(target, columns)
        existed = delta_table.exists(self.spark, ref)
        if existed:
            mask_record.follow(self.spark, ref, target.source, masks)
        target.kind.ensure(self.spark, ref, list(masks.columns))
        if not existed and masks.active:
            mask_record.record(self.spark, ref, masks)
        return ref, masks

    def _quarantine(self, typed: DataFrame, count: int) -> None:
        """Rows with a value that does not cast go to the quarantine table, as ev_type
        'snapshot' with the row's text values as JSON in ev_data (a chunk done again
        quarantines them again)."""
        bad = typed.where(F.col("__reason").isNotNull())
        values = {
            "ev_type": F.lit(quarantine.SNAPSHOT),
            "ev_data": F.col("__raw"),
            "ev_extra1": F.lit(self.source),
            "reason": F.col("__reason"),
            "cause": F.lit(quarantine.SNAPSHOT_ROW),
        }
        frame = quarantine.conform(bad, values)
        quarantine.append(self.spark, self.pipeline.table(self.pipeline.quarantine), frame)
        self.quarantined += count
        log.warning(
            "%d row(s) of %s do not cast to their column types: quarantined", count, self.source
        )


def masked(target: TableMap, columns: list[pgtypes.Column]) -> masking.Masking:
    """The target's exclusions and masks over its source's columns (cdc.targets.masking)."""
    return masking.resolve(target.options, columns, target.source, listed=not target.rule)


def failure_of(
    exc: BaseException, pipeline: Pipeline, source: str | None = None
) -> failures.Failure:
    """How a chunk's error counts: infrastructure (the run stops; the chunk is done again
    by the next run) or the table's (the snapshot fails, with the reason). source: the
    table's name, for the message."""
    if isinstance(exc, psycopg.errors.UndefinedTable | psycopg.errors.UndefinedColumn):
        return failures.Failure(failures.TABLE, f"the source table is gone: {exc}".strip())
    refused = reading.refusal(exc, source or "?")
    if refused is not None:  # row-level security, met by a read (cdc.pg.reading)
        return failures.Failure(failures.TABLE, str(refused))
    return failures.classify(exc, pipeline.target_path)


def store_of(pipeline: Pipeline) -> TableRef:
    """The pipeline's progress table (cdc.targets.snapshots), beside its quarantine."""
    return pipeline.table(snapshots.table_name(pipeline.quarantine))


def states_for(
    pipeline: Pipeline, spark: SparkSession, targets: list[TableMap]
) -> dict[str, Progress]:
    """The targets' last snapshot states."""
    known = snapshots.read(spark, store_of(pipeline))
    return {t.target: known[t.target] for t in targets if t.target in known}


def new_states(
    targets: list[TableMap], known: dict[str, Progress], tick_id: int | None
) -> list[Progress]:
    """Fresh states for the targets (their seq after any earlier one's)."""
    return [
        Progress.start(
            t.target, t.source, tick_id, known[t.target].seq + 1 if t.target in known else 0
        )
        for t in targets
    ]


def resumable(targets: list[TableMap], known: dict[str, Progress]) -> list[Progress] | None:
    """The targets' states when every one is a running snapshot at the same point."""
    states = [known.get(t.target) for t in targets]
    if any(s is None or s.state != RUNNING for s in states):
        return None
    points = {(s.last_key, s.chunks) for s in states if s is not None}
    return [s for s in states if s is not None] if len(points) == 1 else None
