"""A batch's changes as versions (SCD type 2, the rules in cdc.targets.scd2) on the driver,
over Arrow and numpy: the same steps and output as cdc.engines.spark.versions, without a
Spark job.

Every step is a row position: the batch's transactions per key (reduced like the fold,
cdc.engines.arrow.fold) and the target's current versions of their keys (step -1). Sorted by
key and step, carrying forward is a running maximum of positions within each key's run, and
a version is a run of steps that opens with a change. Values never leave Arrow: they are
``take``\\ n from one pool (the decoded rows, the current versions, a null row).

Only for keys that compare as they are, and without a TRUNCATE (the Arrow decoder leaves
both to Spark).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cdc import rows as contract
from cdc.pg.pgtypes import Column, arrow_type
from cdc.rows import CURRENT, DELETED, END, START, Versioning, merge_key, meta, present, value

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

__all__ = ["versions"]

ROW, TOMBSTONE, GAP = 0, 1, 2  # what a step leaves the key as


def _carried(valid: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per step, the position of the last valid step of its key's run up to it (-1: none);
    starts: each step's run start."""
    import numpy as np

    positions = np.where(valid, np.arange(len(valid)), -1)
    last = np.maximum.accumulate(positions) if len(valid) else positions
    return np.where(last >= starts, last, -1)


