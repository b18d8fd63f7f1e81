"""``cdc resync SCHEMA.TABLE``: recovers a failing table from a new snapshot.

Why it is consistent: the resync takes the consumer's drain lock (no batch is applied
meanwhile), reads the consumer's position P (its last finished tick), overwrites the mirror
target(s) with a snapshot S of the table taken after P (cdc.pipeline.snapshot), and clears
the failing marks, all before it releases the lock. Every event quarantined while the table
was failing belongs to a batch up to P: it committed before tick P, so S shows its effect,
and the quarantined events are superseded. The batches after P hold every change committed
after S, plus some S already shows, which fold to the same rows (see cdc.pipeline.snapshot).
A crash before the marks are cleared leaves the table failing (its events keep going to the
quarantine): run the resync again. History targets of the table are cleared too; the events
of the failing period stay in the quarantine only (a history cannot be re-read from the
source)."""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass

import psycopg
from pyspark.sql import SparkSession

from cdc.config import Pipeline, TableMap
from cdc.errors import ConfigError
from cdc.pg import source as source_module
from cdc.pg.consumer import Consumer
from cdc.pipeline import snapshot
from cdc.targets import failing, registry

log = logging.getLogger("cdc.resync")


@dataclass(frozen=True)
class ResyncResult:
    table: str
    rows: int
    quarantined: int
    position: int | None  # the consumer's tick the snapshot supersedes
    cleared: tuple[str, ...]  # targets that were failing
    seconds: float


def _resolved(conn: psycopg.Connection, pipeline: Pipeline, table: TableMap) -> TableMap:
    """The table under its current name when the configuration names an earlier one."""
    names = source_module.table_names(conn, pipeline.source, pipeline.tables)
    current = names.current.get(table.source)
    if current is None:
        return table
    return dataclasses.replace(table, schema=current[0], name=current[1])


def resync(
    pipeline: Pipeline,
    spark: SparkSession,
    table: str,
    partitions: int = snapshot.PARTITIONS,
    progress: bool = True,
) -> ResyncResult:
    """Re-snapshots the table's mirror targets and clears the failing marks of its targets."""
    source = pipeline.source_name(table)
    maps = [t for t in pipeline.tables if t.source == source]
    if not maps:
        known = ", ".join(sorted({t.source for t in pipeline.tables}))
        raise ConfigError(f"{table} is not in the configuration's [[tables]] (listed: {known})")
    src = pipeline.source
    marks = pipeline.table(pipeline.failing_table)
    loader = snapshot.Snapshot(pipeline, spark, progress=progress)
    started = time.monotonic()
    rows = bad = 0
    with psycopg.connect(src.dsn, autocommit=True) as control:
        mirrors = [_resolved(control, pipeline, t) for t in maps if registry.holds_rows(t.mode)]
        if mirrors:
            snapshot._check_captured(control, mirrors[0], src)
        queue = Consumer.for_source(control, src)
        queue.register()
        with source_module.drain_lock(control, src, f"resync of {source}"):
            position = queue.position()
            was_failing = failing.read(spark, marks)
            if mirrors:
                rows, bad = loader._copy(mirrors, partitions)
            cleared = tuple(t.target for t in maps if t.target in was_failing)
            if cleared:
                failing.clear(spark, marks, source, list(cleared), position)
    result = ResyncResult(source, rows, bad, position, cleared, time.monotonic() - started)
    log.info("resync of %s: %d rows at tick %s, cleared %s", source, rows, position, cleared or "-")
    return result
