"""Every table of a pipeline read as of one tick: no source transaction seen in one table
and not in another.

Why it holds: a tick is a snapshot of which source transactions committed. The drain applies
a batch (the ticks ``(prev, tick]``) to each table it touches in one Delta commit per table,
marked with the batch's tick (cdc.targets.table.Commit), and finishes the batch only once
every table committed. So, for a tick T at or below the consumer's last finished tick
(``last_consistent_tick``), each table's last version whose tick is T or lower holds exactly
the transactions committed by T (by the last batch end at or below T: a batch that joined
several ticks has no version between them), whatever the drain does meanwhile: between two
table commits of a batch, killed there, or redoing the batch. A reader that pins every table
to that version (``pinned_versions``) sees whole transactions. A tick above the consumer's
position is refused: some tables may hold its batch and others not yet.

The tick of each version (``commit_ticks``): a batch's commit records its tick and appId
in commitInfo.userMetadata (``cdc.tick``, ``cdc.app``: DESCRIBE HISTORY shows them, and
delta-rs' ``history()``); a commit written before that was recorded is known by the ``txn``
action of its JSON file in the log. Only the pipeline's own appIds count (its queue's
current incarnation, and the appId of versions without incarnations). A commit that carries
no tick of the pipeline inherits the tick of the batch commit before it; those before the
table's first batch commit count as before every tick. Such commits are: OPTIMIZE and
VACUUM, a column added or a property set before a batch's MERGE, a schema rewrite, maintain's
purge of rows marked deleted, snapshot chunks, a resync, a replay of the quarantine, and the
writes of other consumers or pipelines to the table. The first ones change no row; the
others show from their commit on, whatever tick is asked for (docs: the limits).

The rule (``pinned_version``): a tick T pins the version just before the table's first
commit of a tick above T, the latest version when there is none (the common case, told by
the table's ``txn`` state alone, without reading its history); None when the table's first
version is already a batch's of a later tick, or there is no table.

The Python API: ``spark_tables`` (Spark DataFrames read with versionAsOf) and
``arrow_tables`` (pyarrow Tables read by delta-rs at the version: path and object-store
targets; a catalog target is Spark's), each for a tick or, by default, the last consistent
one. ``cdc sql --at-tick N`` and ``--consistent`` use ``pinned_versions`` and
``last_consistent_tick``.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import psycopg

from cdc.config import Pipeline, Source
from cdc.errors import ConfigError
from cdc.pg import source as source_module
from cdc.pg.consumer import Consumer
from cdc.targets.delta import history, object_store  # no Spark: cdc sql's datafusion engine
from cdc.targets.table import APP_KEY, TICK_KEY, TableRef, app_id, legacy_app_id

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "HISTORY_PAGE",
    "TickMap",
    "app_ids",
    "arrow_tables",
    "commit_ticks",
    "decided",
    "last_consistent_tick",
    "pinned_version",
    "pinned_versions",
    "spark_tables",
    "table_version",
    "tick_of",
    "unrecorded",
]

TickMap = list[tuple[int, int | None]]  # (version, its batch's tick or None), version order
HISTORY_PAGE = 32  # commits read first when the history must be read; four times more each time


def app_ids(source: Source, incarnation: int | None, target: str) -> set[str]:
    """The appIds a target's batch commits of this pipeline carry: the queue's current
    incarnation's, and the one of versions without incarnations."""
    return {app_id(source, incarnation, target), legacy_app_id(source, target)}


