"""Delta maintenance of a pipeline's tables: OPTIMIZE (files compacted, and ordered by the first
key column for kinds that ask for it: the column of the drain's pruning range) and VACUUM,
on a schedule.

Both run beside a drain. Delta commits optimistically: when a drain's MERGE and an OPTIMIZE
touch the same files, one of them fails with a concurrent-modification error and nothing of
it is committed. Maintenance retries its step; the drain retries its table (its writes are
idempotent). An OPTIMIZE holds its source table's lock (cdc.pg.source.table_locks): the
drain's batches of that table wait for it, those of other tables go on; without it, small
batches written from the driver every second would make a longer OPTIMIZE retry without
end. VACUUM only deletes files that left the table more than the retention ago
(7 days by default), longer than any batch reads them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial

import psycopg
from pyspark.sql import SparkSession

from cdc.config import Pipeline
from cdc.errors import ConfigError
from cdc.pg import pgtypes
from cdc.pg import source as source_module
from cdc.progress import Progress
from cdc.targets import delta_table, registry

log = logging.getLogger("cdc.maintain")

DEFAULT_RETAIN_HOURS = 168


@dataclass
class Maintained:
    target: str
    files_before: int
    files_after: int
    vacuumed: bool


def maintain(
    pipeline: Pipeline,
    spark: SparkSession,
    targets: list[str] | None = None,
    optimize: bool = True,
    vacuum: bool = True,
    retain_hours: int = DEFAULT_RETAIN_HOURS,
) -> list[Maintained]:
    """OPTIMIZE and VACUUM the chosen targets (default: all of them, and the quarantine)."""
    maps = {t.target: t for t in pipeline.tables}
    chosen = targets or [*maps, pipeline.quarantine]
    unknown = [t for t in chosen if t not in maps and t != pipeline.quarantine]
    if unknown:
        raise ConfigError(f"not a target of the configuration: {', '.join(unknown)}")
    done = []
    # tables done / chosen, ETA: a line every few seconds, and the summary (cdc.progress)
    progress = Progress("maintain", "tables", len(chosen))
    with psycopg.connect(pipeline.source.dsn, autocommit=True) as conn:
        for name in chosen:
            ref = pipeline.table(name)
            if not delta_table.exists(spark, ref):
                log.info("%s: no table yet", name)
                progress.add(1)
                continue
            order = None
            if name in maps and registry.kind(maps[name].mode).zorder_by_key:
                table = maps[name]
                cols = pgtypes.columns(conn, table.schema, table.name)
                order = next((c.name for c in cols if c.is_key), None)
            before = delta_table.files(spark, ref)
            if optimize:
                step = partial(delta_table.optimize, spark, ref, order)
                # the drain's batches of the table wait meanwhile: small batches commit
                # faster than an OPTIMIZE, which each of their rewrites would make retry
                sources = [maps[name].source] if name in maps else []
                with source_module.table_locks(conn, pipeline.source, sources, "maintain"):
                    delta_table.retry_conflicts(step, f"optimize {name}")
            if vacuum:
                step = partial(delta_table.vacuum, spark, ref, retain_hours)
                delta_table.retry_conflicts(step, f"vacuum {name}")
            after = delta_table.files(spark, ref)
            log.debug("%s: %d file(s) -> %d", name, before, after)  # cdc maintain prints it
            done.append(Maintained(name, before, after, vacuum))
            progress.add(1)
    progress.finish()
    return done
