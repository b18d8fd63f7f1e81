"""The fold (cdc.engines.spark.fold) of a batch decoded on the driver, over Arrow and numpy: the
same rules, the same output columns, without a Spark job.

The rows are sorted by key and transaction, and every step is a reduction over contiguous
runs of that order (numpy's ``reduceat``), so no Python code runs per event. Rows are named
by their position in ev_id order (``rank``), so "the latest" is a maximum, and the order
within a run does not matter:

- per key and transaction: ``n`` (INSERTs - DELETEs), the rank of its last INSERT or
  DELETE, and of its last INSERT; it decides the key's existence when n != 0 or its last
  INSERT / DELETE is an INSERT;
- per key: existence from its last deciding transaction, whether it has any INSERT or
  DELETE, the rank of its last INSERT; per non-key column, the rank of the last event (not a
  DELETE) that carries the column.

Values never leave Arrow: the fold picks row positions, and the output columns are
``take``\\ n from the input, so no value is converted; only the key and transaction columns
are sorted (a table's values are copied once, into the output).

Only for keys that compare as they are (cdc.rows.restates_key is false for every
key column): a restated key (numeric text, floats) is matched in a normalised form.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cdc import rows as contract
from cdc.pg.pgtypes import Column
from cdc.rows import meta, present, value

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

__all__ = ["fold_rows"]


def _differs(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Per row of a sorted column, whether it differs from the row before (True for the
    first row)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(column)
    out = np.ones(n, dtype=bool)
    if n > 1:
        column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        same = pc.equal(column.slice(1), column.slice(0, n - 1))
        out[1:] = ~pc.fill_null(same, False).to_numpy(zero_copy_only=False)
    return out


def fold_rows(rows: pa.Table, columns: list[Column], soft: bool = False) -> pa.Table:
    """One row per key: value(i) per column, ``__has<i>`` per non-key column, ``__action``
    and ``__reset`` (soft: also GONE, GONE_AT and KEEPS), as cdc.engines.spark.fold.fold."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if any(contract.restates_key(c) for c in columns):
        raise ValueError("fold_rows: a key column is compared in a normalised form")
    keyed = [i for i, c in enumerate(columns) if c.is_key]
    if rows.num_rows == 0:
        return _empty(rows, columns, soft)
    # rank: each row's position in ev_id order; by_ev: the row of each rank (the rows as
    # decoded are in ev_id order already)
    ev_ids = rows.column(meta("ev_id")).to_numpy()
    if np.all(ev_ids[1:] > ev_ids[:-1]):
        by_ev = np.arange(rows.num_rows, dtype=np.int64)
    else:
        by_ev = pc.sort_indices(rows.column(meta("ev_id"))).to_numpy()
    rank = np.empty(rows.num_rows, dtype=np.int64)
    rank[by_ev] = np.arange(rows.num_rows, dtype=np.int64)
    # only the columns sorted by are sorted (the values are taken once, from the rows), and
    # not ev_id: a run's order does not matter, each step is a sum or a maximum of ranks
    by = rows.select([value(i) for i in keyed] + [meta("ev_txid")])
    order = pc.sort_indices(by, sort_keys=[(name, "ascending") for name in by.column_names])
    order = order.to_numpy()
    rank = rank[order]
    ops = rows.column(meta("op"))
    is_insert = pc.equal(ops, "I").to_numpy(zero_copy_only=False)[order]
    is_delete = pc.equal(ops, "D").to_numpy(zero_copy_only=False)[order]
    sorted_by = by.take(pa.array(order))
    new_key = np.zeros(rows.num_rows, dtype=bool)
    for i in keyed:
        new_key |= _differs(sorted_by.column(value(i)))
    new_txn = new_key | _differs(sorted_by.column(meta("ev_txid")))
    key_starts, txn_starts = np.flatnonzero(new_key), np.flatnonzero(new_txn)
    none = np.int64(-1)
    # per transaction of a key
    n = np.add.reduceat(is_insert.astype(np.int64) - is_delete, txn_starts)
    reset = np.maximum.reduceat(np.where(is_insert | is_delete, rank, none), txn_starts)
    insert = np.maximum.reduceat(np.where(is_insert, rank, none), txn_starts)
    decisive = (n != 0) | ((insert >= 0) & (insert == reset))
    # per key: the last deciding transaction's existence, in the lowest bit of its rank
    txn_key = np.cumsum(new_key)[txn_starts] - 1
    txn_key_starts = np.flatnonzero(np.diff(txn_key, prepend=-1))
    deciding = np.maximum.reduceat(np.where(decisive, reset * 2 + (n >= 0), none), txn_key_starts)
    any_reset = np.maximum.reduceat(reset, txn_key_starts) >= 0
    last_insert = np.maximum.reduceat(insert, txn_key_starts)
    exists = deciding >= 0
    # 0 UPSERT, 1 UPDATE_IF_PRESENT, 2 DELETE
    action = np.where(~any_reset | (exists & (deciding % 2 == 1)), 0, np.where(exists, 2, 1))
    out: dict[str, pa.Array | pa.ChunkedArray] = {}
    first = pa.array(order[key_starts])  # each key's first row
    for i, c in enumerate(columns):
        if c.is_key:
            out[value(i)] = rows.column(value(i)).take(first)
            continue
        carries = pc.fill_null(rows.column(present(i)), False).to_numpy(zero_copy_only=False)
        at = np.maximum.reduceat(np.where(carries[order] & ~is_delete, rank, none), key_starts)
        sets = (at >= 0) & ((last_insert < 0) | (at >= last_insert))
        picked = pa.array(by_ev[np.where(sets, at, 0)], mask=~sets)
        out[value(i)] = rows.column(value(i)).take(picked)
        out[f"__has{i}"] = pa.array(sets, pa.bool_())
    actions = pa.array([contract.UPSERT, contract.UPDATE_IF_PRESENT, contract.DELETE], pa.string())
    out["__action"] = actions.take(pa.array(action))
    out["__reset"] = pa.array(last_insert >= 0, pa.bool_())
    if soft:
        # the time of the key's last DELETE, for a key that is not upserted
        gone = np.maximum.reduceat(np.where(is_delete, rank, none), key_starts)
        timed = (action != 0) & (gone >= 0)
        picked = pa.array(by_ev[np.where(timed, gone, 0)], mask=~timed)
        out[contract.GONE] = pa.array(action == 2, pa.bool_())
        out[contract.GONE_AT] = rows.column(meta("ev_time")).take(picked)
        out[contract.KEEPS] = pa.array((action == 0) | ((action == 2) & (last_insert >= 0)))
    return pa.table(out)


def _empty(rows: pa.Table, columns: list[Column], soft: bool = False) -> pa.Table:
    """fold_rows of no rows: its columns, no row."""
    import pyarrow as pa

    fields = []
    for i, c in enumerate(columns):
        fields.append(pa.field(value(i), rows.schema.field(value(i)).type))
        if not c.is_key:
            fields.append(pa.field(f"__has{i}", pa.bool_()))
    fields += [pa.field("__action", pa.string()), pa.field("__reset", pa.bool_())]
    if soft:
        fields += [
            pa.field(contract.GONE, pa.bool_()),
            pa.field(contract.GONE_AT, rows.schema.field(meta("ev_time")).type),
            pa.field(contract.KEEPS, pa.bool_()),
        ]
    return pa.schema(fields).empty_table()
