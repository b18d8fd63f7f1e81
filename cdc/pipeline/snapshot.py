"""Initial snapshots in chunks: the rows a captured table already holds, copied into its
mirror target(s) by key ranges, consistently with the queue, while the drain goes on.

The algorithm (its consistency argument is in docs/operations.md, "Snapshots"):

- a chunk is the next ``chunk_rows`` rows after the last key copied, in key order
  (cdc.pipeline.chunks), read in its own short REPEATABLE READ snapshot ``S_c`` taken while
  the table's lock is held (cdc.pg.source.table_locks: a drain holds it for the tables a
  batch changes, from their applies to the batch's finish), so after the last batch of the
  table the target holds was applied, and written while the lock is still held, as whole
  rows (a MERGE that updates every column of a key the target holds and inserts the others,
  never a delete:
  cdc.targets.mirror.Mirror.upsert);
- the progress (last key, rows, chunks, ``S_c``) is saved after the chunk's Delta commit
  (cdc.targets.snapshots); killed at any point, the snapshot resumes after the last saved
  chunk, and a chunk written but not saved is read and written again: harmless;
- the copy is ``copied`` once a chunk finds fewer rows than it asked for, and ``done`` once
  the drain applied a batch whose end tick's snapshot is after the last chunk's ``S_c``
  (cdc.pipeline.snapshot_runner): from then on the target shows the source as of a tick.

``cdc snapshot TABLE`` (``Snapshot.run``) runs the chunks itself, taking the table's lock
per chunk only: batches of other tables never wait for it; ``cdc snapshot TABLE --request``
(``request``) asks a running drain to do it with a signal event, which the drain's
SnapshotRunner serves between batches.
``cdc resync`` copies a table whole under the lock (``Snapshot._copy``).
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass

import psycopg
from psycopg import sql
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cdc import errors, failures
from cdc.config import Pipeline, Source, TableMap, parse_table_name
from cdc.engines.spark import masking as spark_masking
from cdc.engines.spark.engine import SparkEngine
from cdc.errors import CdcError, ConfigError
from cdc.pg import source as source_module
from cdc.pg.consumer import Consumer
from cdc.pipeline import chunks
from cdc.pipeline.snapshot_job import (
    CHUNK_ROWS,
    JDBC_MIN_ROWS,
    KILL_AT_ENV,
    PARTITIONS,
    Job,
    failure_of,
    masked,
    new_states,
    resumable,
    stage,
    states_for,
    store_of,
)
from cdc.progress import Progress
from cdc.spark import is_local
from cdc.targets import mask_record, masking, snapshots
from cdc.targets.snapshots import RUNNING

__all__ = [
    "CHUNK_ROWS",
    "KILL_AT_ENV",
    "PARTITIONS",
    "Job",
    "Snapshot",
    "SnapshotFailed",
    "SnapshotResult",
    "new_states",
    "request",
    "resumable",
    "states_for",
    "store_of",
]

log = logging.getLogger("cdc.snapshot")

SIGNAL_TYPE = "cdc.snapshot"  # ev_type of the snapshot signal event
CHUNK_RETRIES = 3  # cdc snapshot: a chunk whose connection was lost is tried again
PROGRESS_EVERY = 5.0  # seconds between progress lines (--no-progress: only the summary)
NICE = 10  # cdc snapshot lowers its CPU priority by this much (--nice): the drain comes first


class SnapshotFailed(CdcError):
    """A table's snapshot failed for a cause of that table's (its state is saved failed, with
    the reason): the snapshots of other tables may go on."""


@dataclass(frozen=True)
class SnapshotResult:
    table: str
    rows: int  # rows copied by this run
    quarantined: int
    seconds: float
    targets: tuple[str, ...]
    chunks: int = 0  # chunks copied by this run
    resumed_at: int = 0  # rows an earlier run had copied


def _check_captured(conn: psycopg.Connection, table: TableMap, src: Source) -> None:
    if not src.engine.has_capture_registry:
        return  # PgQ's triggers are not in our catalog: the user attached them
    query = (
        "select queue_name from cdc.get_capture_info()"
        " where table_name = format('%%I.%%I', %s::text, %s::text)"
    )
    queues = {row[0] for row in conn.execute(query, (table.schema, table.name))}
    if src.queue not in queues:
        raise ConfigError(
            f"{table.source} is not captured into queue {src.queue}: attach its trigger first"
            f" (cdc attach {table.source} --queue {src.queue}), then take the snapshot, so"
            " that no change falls between the two"
        )


def _position(queue: Consumer) -> int | None:
    """The consumer's last applied tick, noted in the progress; None when this role may not
    read the queue's tables (a plain cdc_reader member)."""
    try:
        return queue.position()
    except psycopg.errors.InsufficientPrivilege:
        return None