def _same(a: pa.Array, b: pa.Array) -> np.ndarray:
    """Per row, whether a and b hold the same value (null equals null, NaN equals NaN)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_nested(a.type):  # no kernel compares lists or structs: as Python values
        return np.array([x == y for x, y in zip(a.to_pylist(), b.to_pylist(), strict=True)])
    both_null = pc.and_(pc.is_null(a), pc.is_null(b))
    equal = pc.fill_null(pc.equal(a, b), False)
    if pa.types.is_floating(a.type):
        equal = pc.or_(equal, pc.fill_null(pc.and_(pc.is_nan(a), pc.is_nan(b)), False))
    return pc.or_(both_null, equal).to_numpy(zero_copy_only=False)


def versions(
    rows: pa.Table, current: pa.Table, columns: list[Column], rules: Versioning
) -> pa.Table:
    """Versioned rows (cdc.rows) of decoded rows and the target's current versions of the
    table (named as its columns; those of other keys are left out here)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if rules.truncated_at is not None or any(contract.restates_key(c) for c in columns):
        raise ValueError("versions: a TRUNCATE, or a key compared in a normalised form")
    keys = [i for i, c in enumerate(columns) if c.is_key]
    types = [arrow_type(c.spark_type) for c in columns]
    time_type = arrow_type("timestamp")
    ops = rows.column(meta("op"))
    rows = rows.filter(pc.is_in(ops, pa.array(["I", "U", "D"])))
    n_rows = rows.num_rows

    # -- the transactions of each key, as the fold reduces them
    ev_ids = rows.column(meta("ev_id")).to_numpy()
    by = rows.select([value(i) for i in keys] + [meta("ev_txid")])
    order = pc.sort_indices(by, sort_keys=[(n, "ascending") for n in by.column_names]).to_numpy()
    ops = rows.column(meta("op"))
    is_insert = pc.equal(ops, "I").to_numpy(zero_copy_only=False)[order]
    is_delete = pc.equal(ops, "D").to_numpy(zero_copy_only=False)[order]
    ev = ev_ids[order]
    new_txn = np.zeros(n_rows, dtype=bool)
    if n_rows:
        sorted_by = by.take(pa.array(order))
        for name in by.column_names:
            column = sorted_by.column(name).combine_chunks()
            same = pc.fill_null(pc.equal(column.slice(1), column.slice(0, n_rows - 1)), False)
            new_txn[0] = True
            new_txn[1:] |= ~same.to_numpy(zero_copy_only=False)
    starts = np.flatnonzero(new_txn)
    none = np.int64(-1)
    if n_rows:
        n = np.add.reduceat(is_insert.astype(np.int64) - is_delete, starts)
        reset = np.maximum.reduceat(np.where(is_insert | is_delete, ev, none), starts)
        insert = np.maximum.reduceat(np.where(is_insert, ev, none), starts)
        last = np.maximum.reduceat(ev, starts)
    else:
        n = reset = insert = last = np.zeros(0, dtype=np.int64)
    # the row (position in rows) of an event, by its ev_id (-1 for none)
    sorter = np.argsort(ev_ids, kind="stable")
    sorted_ev = ev_ids[sorter]

    def row_of(evs: np.ndarray) -> np.ndarray:
        found = np.searchsorted(sorted_ev, np.maximum(evs, 0)) if n_rows else evs
        return np.where(evs >= 0, sorter[np.minimum(found, max(n_rows - 1, 0))], -1)

    last_row = row_of(last)
    exists = np.where(
        (reset < 0) | (n > 0),
        1,
        np.where(n < 0, 0, np.where((insert >= 0) & (insert == reset), 1, -1)),
    )
    txn_cols: dict[int, np.ndarray] = {}
    for i, c in enumerate(columns):
        if c.is_key:
            continue
        carries = pc.fill_null(rows.column(present(i)), False).to_numpy(zero_copy_only=False)
        at = (
            np.maximum.reduceat(np.where(carries[order] & ~is_delete, ev, none), starts)
            if n_rows
            else np.zeros(0, dtype=np.int64)
        )
        has = (at >= 0) & ((insert < 0) | (at >= insert))
        txn_cols[i] = np.where(has, row_of(at), -1)

    # -- the target's current versions of the batch's keys: step -1, in the pool after rows
    named = pa.table(
        {value(i): current.column(columns[i].name).cast(types[i]) for i in range(len(columns))}
        | {START: current.column(START).cast(time_type)}
        | ({DELETED: current.column(DELETED)} if rules.tombstones else {})
    )
    batch_keys = (
        rows.select([value(i) for i in keys]).group_by([value(i) for i in keys]).aggregate([])
    )
    # joined on the keys alone (Arrow's join carries no list or struct column)
    positions = named.select([value(i) for i in keys]).append_column(
        "__row", pa.array(np.arange(named.num_rows, dtype=np.int64))
    )
    kept = positions.join(batch_keys, [value(i) for i in keys], join_type="left semi")
    named = named.take(pa.array(np.sort(kept.column("__row").to_numpy())))
    n_current = named.num_rows
    pool = pa.concat_tables(
        [
            rows.select([value(i) for i in range(len(columns))]).cast(
                pa.schema([(value(i), types[i]) for i in range(len(columns))])
            ),
            named.select([value(i) for i in range(len(columns))]),
            pa.table({value(i): pa.nulls(1, types[i]) for i in range(len(columns))}),
        ]
    ).combine_chunks()
    null_row = n_rows + n_current

    # -- every step: the transactions, then the current versions
    step_row = np.concatenate([last_row, np.arange(n_rows, n_rows + n_current)])  # key values
    step_at = np.concatenate([last, np.full(n_current, -1, dtype=np.int64)])
    alive = (
        pc.invert(pc.fill_null(named.column(DELETED), False)).to_numpy(zero_copy_only=False)
        if rules.tombstones
        else np.ones(n_current, dtype=bool)
    )
    step_exists = np.concatenate([exists, alive.astype(np.int64)])
    step_s0 = np.concatenate([np.zeros(len(last), dtype=bool), np.ones(n_current, dtype=bool)])
    times = pa.concat_arrays(
        [
            rows.column(meta("ev_time")).combine_chunks().cast(time_type).take(pa.array(last_row)),
            named.column(START).combine_chunks().cast(time_type),
        ]
    )
    col_index = {
        i: np.concatenate([txn_cols[i], np.arange(n_rows, n_rows + n_current)]) for i in txn_cols
    }
    # sorted by key, then step
    keyed = pool.select([value(i) for i in keys]).take(pa.array(step_row))
    keyed = keyed.append_column("__at", pa.array(step_at))
    order = pc.sort_indices(keyed, sort_keys=[(n, "ascending") for n in keyed.column_names])
    order = order.to_numpy()
    count = len(order)
    step_row, step_at = step_row[order], step_at[order]
    step_exists, step_s0 = step_exists[order], step_s0[order]
    times = times.take(pa.array(order))
    first = np.zeros(count, dtype=bool)
    if count:
        first[0] = True
        sorted_keys = keyed.take(pa.array(order))
        for i in keys:
            column = sorted_keys.column(value(i)).combine_chunks()
            same = pc.fill_null(pc.equal(column.slice(1), column.slice(0, count - 1)), False)
            first[1:] |= ~same.to_numpy(zero_copy_only=False)
    run_start = np.maximum.accumulate(np.where(first, np.arange(count), 0)) if count else first

    # -- carried forward: existence, each column's value
    known = _carried(step_exists >= 0, run_start)
    is_alive = np.where(known >= 0, step_exists[np.maximum(known, 0)] == 1, False)
    state: dict[int, np.ndarray] = {}
    for i, index in col_index.items():
        index = index[order]
        held = _carried(index >= 0, run_start)
        state[i] = np.where(held >= 0, index[np.maximum(held, 0)], null_row)
    leaves = np.where(is_alive, ROW, TOMBSTONE if rules.tombstones else GAP)
    changed = np.zeros(count, dtype=bool)
    if count > 1:
        for i in rules.tracked:
            now, before = state[i][1:], state[i][:-1]
            differs = now != before
            if differs.any():
                column = pool.column(value(i))
                same = _same(column.take(pa.array(now)), column.take(pa.array(before)))
                changed[1:] |= differs & ~same
    previous = np.concatenate([[-1], leaves[:-1]]) if count else leaves
    opens = step_s0 | first | (leaves != previous) | ((leaves == ROW) & changed)

    # -- one row per version: its last step's state; ended by the next version's start
    v_first = np.flatnonzero(opens)
    v_last = np.concatenate([v_first[1:] - 1, [count - 1]]) if count else v_first
    v_next = np.concatenate([v_first[1:], [-1]]) if count else v_first
    ends = (v_next >= 0) & ~first[np.maximum(v_next, 0)] if count else v_next >= 0
    kept = leaves[v_first] != GAP
    v_first, v_last, v_next, ends = v_first[kept], v_last[kept], v_next[kept], ends[kept]
    tomb = leaves[v_first] == TOMBSTONE
    out: dict[str, pa.Array] = {}
    for i in range(len(columns)):
        column = pool.column(value(i))
        if columns[i].is_key:
            out[value(i)] = column.take(pa.array(step_row[v_last]))
        else:
            picked = np.where(tomb, null_row, state[i][v_last])
            out[value(i)] = column.take(pa.array(picked))
    s0 = step_s0[v_first]
    for i in keys:
        picked = np.where(s0, step_row[v_first], null_row)
        out[merge_key(i)] = pool.column(value(i)).take(pa.array(picked))
    out[START] = times.take(pa.array(v_first))
    out[END] = times.take(pa.array(np.where(ends, v_next, 0), mask=~ends))
    out[CURRENT] = pa.array(~ends, pa.bool_())
    out[DELETED] = pa.array(tomb, pa.bool_())
    return pa.table(out)
