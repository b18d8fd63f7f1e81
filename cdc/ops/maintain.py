"""Delta maintenance of a pipeline's tables: OPTIMIZE (files compacted and ordered by the first
key column, the column of the drain's pruning range) and VACUUM, on a schedule.

Both run beside a drain. Delta commits optimistically: when a drain's MERGE and an OPTIMIZE
touch the same files, one of them fails with a concurrent-modification error and nothing of
it is committed. Maintenance retries its step; the drain retries its table (its writes are
idempotent). VACUUM only deletes files that left the table more than the retention ago
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
from cdc.pipeline.decode import quote
from cdc.targets import merge

log = logging.getLogger("cdc.maintain")

DEFAULT_RETAIN_HOURS = 168


@dataclass
class Maintained:
    target: str
    files_before: int
    files_after: int
    vacuumed: bool


def _run(spark: SparkSession, statement: str) -> None:
    spark.sql(statement).collect()


def _files(spark: SparkSession, target: merge.Target) -> int:
    return int(spark.sql(f"describe detail {target.sql_name}").collect()[0]["numFiles"])


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
    with psycopg.connect(pipeline.source.dsn, autocommit=True) as conn:
        for name in chosen:
            target = merge.Target(pipeline.location(name), "maintain", 0)
            if not merge.table_exists(spark, target):
                log.info("%s: no table yet", name)
                continue
            order = ""
            if name in maps and maps[name].mode == "mirror":
                table = maps[name]
                cols = pgtypes.columns(conn, table.schema, table.name)
                first = next((c.name for c in cols if c.is_key), None)
                if first is not None:
                    order = f" zorder by ({quote(first)})"
            before = _files(spark, target)
            if optimize:
                statement = f"optimize {target.sql_name}{order}"
                merge.retry_conflicts(partial(_run, spark, statement), f"optimize {name}")
            if vacuum:
                statement = f"vacuum {target.sql_name} retain {int(retain_hours)} hours"
                merge.retry_conflicts(partial(_run, spark, statement), f"vacuum {name}")
            after = _files(spark, target)
            log.info("%s: %d file(s) -> %d", name, before, after)
            done.append(Maintained(name, before, after, vacuum))
    return done