class Snapshot:
    """``cdc snapshot``: the chunks of source tables' snapshots (see the module docstring)."""

    def __init__(
        self,
        pipeline: Pipeline,
        spark: SparkSession,
        progress: bool = True,
        chunk_rows: int = CHUNK_ROWS,
    ) -> None:
        masking.require_salt_of(pipeline)  # before anything is read or written
        self.pipeline = pipeline
        self.spark = spark
        self.progress = progress
        self.chunk_rows = chunk_rows
        self.jdbc_min_rows = JDBC_MIN_ROWS
        self.on_driver = is_local(spark)

    def run(
        self, table: str, partitions: int = PARTITIONS, restart: bool = False
    ) -> SnapshotResult:
        """Copies the table in chunks, resuming an unfinished snapshot of it (restart: from
        the start). The state is COPIED when it returns; the drain makes it DONE."""
        src = self.pipeline.source
        targets = self.pipeline.mirrors([table])
        started = time.monotonic()
        with psycopg.connect(src.dsn, autocommit=True) as control:
            _check_captured(control, targets[0], src)
            Consumer.for_source(control, src).register()
        known = states_for(self.pipeline, self.spark, targets)
        states = None if restart else resumable(targets, known)
        resumed_at = states[0].rows if states else 0
        if states is None:
            states = new_states(targets, known, None)
            snapshots.save(self.spark, store_of(self.pipeline), states)
        elif states[0].chunks:
            log.info(
                "snapshot of %s resumes after chunk %d (%d rows copied)",
                targets[0].source, states[0].chunks, resumed_at,
            )  # fmt: skip
        job = Job(self.pipeline, self.spark, targets, states, self.chunk_rows, partitions)
        job.jdbc_min_rows = self.jdbc_min_rows
        job.on_driver = self.on_driver
        # one reporter for the whole run, counting from the rows a resumed run had copied:
        # what it shows never goes back (cdc.progress)
        progress = Progress(
            f"snapshot of {targets[0].source}",
            "rows",
            start=resumed_at,
            every=PROGRESS_EVERY if self.progress else math.inf,
        )
        first_chunk = job.state.chunks
        while job.state.state == RUNNING:
            self._chunk(job)
            progress.extra = f"{job.state.chunks - first_chunk} chunk(s)"
            progress.update(job.state.rows, job.estimate)
        result = SnapshotResult(
            targets[0].source,
            job.state.rows - resumed_at,
            job.quarantined,
            time.monotonic() - started,
            tuple(t.target for t in targets),
            job.state.chunks - first_chunk,
            resumed_at,
        )
        progress.extra = f"{result.chunks} chunk(s) into {', '.join(result.targets)}" + (
            f", {result.quarantined:,} quarantined" if result.quarantined else ""
        )
        progress.finish()  # the summary; done once the drain applies its next batch
        return result

    def _chunk(self, job: Job) -> None:
        """One chunk under the table's lock; a lost connection is tried again (a few times,
        then the run stops: run it again, it resumes); a failure of the table's marks the
        snapshot failed and raises."""
        src = self.pipeline.source
        for attempt in range(1, CHUNK_RETRIES + 1):
            try:
                with psycopg.connect(src.dsn, autocommit=True) as control:
                    queue = Consumer.for_source(control, src)
                    with source_module.table_locks(
                        control, src, [job.source], f"snapshot of {job.source}"
                    ):
                        job.chunk(_position(queue))
                return
            except Exception as exc:
                failure = failure_of(exc, self.pipeline, job.source)
                if isinstance(exc, psycopg.OperationalError) and attempt < CHUNK_RETRIES:
                    log.warning("snapshot of %s: %s; trying again", job.source, failure.message)
                    time.sleep(2.0 * attempt)
                    continue
                if failure.kind == failures.TABLE:
                    job.fail(failure.message)
                    raise SnapshotFailed(
                        f"snapshot of {job.source} failed: {failure.message}"
                    ) from exc
                raise

    def _copy(self, targets: list[TableMap], partitions: int) -> tuple[int, int]:
        """The whole table in one snapshot, overwriting the mirror targets in one commit
        each (cdc resync, under the drain lock); returns (rows, quarantined)."""
        src = self.pipeline.source
        table = targets[0]
        jdbc = source_module.source_jdbc(src)
        job = Job(self.pipeline, self.spark, targets, [], partitions=partitions)
        with chunks.ChunkReader(
            src.dsn, table.schema, table.name, src.capture_queue, jdbc is not None
        ) as reader:
            if jdbc is not None:
                expected = reader.estimate()
                plan = reader.plan(None, 1 << 62, partitions, expected=max(expected, 1))
                raw = reader.read_jdbc(self.spark, None, plan, *jdbc)
            else:
                raw = reader.read_copy(self.spark, None, chunks.ChunkPlan(0, ()))
            frame = chunks.typed(raw, reader.columns).persist()
            try:
                read, bad = frame.agg(F.count("*"), F.count("__reason")).collect()[0]
                stage("read")
                good = frame.where(F.col("__reason").isNull()).drop("__reason", "__raw")
                for target in targets:
                    ref = self.pipeline.table(target.target)
                    masks = masked(target, reader.columns)  # as the target holds them
                    rows = spark_masking.named(good, masks) if masks.active else good
                    target.kind.load(
                        self.spark, ref, rows, list(masks.columns), SparkEngine(self.spark, ref)
                    )
                    mask_record.record(self.spark, ref, masks)  # the rows it now holds
                if bad:
                    job._quarantine(frame, bad)
            finally:
                frame.unpersist()
        return read - bad, bad


