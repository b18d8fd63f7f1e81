"""Which engine answers `cdc sql`, and the versions a read at a tick pins.

The engines: ``datafusion`` (delta-rs' QueryBuilder, DataFusion SQL, no JVM:
cdc.ops.query_datafusion) and ``spark`` (Spark SQL: cdc.ops.query). ``--engine auto``, the
default, takes datafusion when

- every table the pipeline names (its targets and the quarantine) is a path delta-rs reaches:
  on the local file system, or in an object store it is set up for (``s3a://``, ``s3://``,
  ``s3n://``: cdc.targets.delta.object_store), not a catalog name (Spark's catalog names
  it), and
- the master is local (``spark.master`` of ``[spark]`` and ``--conf``, ``local[2]`` when
  none is given): a pipeline on a cluster keeps its queries on the cluster,

and then, once the tables are opened, none has a feature delta-rs' QueryBuilder refuses
(type widening: cdc.targets.readers), and the query is not one only Spark answers (Delta's
``DESCRIBE DETAIL``, ``DESCRIBE HISTORY``, ``SHOW TBLPROPERTIES``, time travel, a table
named ``delta.`path```: SPARK_ONLY); else spark. The choice and its reason are logged
(``-v``). ``--engine datafusion`` leaves out (with a warning) the tables it cannot reach;
``--engine spark`` is Spark whatever the tables.

``--at-tick N`` and ``--consistent`` (the last tick whose batch is finished) pin every table
to its version as of the tick (cdc.ops.at_tick: the last version whose tick is at or below
it; None when the table had no data by then, read as its columns without rows); a table
``pinned_versions`` does not name is read at its latest version.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cdc.config import Pipeline
from cdc.errors import ConfigError
from cdc.targets.delta import object_store

__all__ = [
    "AUTO",
    "DATAFUSION",
    "ENGINES",
    "SPARK",
    "Choice",
    "Pins",
    "choose",
    "pins",
    "settings",
    "spark_only",
    "unreachable",
]

log = logging.getLogger(__name__)

AUTO, DATAFUSION, SPARK = "auto", "datafusion", "spark"
ENGINES = (AUTO, DATAFUSION, SPARK)
# statements only Spark answers: Delta's own (DESCRIBE DETAIL / HISTORY, SHOW TBLPROPERTIES),
# time travel, a table named by its path (delta.`/path`)
SPARK_ONLY = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"^\s*desc(ribe)?\s+(detail|history)\b",
        r"^\s*show\s+tblproperties\b",
        r"\b(version|timestamp)\s+as\s+of\b",
        r"\bdelta\s*\.\s*`",
    )
)


@dataclass(frozen=True)
class Choice:
    """The engine that answers, and why (a clause, for the log)."""

    engine: str
    reason: str


def settings(pipeline: Pipeline, overrides: Sequence[tuple[str, str]] = ()) -> dict[str, str]:
    """The Spark settings the choice and delta-rs read, as a session of the pipeline would
    have them ([spark], ``${NAME}`` read from the environment, --conf over them): the master
    and the S3A settings (cdc.targets.delta.object_store); the others are Spark's to read."""
    from cdc.spark import MASTER, resolve_settings

    def wanted(name: str) -> bool:
        return name == MASTER or "fs.s3a." in name

    given = [(k, v) for k, v in pipeline.spark if wanted(k)]
    return {**resolve_settings(given), **{k: v for k, v in overrides if wanted(k)}}


def targets(pipeline: Pipeline) -> list[str]:
    """The tables a query can name: every target, then the quarantine."""
    return [*(t.target for t in pipeline.tables), pipeline.quarantine]


def unreachable(pipeline: Pipeline) -> dict[str, str]:
    """target -> why delta-rs cannot read it here, for each table it cannot."""
    found = {}
    for target in targets(pipeline):
        ref = pipeline.table(target)
        if ref.name:
            found[target] = f"{target} is a catalog target (its name is Spark's catalog's)"
        elif _remote(ref.location) and not object_store.is_object_store(ref.location):
            scheme = ref.location.partition("://")[0]
            found[target] = f"{target} is at a {scheme}:// URL, which delta-rs is not set up for"
    return found


def _remote(location: str) -> bool:
    return "://" in location and not location.startswith("file:")


def spark_only(statement: str | None) -> str | None:
    """What makes a statement Spark's (Delta's statements and time travel, a table named by
    its path), None when nothing does."""
    for pattern in SPARK_ONLY:
        found = pattern.search(statement or "")
        if found:
            return " ".join(found[0].split()).lower()
    return None


def choose(
    pipeline: Pipeline, requested: str, conf: Mapping[str, str], statement: str | None = None
) -> Choice:
    """The engine for requested (auto, datafusion or spark), by the pipeline's tables and
    master and the statement (None: interactive; see the module doc)."""
    from cdc.spark import LOCAL_MASTER, MASTER

    if requested not in ENGINES:
        raise ConfigError(f"--engine must be one of {', '.join(ENGINES)}, not {requested!r}")
    if requested != AUTO:
        return Choice(requested, f"--engine {requested}")
    own = spark_only(statement)
    if own:
        return Choice(SPARK, f"the statement is Spark's own ({own})")
    master = conf.get(MASTER, LOCAL_MASTER)
    if not master.startswith("local"):
        return Choice(SPARK, f"the master is {master}, not local: the queries run on it")
    far = unreachable(pipeline)
    if far:
        return Choice(SPARK, f"{'; '.join(far.values())}")
    return Choice(DATAFUSION, f"every table is a path delta-rs reads and the master is {master}")


@dataclass(frozen=True)
class Pins:
    """The versions of a read at a tick: target -> version (None: no data yet)."""

    tick: int
    versions: dict[str, int | None] = field(default_factory=dict)
    time: dt.datetime | None = None  # the tick's time, when known

    def describe(self) -> str:
        """One line: the tick and each table's version."""
        when = f" ({self.time:%Y-%m-%d %H:%M:%S %Z})" if self.time is not None else ""
        each = ", ".join(
            f"{t}@{'empty' if v is None else v}" for t, v in sorted(self.versions.items())
        )
        return f"tick {self.tick}{when}: {each or 'no table'}"


def pins(pipeline: Pipeline, at_tick: int | None, consistent: bool) -> Pins | None:
    """The versions to read for --at-tick N or --consistent (None for neither: the latest)."""
    if at_tick is None and not consistent:
        return None
    from cdc.ops import at_tick as ticks

    when = None
    if consistent:
        found = ticks.last_consistent_tick(pipeline)
        if found is None:
            raise ConfigError(
                f"--consistent: consumer {pipeline.source.consumer} of queue"
                f" {pipeline.source.queue} is not registered: no tick is consistent before its"
                " first drain"
            )
        tick, when = found
    else:
        assert at_tick is not None
        if at_tick < 0:
            raise ConfigError(f"--at-tick takes a tick id (0 or more), not {at_tick}")
        tick = at_tick
    pinned = Pins(tick, dict(ticks.pinned_versions(pipeline, tick)), when)
    log.info("cdc sql: every table as of %s", pinned.describe())
    return pinned
