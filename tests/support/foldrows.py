"""The fold's output in plain Python, to judge both engines' folds by (tests/support/engines.py):
``fold_in_python`` folds decoded rows into the rows cdc.engines.*.fold return, by the rules
cdc.engines.spark.fold's docstring states; ``merge_folded`` MERGEs folded rows into a target
held as a dict, as the batch's MERGE plan says (cdc.targets.merge_plan.MergePlan.for_batch);
``CASES`` names one small case per rule with its folded rows written out by hand (which
holds the oracle to the rules too); ``random_rows`` makes random decoded rows.

Rows are dicts under the row contract's names (cdc.rows): decoded rows carry meta op, ev_id,
ev_txid, and value(i) and present(i) per column. No Spark and no Arrow here.
"""

from __future__ import annotations

import decimal
import math
import random
from dataclasses import dataclass
from typing import Any

from cdc import rows as contract
from cdc.pg.pgtypes import Column
from cdc.rows import ACTION, RESET, has, match_key, meta, present, value

Row = dict[str, Any]

OP, EV_ID, TXID = meta("op"), meta("ev_id"), meta("ev_txid")
NAN = float("nan")  # the one NaN keys group under (a dict finds it by identity)


def _match(column: Column, v: Any) -> Any:
    """The form a key's value is grouped and matched in: a restated key's normalised one
    (numeric text without trailing fractional zeros; a float's -0 as 0, every NaN one)."""
    if not contract.restates_key(column) or v is None:
        return v
    if contract.is_numeric_text(column):
        return contract.norm_numeric_text(v)
    return 0.0 if v == 0 else (NAN if math.isnan(v) else v)


def _last(events: list[Row], carries: Any) -> Row | None:
    """The event of highest ev_id among those carries(event) holds for."""
    return max((e for e in events if carries(e)), key=lambda e: e[EV_ID], default=None)


def _existence(events: list[Row]) -> tuple[bool | None, bool]:
    """(existence after the key's last deciding transaction, None without one; whether the
    key has any INSERT or DELETE): rule 1 of cdc.engines.spark.fold."""
    deciding: tuple[int, bool] | None = None
    resets = False
    for txid in {e[TXID] for e in events}:
        mine = [e for e in events if e[TXID] == txid and e[OP] in ("I", "D")]
        if not mine:
            continue
        resets = True
        n = sum(1 if e[OP] == "I" else -1 for e in mine)
        last = max(mine, key=lambda e: e[EV_ID])
        if (n != 0 or last[OP] == "I") and (deciding is None or last[EV_ID] > deciding[0]):
            deciding = (last[EV_ID], n >= 0)
    return (None if deciding is None else deciding[1]), resets


def fold_in_python(rows: list[Row], columns: list[Column]) -> list[Row]:
    """One row per key, with the columns cdc.engines.spark.fold.fold gives in its order."""
    keys = [i for i, c in enumerate(columns) if c.is_key]
    groups: dict[tuple, list[Row]] = {}
    for r in rows:
        groups.setdefault(tuple(_match(columns[i], r[value(i)]) for i in keys), []).append(r)
    out = []
    for group, events in groups.items():
        exists, resets = _existence(events)
        inserted = _last(events, lambda e: e[OP] == "I")
        action = (
            contract.UPSERT
            if not resets or exists
            else (contract.UPDATE_IF_PRESENT if exists is None else contract.DELETE)
        )
        row: Row = {}
        for i, c in enumerate(columns):
            if c.is_key:
                kept = _last(events, lambda e: e[OP] != "D")
                restated = contract.restates_key(c)
                row[value(i)] = (kept or {}).get(value(i)) if restated else events[0][value(i)]
                if restated:
                    row[match_key(i)] = group[keys.index(i)]
                continue
            at = _last(events, lambda e, i=i: e.get(present(i), True) and e[OP] != "D")
            sets = at is not None and (inserted is None or at[EV_ID] >= inserted[EV_ID])
            row[value(i)] = at[value(i)] if sets else None
            row[has(i)] = sets
        row[ACTION] = action
        row[RESET] = inserted is not None
        out.append(row)
    return out


def merge_folded(
    target: dict[tuple, Row], folded: list[Row], columns: list[Column]
) -> dict[tuple, Row]:
    """The target (key values -> row by column name) after the batch's MERGE of folded rows:
    a DELETE removes the row; a matched key gets each column the batch sets (every one when
    the key has an INSERT, RESET), and a restated key the batch's form of it; an UPSERT of a
    missing key inserts the row; an UPDATE_IF_PRESENT of a missing key does nothing."""
    keys = [i for i, c in enumerate(columns) if c.is_key]

    def matched(key: tuple) -> tuple:
        return tuple(_match(columns[i], v) for i, v in zip(keys, key, strict=True))

    restated = {i for i in keys if contract.restates_key(columns[i])}
    result = {k: dict(v) for k, v in target.items()}
    for f in folded:
        at = tuple(f[match_key(i)] if i in restated else f[value(i)] for i in keys)
        found = next((k for k in result if matched(k) == at), None)
        if f[ACTION] == contract.DELETE:
            result.pop(found, None)
        elif found is not None:
            row = result.pop(found)
            for i, c in enumerate(columns):
                if (c.is_key and contract.restates_key(c)) or (
                    not c.is_key and (f[RESET] or f[has(i)])
                ):
                    row[c.name] = f[value(i)]
            result[tuple(row[columns[i].name] for i in keys)] = row
        elif f[ACTION] == contract.UPSERT:
            row = {c.name: f[value(i)] for i, c in enumerate(columns)}
            result[tuple(row[columns[i].name] for i in keys)] = row
    return result