def request(pipeline: Pipeline, table: str) -> str:
    """Asks a running drain to snapshot the table: inserts the snapshot signal event into
    the pipeline's queue (the drain's SnapshotRunner serves it). Returns the table's name
    as the signal carries it. Needs the right to insert events (cdc_writer)."""
    src = pipeline.source
    source = pipeline.source_name(table)
    try:
        schema, name = parse_table_name(source)
    except ValueError as exc:
        raise ConfigError(f"{table}: not a table name ({exc})") from None
    with psycopg.connect(src.dsn, autocommit=True) as conn:
        found = conn.execute(
            "select 1 from pg_class c join pg_namespace n on n.oid = c.relnamespace"
            " where n.nspname = %s and c.relname = %s",
            (schema, name),
        ).fetchone()
        if found is None:
            raise ConfigError(f"source table {schema}.{name} does not exist in the source database")
        query = sql.SQL("select {}.insert_event(%s, %s, %s, %s, null, null, null)").format(
            src.engine.schema
        )
        signal_name = f"{schema}.{name}"
        data = json.dumps({"table": signal_name})
        try:
            conn.execute(query, (src.queue, SIGNAL_TYPE, data, signal_name))
        except psycopg.Error as exc:
            raise errors.translate(exc) from exc
    return signal_name
