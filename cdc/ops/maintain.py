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

``--purge-deleted-older-than AGE`` (``parse_age``: ``30d``, ``12h``...) first deletes, from
each chosen target that keeps deleted rows (``deletes = "soft"``, cdc.targets.mirror), the
rows marked deleted (``__deleted``) at a source time (``__deleted_at``) before now minus
AGE: one Delta DELETE per target, under the table's lock as the OPTIMIZE is; the OPTIMIZE
then compacts the files it rewrote, and VACUUM removes them once they are older than the
retention.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
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
from cdc.targets.mirror import DELETED, DELETED_AT

log = logging.getLogger("cdc.maintain")

DEFAULT_RETAIN_HOURS = 168
# an age: a whole number and its unit
AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_AGE = re.compile(r"([0-9]{1,9})([smhdw])")


def parse_age(text: str) -> dt.timedelta:
    """An age such as ``30d`` or ``12h``: a whole number followed by one unit, s (seconds),
    m (minutes), h (hours), d (days) or w (weeks), nothing else (no sign, space, fraction or
    second unit); ValueError naming the accepted forms otherwise."""
    found = _AGE.fullmatch(text)
    if found is None:
        raise ValueError(
            f"{text!r} is not an age: write a whole number and one unit, s, m, h, d or w"
            " (such as 30d or 12h)"
        )
    seconds = int(found[1]) * AGE_UNITS[found[2]]
    if seconds > dt.timedelta.max.total_seconds():
        raise ValueError(f"{text!r} is longer than any time can be")
    return dt.timedelta(seconds=seconds)


@dataclass
class Maintained:
    target: str
    files_before: int
    files_after: int
    vacuumed: bool
    purged: int | None = None  # rows marked deleted purged (None: not asked of it)


def maintain(
    pipeline: Pipeline,
    spark: SparkSession,
    targets: list[str] | None = None,
    optimize: bool = True,
    vacuum: bool = True,
    retain_hours: int = DEFAULT_RETAIN_HOURS,
    purge_older_than: dt.timedelta | None = None,
) -> list[Maintained]:
    """OPTIMIZE and VACUUM the chosen targets (default: all of them, and the quarantine);
    purge_older_than: first delete the rows marked deleted longer ago than that from those
    of them that keep deleted rows (see the module docstring)."""
    maps = {t.target: t for t in pipeline.tables}
    chosen = targets or [*maps, pipeline.quarantine]
    unknown = [t for t in chosen if t not in maps and t != pipeline.quarantine]
    if unknown:
        raise ConfigError(f"not a target of the configuration: {', '.join(unknown)}")
    purged = {t for t in chosen if t in maps and maps[t].options.soft_deletes}
    if purge_older_than is not None and not purged:
        raise ConfigError(
            "--purge-deleted-older-than: none of the targets maintained keeps deleted rows"
            ' (deletes = "soft" in its [[tables]] entry): nothing to purge'
        )
    # the rows marked before this time go (microseconds since 1970, UTC)
    before = None
    if purge_older_than is not None:
        try:
            cutoff = dt.datetime.now(dt.UTC) - purge_older_than
        except OverflowError:  # before year 1: no row is that old
            cutoff = dt.datetime.min.replace(tzinfo=dt.UTC)
        before = (cutoff - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1)
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
            sources = [maps[name].source] if name in maps else []
            count = None
            if before is not None and name in purged:
                step = partial(delta_table.purge_marked, spark, ref, DELETED, DELETED_AT, before)
                with source_module.table_locks(conn, pipeline.source, sources, "maintain"):
                    count = delta_table.retry_conflicts(step, f"purge {name}")
                log.info("%s: %d row(s) marked deleted purged", name, count)
            files_before = delta_table.files(spark, ref)
            if optimize:
                step = partial(delta_table.optimize, spark, ref, order)
                # the drain's batches of the table wait meanwhile: small batches commit
                # faster than an OPTIMIZE, which each of their rewrites would make retry
                with source_module.table_locks(conn, pipeline.source, sources, "maintain"):
                    delta_table.retry_conflicts(step, f"optimize {name}")
            if vacuum:
                step = partial(delta_table.vacuum, spark, ref, retain_hours)
                delta_table.retry_conflicts(step, f"vacuum {name}")
            after = delta_table.files(spark, ref)
            log.debug("%s: %d file(s) -> %d", name, files_before, after)  # printed
            done.append(Maintained(name, files_before, after, vacuum, count))
            progress.add(1)
    progress.finish()
    return done
