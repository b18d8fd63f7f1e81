"""The Arrow fold's shortcuts (cdc.engines.arrow.fold): it sorts only the key and transaction
columns (the order within a transaction's run does not matter) and takes each value from the
row it came from; rows in ev_id order, as the decoder gives them, skip the sort by ev_id. Rows
in that order, with transactions interleaved as concurrent ones are, fold by the rules
(tests/support/foldrows.py), and any order of the same rows folds alike. No JVM."""

from __future__ import annotations

import random

import pytest

from cdc.engines.arrow import fold as fold_arrow
from cdc.pg.pgtypes import Column
from cdc.rows import meta, value
from tests.support.engines import rows_table
from tests.support.foldrows import Row, comparable, fold_in_python, random_rows

RANDOM = [
    Column("id", "integer", "int", True),
    Column("v", "text", "string", False),
    Column("n", "numeric(10,2)", "decimal(10,2)", False),
]
TEXT_KEY = [Column("k", "text", "string", True)]


def _folded(rows: list[Row], columns: list[Column]) -> list:
    return comparable(fold_arrow.fold_rows(rows_table(rows, columns), columns).to_pylist())


def _in_order(seed: int, columns: list[Column], interleaved: bool) -> list[Row]:
    """random_rows in ev_id order; interleaved: each event of one of three transactions at
    random (transactions that overlap in ev_id order, as concurrent ones do)."""
    rows = sorted(random_rows(seed, columns), key=lambda r: r[meta("ev_id")])
    if interleaved:
        rnd = random.Random(seed)
        rows = [{**r, meta("ev_txid"): rnd.choice((30, 10, 20))} for r in rows]
    return rows


@pytest.mark.parametrize("interleaved", [False, True], ids=["serial", "interleaved"])
@pytest.mark.parametrize("key", [[], TEXT_KEY], ids=["one", "two"])
def test_rows_in_ev_id_order_fold_by_the_rules(key: list[Column], interleaved: bool):
    """The decoder's order: the sort by key and transaction alone keeps ev_id order."""
    columns = RANDOM + key
    for seed in range(100):
        rows = _in_order(seed, columns, interleaved)
        assert _folded(rows, columns) == comparable(fold_in_python(rows, columns)), seed


@pytest.mark.parametrize("key", [[], TEXT_KEY], ids=["one", "two"])
def test_any_order_of_the_same_rows_folds_alike(key: list[Column]):
    """Shuffled, reversed, or in order: the same fold."""
    columns = RANDOM + key
    for seed in range(50):
        rows = _in_order(seed, columns, interleaved=True)
        expected = _folded(rows, columns)
        shuffled = rows[:]
        random.Random(seed).shuffle(shuffled)
        assert _folded(shuffled, columns) == expected, seed
        assert _folded(rows[::-1], columns) == expected, seed


def _event(op: str, ev_id: int, txid: int, key: int, text: str) -> Row:
    ids = {meta("op"): op, meta("ev_id"): ev_id, meta("ev_txid"): txid}
    return ids | {value(0): key, value(1): text, value(2): None}


def test_one_row_and_repeated_keys_in_one_transaction():
    """A single event, and many events of one key in one transaction (the last one wins)."""
    columns = RANDOM
    for rows in (
        [_event("I", 5, 1, 1, "a")],
        [_event(op, 10 + k, 7, 1, f"{k}") for k, op in enumerate("IUUDIU")],
        [_event(op, 10 + k, 7, k % 2, f"{k}") for k, op in enumerate("IIUDUU")],
    ):
        assert _folded(rows, columns) == comparable(fold_in_python(rows, columns))
