"""Initial snapshot: the rows a captured table already holds, loaded into its Delta table(s)
consistently with the queue.

Why it is consistent: the triggers are attached first, so every change after that is an
event. The snapshot registers the drain's consumer (if it is not yet), takes the drain lock
(no batch is applied meanwhile), reads the table in one PostgreSQL snapshot S and overwrites
the mirror target with it. The consumer's position is a tick taken before S, so the next
batches hold every change committed after S, plus some already in S: applying those again
is harmless, because the fold (cdc.targets.fold) decides each key by its last transaction that
inserted or deleted it, and takes values from the last INSERT and later UPDATEs (full rows,
or sql-format column values that S already shows): the same end state whether the target
already shows some of those transactions or none (property-tested in tests/spark/test_fold.py).
No row is lost and none comes back.

An interrupted snapshot leaves the target as it was (the overwrite is one Delta commit):
run it again. Events already applied from batches the drain finished are in S too.

Reading: over Spark JDBC when the DSN reaches the server over TCP, in ranges of the first
key column (integer keys) read in parallel by the executors, every one of them importing S
(``pg_export_snapshot``); otherwise with COPY on the driver. Values are read as PostgreSQL
text and cast like event values (cdc.pipeline.decode), so a snapshot row and an event row of
the same data are equal in Delta."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass

import psycopg
import pyarrow as pa
from psycopg import sql
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc.config import Pipeline, Source, TableMap
from cdc.errors import ConfigError
from cdc.pg import copyreader, pgtypes
from cdc.pg import source as source_module
from cdc.pg.consumer import Consumer
from cdc.pipeline import decode
from cdc.targets import quarantine, registry
from cdc.targets.table import quote

log = logging.getLogger("cdc.snapshot")

# the session settings under which values are read as text: those the events carry
TEXT_SETTINGS = (
    "set datestyle = 'ISO, YMD'; set timezone = 'UTC'; set intervalstyle = 'postgres';"
    " set bytea_output = 'hex'; set extra_float_digits = 1"
)
INTEGER_KEYS = ("short", "int", "long")
KILL_AT_ENV = "CDC_SNAPSHOT_KILL_AT"  # "read": SIGKILL after reading, before the commit
PARTITIONS = 8  # parallel JDBC reads by key range (cdc snapshot/resync --partitions)


@dataclass(frozen=True)
class SnapshotResult:
    table: str
    rows: int
    quarantined: int
    seconds: float
    targets: tuple[str, ...]


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


def _text_select(columns: list[pgtypes.Column], table: TableMap, extra: str = "") -> sql.Composed:
    cols = sql.SQL(", ").join(
        sql.SQL("{}::text as {}").format(sql.Identifier(c.name), sql.Identifier(c.name))
        for c in columns
    )
    return sql.SQL("select {}{} from {}.{}").format(
        sql.SQL(extra),
        cols,
        sql.Identifier(table.schema),
        sql.Identifier(table.name),
    )


class Progress:
    """A progress line on stderr while Spark runs the copy: tasks done of the job's stages,
    as rows (of the exact count) and a rate."""

    def __init__(self, spark: SparkSession, label: str, total: int, enabled: bool) -> None:
        self.spark, self.label, self.total, self.enabled = spark, label, total, enabled
        self.started = time.monotonic()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Progress:
        if self.enabled:
            self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        if self.enabled:
            self.thread.join()
            self._show(1.0)
            sys.stderr.write("\n")

    def _fraction(self) -> float:
        tracker = self.spark.sparkContext.statusTracker()
        done = total = 0
        for stage_id in tracker.getActiveStageIds():
            info = tracker.getStageInfo(stage_id)
            if info is not None:
                done += info.numCompletedTasks
                total += info.numTasks
        return done / total if total else 0.0

    def _show(self, fraction: float) -> None:
        rows = int(self.total * fraction)
        elapsed = max(time.monotonic() - self.started, 1e-6)
        width = 30
        bar = "#" * int(width * fraction) + "-" * (width - int(width * fraction))
        sys.stderr.write(
            f"\r{self.label} [{bar}] {rows:,}/{self.total:,} rows, {rows / elapsed:,.0f} rows/s"
        )
        sys.stderr.flush()

    def _run(self) -> None:
        while not self.stop.wait(0.5):
            self._show(self._fraction())


class Snapshot:
    """Loads source tables' rows into their mirror targets (see the module's docstring)."""

    def __init__(self, pipeline: Pipeline, spark: SparkSession, progress: bool = True) -> None:
        self.pipeline = pipeline
        self.spark = spark
        self.progress = progress

    def run(self, table: str, partitions: int = PARTITIONS) -> SnapshotResult:
        src = self.pipeline.source
        targets = self.pipeline.mirrors([table])
        started = time.monotonic()
        with psycopg.connect(src.dsn, autocommit=True) as control:
            _check_captured(control, targets[0], src)
            Consumer.for_source(control, src).register()
            with source_module.drain_lock(control, src, f"snapshot of {table}"):
                rows, bad = self._copy(targets, partitions)
        result = SnapshotResult(
            table, rows, bad, time.monotonic() - started, tuple(t.target for t in targets)
        )
        log.info(
            "snapshot of %s: %d rows into %s in %.1f s (%d quarantined)",
            table, rows, ", ".join(result.targets), result.seconds, bad,
        )  # fmt: skip
        return result

    def _copy(self, targets: list[TableMap], partitions: int) -> tuple[int, int]:
        src = self.pipeline.source
        table = targets[0]
        with psycopg.connect(src.dsn) as reader:
            reader.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            reader.read_only = True
            snapshot_id = reader.execute("select pg_export_snapshot()").fetchone()[0]
            reader.execute(TEXT_SETTINGS)
            columns = pgtypes.keyed_columns(
                reader, table.schema, table.name, src.capture_queue, registry_required=True
            )
            query = sql.SQL("select count(*) from {}.{}").format(
                sql.Identifier(table.schema), sql.Identifier(table.name)
            )
            total = reader.execute(query).fetchone()[0]
            jdbc = source_module.jdbc_url(src.dsn)
            if jdbc is not None:
                raw = self._read_jdbc(reader, columns, table, snapshot_id, partitions, *jdbc)
            else:
                raw = self._read_copy(reader, columns, table)
            # cached (spilling to local disk): written to each target, counted, quarantined
            typed = self._typed(raw, columns).persist()
            try:
                with Progress(self.spark, f"snapshot {table.source}", total, self.progress):
                    read, bad = typed.agg(F.count("*"), F.count("__reason")).collect()[0]
                if os.environ.get(KILL_AT_ENV) == "read":  # fault injection for the tests
                    os.kill(os.getpid(), signal.SIGKILL)
                good = typed.where(F.col("__reason").isNull()).drop("__reason", "__raw")
                for target_map in targets:
                    ref = self.pipeline.table(target_map.target)
                    registry.kind(target_map.mode).load(self.spark, ref, good, columns)
                if bad:
                    self._quarantine(typed, table, bad)
            finally:
                typed.unpersist()
            reader.rollback()
        return read - bad, bad

    def _read_copy(
        self, reader: psycopg.Connection, columns: list[pgtypes.Column], table: TableMap
    ) -> DataFrame:
        query = sql.SQL("copy ({}) to stdout with (format csv)").format(
            _text_select(columns, table)
        )
        schema = pa.schema([(c.name, pa.string()) for c in columns])
        data = copyreader.read_table(reader, query, schema)
        if data is None:
            return self.spark.createDataFrame(
                [], ", ".join(f"{quote(c.name)} string" for c in columns)
            )
        return self.spark.createDataFrame(data)

    def _read_jdbc(
        self,
        reader: psycopg.Connection,
        columns: list[pgtypes.Column],
        table: TableMap,
        snapshot_id: str,
        partitions: int,
        url: str,
        props: dict[str, str],
    ) -> DataFrame:
        first = next(c for c in columns if c.is_key)
        init = (
            "set transaction isolation level repeatable read read only;"
            f" set transaction snapshot '{snapshot_id}'; {TEXT_SETTINGS}"
        )
        options = {**props, "sessionInitStatement": init, "fetchsize": "10000"}
        if first.spark_type in INTEGER_KEYS and partitions > 1:
            bounds_query = sql.SQL("select min({0}), max({0}) from {1}.{2}").format(
                sql.Identifier(first.name), sql.Identifier(table.schema), sql.Identifier(table.name)
            )
            low, high = reader.execute(bounds_query).fetchone()
            if low is not None and high > low:
                extra = sql.SQL("{} as __part, ").format(sql.Identifier(first.name))
                subquery = (
                    f"({_text_select(columns, table, extra.as_string(reader)).as_string(reader)}) s"
                )
                frame = self.spark.read.jdbc(
                    url,
                    subquery,
                    column="__part",
                    lowerBound=low,
                    upperBound=high + 1,
                    numPartitions=partitions,
                    properties=options,
                )
                return frame.drop("__part")
        subquery = f"({_text_select(columns, table).as_string(reader)}) s"
        return self.spark.read.jdbc(url, subquery, properties=options)

    def _typed(self, raw: DataFrame, columns: list[pgtypes.Column]) -> DataFrame:
        """The columns cast from text as event values are, and the reason a row cannot be."""
        casts = [
            decode.cast_text(F.col(quote(c.name)), c.spark_type).alias(c.name) for c in columns
        ]
        failed = [
            F.when(F.col(quote(c.name)).isNotNull() & cast.isNull(), F.lit(c.name))
            for c, cast in zip(columns, casts, strict=True)
        ]
        reason = F.concat(
            F.lit("snapshot: value does not cast to the column type: "),
            F.concat_ws(", ", *failed),
        )
        any_failed = decode.any_of([f.isNotNull() for f in failed])
        raw_json = F.to_json(F.struct(*[F.col(quote(c.name)) for c in columns]))
        return raw.select(
            *casts,
            F.when(any_failed, reason).alias("__reason"),
            F.when(any_failed, raw_json).alias("__raw"),
        )

    def _quarantine(self, typed: DataFrame, table: TableMap, count: int) -> None:
        """Rows with a value that does not cast go to the quarantine table, as ev_type
        'snapshot' with the row's text values as JSON in ev_data."""
        bad = typed.where(F.col("__reason").isNotNull())
        values = {
            "ev_type": F.lit("snapshot"),
            "ev_data": F.col("__raw"),
            "ev_extra1": F.lit(table.source),
            "reason": F.col("__reason"),
        }
        frame = quarantine.conform(bad, values)
        quarantine.append(self.spark, self.pipeline.table(self.pipeline.quarantine), frame)
        log.warning(
            "%d row(s) of %s do not cast to their column types: quarantined", count, table.source
        )
