"""The fold (cdc.targets.fold) of a small batch on the driver, over Arrow: the same rules,
the same output columns, without a Spark job.

A key's events are taken in ev_id order; per transaction of the key: INSERTs - DELETEs
(``n``), its last INSERT or DELETE and whether it was an INSERT, its last INSERT; per
non-key column, the last event (not a DELETE) that carries it. Then per key, as the Spark
fold decides (see its docstring): existence from the last deciding transaction, the row's
columns from the last INSERT on. Values never leave Arrow: the fold picks row indices, and
the output columns are ``take``\\ n from the input, so no value is converted.

Only for keys that compare as they are (cdc.targets.fold.restates_key is false for every
key column): a restated key (numeric text, floats) is matched in a normalised form.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cdc.pg.pgtypes import Column
from cdc.pipeline.decode import meta, present, value
from cdc.targets import fold

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["fold_rows"]


@dataclass
class _Txn:
    n: int = 0
    reset_id: int | None = None
    reset_op: str | None = None


@dataclass
class _Key:
    txns: dict[int, _Txn] = field(default_factory=dict)
    last_insert: int | None = None  # ev_id
    last: dict[int, tuple[int, int]] = field(default_factory=dict)  # column -> (ev_id, row)


def fold_rows(rows: pa.Table, columns: list[Column]) -> pa.Table:
    """One row per key: value(i) per column, ``__has<i>`` per non-key column, ``__action``
    and ``__reset``, as cdc.targets.fold.fold."""
    import pyarrow as pa

    if any(fold.restates_key(c) for c in columns):
        raise ValueError("fold_rows: a key column is compared in a normalised form")
    keyed = [i for i, c in enumerate(columns) if c.is_key]
    others = [i for i, c in enumerate(columns) if not c.is_key]
    ops = rows.column(meta("op")).to_pylist()
    ev_ids = rows.column(meta("ev_id")).to_pylist()
    txids = rows.column(meta("ev_txid")).to_pylist()
    key_values = list(zip(*(rows.column(value(i)).to_pylist() for i in keyed), strict=True))
    presence = {i: rows.column(present(i)).to_pylist() for i in others}
    order = sorted(range(rows.num_rows), key=ev_ids.__getitem__)
    keys: dict[tuple, _Key] = {}
    first_row: dict[tuple, int] = {}
    for row in order:
        key_value, op, ev_id = key_values[row], ops[row], ev_ids[row]
        state = keys.setdefault(key_value, _Key())
        first_row.setdefault(key_value, row)
        txn = state.txns.setdefault(txids[row], _Txn())
        if op in ("I", "D"):
            txn.n += 1 if op == "I" else -1
            txn.reset_id, txn.reset_op = ev_id, op  # rows come in ev_id order
            if op == "I":
                state.last_insert = ev_id
        if op != "D":
            for i in others:
                if presence[i][row]:
                    state.last[i] = (ev_id, row)
    picked_key_rows: list[int] = []
    picked: dict[int, list[int | None]] = {i: [] for i in others}
    has: dict[int, list[bool]] = {i: [] for i in others}
    actions: list[str] = []
    resets: list[bool] = []
    for key_value, state in keys.items():
        picked_key_rows.append(first_row[key_value])
        deciding = [t for t in state.txns.values() if t.n != 0 or t.reset_op == "I"]
        exists = None
        if deciding:
            last = max(deciding, key=lambda t: t.reset_id)  # type: ignore[arg-type,return-value]
            exists = last.n >= 0
        any_reset = any(t.reset_id is not None for t in state.txns.values())
        if not any_reset or exists:
            actions.append(fold.UPSERT)
        elif exists is None:
            actions.append(fold.UPDATE_IF_PRESENT)
        else:
            actions.append(fold.DELETE)
        resets.append(state.last_insert is not None)
        for i in others:
            at = state.last.get(i)
            sets = at is not None and (state.last_insert is None or at[0] >= state.last_insert)
            has[i].append(sets)
            picked[i].append(at[1] if sets else None)  # type: ignore[index]
    out: dict[str, pa.Array | pa.ChunkedArray] = {}
    key_rows = pa.array(picked_key_rows, pa.int64())
    for i in range(len(columns)):
        if columns[i].is_key:
            out[value(i)] = rows.column(value(i)).take(key_rows)
        else:
            out[value(i)] = rows.column(value(i)).take(pa.array(picked[i], pa.int64()))
            out[f"__has{i}"] = pa.array(has[i], pa.bool_())
    out["__action"] = pa.array(actions, pa.string())
    out["__reset"] = pa.array(resets, pa.bool_())
    return pa.table(out)