# ---------------------------------------------------------------- one case per rule

COLUMNS = [Column("id", "integer", "int", True), Column("v", "text", "string", False)]


@dataclass(frozen=True)
class FoldCase:
    """Decoded events of COLUMNS, (op, ev_id, txid, id, v, whether v is carried), and the
    folded rows by key: (action, v, has v, reset)."""

    name: str
    events: tuple[tuple[str, int, int, int, str | None, bool], ...]
    expected: dict[int, tuple[str, str | None, bool, bool]]

    def rows(self) -> list[Row]:
        names = [OP, EV_ID, TXID, value(0), value(1), present(1)]
        return [{**dict(zip(names, e, strict=True)), present(0): True} for e in self.events]


U, D, M = contract.UPSERT, contract.DELETE, contract.UPDATE_IF_PRESENT
CASES = [
    # update t set id = 3 - id over ids 1 and 2, captured as D1 I2 D2 I1: key 1 ends on an
    # INSERT (it exists), key 2 on a DELETE with net 0 (it exists exactly when it did before)
    FoldCase(
        "swap",
        (("D", 1, 7, 1, "a", True), ("I", 2, 7, 2, "a", True), ("D", 3, 7, 2, "b", True),
         ("I", 4, 7, 1, "b", True)),
        {1: (U, "b", True, True), 2: (M, "a", True, True)},
    ),
    # update t set id = id + 1 over ids 1, 2: D1 I2 D2 I3; key 2 ends with net 0, last a DELETE
    FoldCase(
        "shift",
        (("D", 1, 7, 1, "x", True), ("I", 2, 7, 2, "x", True), ("D", 3, 7, 2, "y", True),
         ("I", 4, 7, 3, "y", True)),
        {1: (D, None, False, False), 2: (M, "x", True, True), 3: (U, "y", True, True)},
    ),
    # a sql-format UPDATE without v after the INSERT: v is the INSERT's; the UPDATE before
    # the INSERT does not count
    FoldCase(
        "partial_updates_after_the_last_insert",
        (("U", 1, 5, 9, "before", True), ("I", 2, 6, 9, "inserted", True),
         ("U", 3, 6, 9, None, False)),
        {9: (U, "inserted", True, True)},
    ),
    # UPDATEs only: upserted, setting only what they carry
    FoldCase("updates_only", (("U", 1, 5, 4, None, False), ("U", 2, 6, 4, None, False)),
             {4: (U, None, False, False)}),
    # a DELETE's values (the old row in json) are not the row's
    FoldCase("delete_values_do_not_count",
             (("U", 1, 5, 4, "new", True), ("D", 2, 6, 4, "old", True)),
             {4: (D, "new", True, False)}),
    # insert then delete in one transaction: net 0, last a DELETE: kept as it was
    FoldCase("insert_then_delete",
             (("I", 1, 5, 6, "a", True), ("D", 2, 5, 6, "a", True)),
             {6: (M, "a", True, True)}),
]  # fmt: skip


def by_key(folded: list[Row]) -> dict[int, tuple]:
    """Folded rows of COLUMNS as CASES write them."""
    return {r[value(0)]: (r[ACTION], r[value(1)], r[has(1)], r[RESET]) for r in folded}


# ---------------------------------------------------------------- random decoded rows


def random_rows(seed: int, columns: list[Column]) -> list[Row]:
    """Random events of columns (an int key first, then a text and a numeric(10,2) value,
    then optionally a text key): inserts, updates (whole and partial rows), deletes, key
    moves within and across transactions, in shuffled order."""
    rnd = random.Random(seed)
    rows = []
    ev_id = 0
    for txid in range(1, rnd.randint(2, 12)):
        for _ in range(rnd.randint(1, 6)):
            ev_id += rnd.randint(1, 3)
            op = rnd.choice("IUUDI")
            partial = op == "U" and rnd.random() < 0.5
            number = None if rnd.random() < 0.2 else decimal.Decimal(ev_id) / 4
            row = {
                OP: op,
                EV_ID: ev_id,
                TXID: txid,
                value(0): rnd.randint(1, 5),
                present(0): True,
                value(1): None if rnd.random() < 0.2 else f"v{ev_id}",
                present(1): not partial or rnd.random() < 0.5,
                value(2): None if number is None else number.quantize(decimal.Decimal("0.01")),
                present(2): not partial or rnd.random() < 0.5,
            }
            if len(columns) > 3:
                row |= {value(3): rnd.choice("ab"), present(3): True}
            rows.append(row)
    rnd.shuffle(rows)
    return rows


def comparable(folded: list[Row]) -> list[list[tuple[str, Any]]]:
    """Folded rows in one order, floats by their text (NaN equal to NaN, -0 not to 0)."""

    def form(v: Any) -> Any:
        return repr(v) if isinstance(v, float) else v

    return sorted(([(k, form(v)) for k, v in r.items()] for r in folded), key=repr)
