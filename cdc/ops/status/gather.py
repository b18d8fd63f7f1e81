"""A pipeline's status gathered in one pass: the queue and its consumers from PostgreSQL
(cdc.ops.status.queries), each target table from its Delta log (delta-rs, no JVM), the
quarantine, the failing marks and the snapshots' progress; then its health judged."""

from __future__ import annotations

import datetime as dt

import psycopg

from cdc.config import Pipeline
from cdc.ops.status.model import (
    MAX_PENDING_AGE,
    ConsumerState,
    RefusedTable,
    Status,
    TableState,
    health,
)
from cdc.ops.status.queries import consumers, drain_lock_held, queue_state
from cdc.pg import source
from cdc.pg.consumer import Consumer
from cdc.spark import resolve_settings
from cdc.targets import failing, quarantine, readers, snapshots
from cdc.targets.delta import object_store
from cdc.targets.delta_table import LocalTable, needs_mapping
from cdc.targets.table import app_id, legacy_app_id


def _consumer_state(
    conn: psycopg.Connection, pipeline: Pipeline
) -> tuple[ConsumerState, list[ConsumerState]]:
    """The pipeline's consumer, and the queue's other consumers."""
    src = pipeline.source
    found = consumers(conn, src.engine, src.queue)
    mine = next((c for c in found if c.consumer == src.consumer), None)
    state = mine if mine is not None else ConsumerState(src.consumer, registered=False)
    state.draining = drain_lock_held(conn, pipeline)
    return state, [c for c in found if c.consumer != src.consumer]


def collect(pipeline: Pipeline, max_pending_age: float = MAX_PENDING_AGE) -> Status:
    """The pipeline's status, its health judged with the threshold max_pending_age (s)."""
    # targets in object storage are read by delta-rs with the file's S3A settings
    object_store.configure(resolve_settings(pipeline.spark))
    src = pipeline.source
    with psycopg.connect(src.dsn, autocommit=True) as conn:
        queue = queue_state(conn, src.engine, src.queue)
        consumer, others = _consumer_state(conn, pipeline)
        incarnation = source.incarnation(conn, src)
        position = Consumer.for_source(conn, src).position_time()
    quarantined = quarantine.open_counts_of(pipeline)  # replayed and discarded not counted
    marks = failing.read_local(pipeline.table(pipeline.failing_table))
    copies = snapshots.read_local(pipeline.table(snapshots.table_name(pipeline.quarantine)))
    status = Status(queue, consumer)
    if position is not None:
        status.consistent_tick = position[0]
        status.consistent_tick_time = position[1].astimezone(dt.UTC).isoformat()
    status.orphans = [
        c for c in others if c.pending_age_s is not None and c.pending_age_s > max_pending_age
    ]
    for t in pipeline.tables:
        ref = pipeline.table(t.target)
        table = LocalTable.open(ref)
        state = TableState(t.source, t.target, t.mode, ref.location, exists=table is not None)
        if table is not None:
            state.delta_version = table.version()
            state.last_tick = table.committed(app_id(src, incarnation, t.target))
            if state.last_tick is None and incarnation is not None:  # drained before upgrade
                state.last_tick = table.committed(legacy_app_id(src, t.target))
            state.rows = table.rows()
            state.column_mapping = table.is_mapped()
            names = [f.name for f in table.table.schema().fields]
            state.mapping_unneeded = state.column_mapping and not any(map(needs_mapping, names))
            state.readers = readers.verdicts(table)
            state.type_widening = readers.TYPE_WIDENING in table.features()
        state.quarantined = quarantined.get(t.source, 0)
        if consumer.dead_letters is not None:
            state.dead_letters = consumer.dead_by_table.get(t.source, 0)
        mark = marks.get(t.target)
        if mark is not None:
            state.failing = True
            state.failing_reason = mark.reason
            state.failing_since_tick = mark.tick_id
        copy = copies.get(t.target)
        if copy is not None:
            state.snapshot, state.snapshot_rows = copy.state, copy.rows
            state.snapshot_reason = copy.reason
        status.tables.append(state)
    status.refused = [
        RefusedTable(r.source, r.target, r.reason, quarantined.get(r.source, 0))
        for r in pipeline.refused
    ]
    known = {t.source for t in pipeline.tables} | {r.source for r in pipeline.refused}
    status.quarantined_other = sum(n for k, n in quarantined.items() if k not in known)
    status.health = health(status, max_pending_age)
    return status