def _recorded(info: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON object a commit's userMetadata holds ({} for none, or other text)."""
    text = info.get("userMetadata")
    if not text:
        return {}
    try:
        found = json.loads(text)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def tick_of(info: Mapping[str, Any], apps: Collection[str]) -> int | None:
    """The tick a commit (its commitInfo) records for one of apps, None when it records
    none (a commit of another kind, another writer's, or one written before ticks were
    recorded)."""
    found = _recorded(info)
    tick = found.get(TICK_KEY)
    if found.get(APP_KEY) not in apps or not isinstance(tick, int):
        return None
    return tick


def unrecorded(history: Iterable[Mapping[str, Any]], apps: Collection[str]) -> list[int]:
    """The commits whose tick, if any, only their ``txn`` action can tell: those that record
    none of apps, below the first one that does (a drain that records ticks records them in
    every batch commit from then on)."""
    infos = list(history)
    recording = [int(i["version"]) for i in infos if _recorded(i).get(APP_KEY) in apps]
    since = min(recording, default=None)
    return sorted(
        int(i["version"])
        for i in infos
        if (since is None or int(i["version"]) < since) and tick_of(i, apps) is None
    )


def commit_ticks(
    history: Iterable[Mapping[str, Any]],
    apps: Collection[str],
    txns: Mapping[int, Mapping[str, int]] | None = None,
) -> TickMap:
    """(version, tick or None) of each commit of history (commitInfo dicts with their
    ``version``, in any order), in version order: the tick its userMetadata records for one
    of apps, else the one its ``txn`` actions (txns: version -> appId -> txn version) give
    one of apps, else None."""
    found: dict[int, int | None] = {}
    for info in history:
        version = int(info["version"])
        tick = tick_of(info, apps)
        if tick is None and txns is not None:
            marks = [v for a, v in txns.get(version, {}).items() if a in apps]
            tick = max(marks) if marks else None
        found[version] = tick
    return sorted(found.items())


def decided(ticks: TickMap, tick: int) -> bool:
    """Whether the commits of ticks (the latest ones of a table) are enough to pin it at
    tick: they hold no commit of a later tick, or one of tick or earlier (ticks grow with
    versions, so every commit before it is earlier too), or they start at version 0."""
    if not ticks or ticks[0][0] == 0:
        return True
    if not any(t is not None and t > tick for _, t in ticks):
        return True
    return any(t is not None and t <= tick for _, t in ticks)


def pinned_version(ticks: TickMap, tick: int) -> int | None:
    """The version a tick pins, from the commits of ticks (see ``decided``): the one before
    the first commit of a later tick, the latest when there is none; None when that first
    commit is version 0, or there are no commits."""
    if not ticks:
        return None
    later = [v for v, t in ticks if t is not None and t > tick]
    if not later:
        return ticks[-1][0]
    first = min(later)
    return first - 1 if first > 0 else None


def table_version(ref: TableRef, apps: Collection[str], tick: int) -> int | None:
    """The version of the table that tick pins (``pinned_version``), None without a table.
    The table's ``txn`` state answers when it holds no later tick; else its history is read
    from the latest commit back, in growing pages, until it decides."""
    table = history.open_log(ref)
    if table is None:
        return None
    held = history.held_tick(table, apps)
    if held is None or held <= tick:
        return history.latest_version(table)
    limit = HISTORY_PAGE
    while True:
        infos = history.commit_infos(table, limit)
        txns = history.txn_actions(ref, unrecorded(infos, apps))
        ticks = commit_ticks(infos, apps, txns)
        if decided(ticks, tick):
            return pinned_version(ticks, tick)
        if len(infos) < limit:  # the log keeps no older commit
            raise ConfigError(
                f"{ref.location}: tick {tick} is older than the table's log keeps (its"
                f" earliest commit is version {ticks[0][0]}, of a later tick): its"
                " delta.logRetentionDuration removed the commits a read at that tick needs"
            )
        limit *= 4


def last_consistent_tick(pipeline: Pipeline) -> tuple[int, dt.datetime] | None:
    """The last tick whose batch the pipeline's consumer finished (every table can be read
    as of it), and the time of that tick; None when the consumer is not registered."""
    src = pipeline.source
    with psycopg.connect(src.dsn, autocommit=True) as conn:
        return Consumer.for_source(conn, src).position_time()


def _configure_storage(pipeline: Pipeline) -> None:
    """delta-rs reaches object-store targets with the pipeline file's S3A settings (as
    ``cdc status`` does; a Spark session has handed its own already)."""
    from cdc.spark import resolve_settings

    object_store.configure(resolve_settings(pipeline.spark))


def pinned_versions(pipeline: Pipeline, tick: int) -> dict[str, int | None]:
    """For each target of the pipeline, its version as of tick (see the module docstring):
    the last Delta version whose tick is tick or lower, None when the table had no version
    by then (or has no table). A tick above the consumer's last finished one is refused:
    its batch may be in some tables and not yet in others."""
    src = pipeline.source
    with psycopg.connect(src.dsn, autocommit=True) as conn:
        position = Consumer.for_source(conn, src).position_time()
        incarnation = source_module.incarnation(conn, src)
    if position is None:
        raise ConfigError(
            f"consumer {src.consumer} of queue {src.queue} is not registered: no tick is"
            " consistent before its first drain"
        )
    if tick > position[0]:
        raise ConfigError(
            f"tick {tick} is not consistent yet: consumer {src.consumer} has finished the"
            f" batches up to tick {position[0]} (the last consistent tick); a later tick's"
            " batch may be in some tables and not yet in others"
        )
    _configure_storage(pipeline)
    return {
        t.target: table_version(pipeline.table(t.target), app_ids(src, incarnation, t.target), tick)
        for t in pipeline.tables
    }


def _tick(pipeline: Pipeline, tick: int | None) -> int:
    """tick, or the last consistent one when None."""
    if tick is not None:
        return tick
    found = last_consistent_tick(pipeline)
    if found is None:
        src = pipeline.source
        raise ConfigError(
            f"consumer {src.consumer} of queue {src.queue} is not registered: no tick is"
            " consistent before its first drain"
        )
    return found[0]


def spark_tables(
    spark: SparkSession, pipeline: Pipeline, tick: int | None = None
) -> dict[str, DataFrame]:
    """Each target's rows as of tick (the last consistent tick when None), as a Spark
    DataFrame read at its pinned version; a target with no version by then is left out.
    To know which tick None gave, pass the one ``last_consistent_tick`` returns."""
    from cdc.targets import delta_table  # Spark's read (the rest of this module needs no Spark)

    pins = pinned_versions(pipeline, _tick(pipeline, tick))
    return {
        target: delta_table.read(spark, pipeline.table(target), version)
        for target, version in pins.items()
        if version is not None
    }


def arrow_tables(pipeline: Pipeline, tick: int | None = None) -> dict[str, pa.Table]:
    """Each target's rows as of tick (the last consistent tick when None), as a pyarrow
    Table read by delta-rs at its pinned version, without a JVM: path and object-store
    targets (a catalog target is read through its catalog, by Spark: ``spark_tables``); a
    target with no version by then is left out."""
    named = [t.target for t in pipeline.tables if pipeline.table(t.target).name]
    if named:
        raise ConfigError(
            f"catalog target(s) {', '.join(named)}: read them with spark_tables (Spark);"
            " arrow_tables reads path and object-store targets"
        )
    pins = pinned_versions(pipeline, _tick(pipeline, tick))
    return {
        target: history.rows_at(pipeline.table(target), version)
        for target, version in pins.items()
        if version is not None
    }
