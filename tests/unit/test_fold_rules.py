"""The fold's rules against a simulation of PostgreSQL (tests/support/foldsim.py): random
transactions over a small key space with key moves and swaps under a DEFERRABLE key,
deletes, re-inserts, column-wise sql UPDATEs and truncates, captured as the json and sql
formats capture them; and one named case per rule. Each test runs on the rules in plain
Python (foldsim's python_fold) and on the Arrow engine's fold (cdc.engines.arrow.fold, its
folded rows MERGEd as the batch's MERGE plan says): no Spark, no PostgreSQL.
tests/spark/test_fold.py runs the same cases through both engines' real fold and MERGE."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.engines import ArrowEngine
from tests.support.foldsim import (
    RULES,
    Event,
    Row,
    RuleCase,
    Source,
    engine_fold,
    fixed,
    python_fold,
    simulate,
)

Fold = Callable[[dict[int, Row], list[Event]], dict[int, Row]]

FOLDS: dict[str, Fold] = {"rules": python_fold, "arrow": engine_fold(ArrowEngine().fold)}
folds = pytest.mark.parametrize("fold", FOLDS.values(), ids=FOLDS)


@folds
@pytest.mark.parametrize("fmt", ["json", "sql"])
@settings(max_examples=400, deadline=None)
@given(seed=st.integers(0, 2**32), statements=st.integers(1, 12))
def test_the_rules_give_the_sources_final_state(fold, fmt, seed, statements):
    """Folded batch after batch, the events of random statements (key moves, swaps and
    shifts under a DEFERRABLE key, deletes, re-inserts, partial sql UPDATEs, truncates)
    leave the source's state."""
    _, batches = simulate(seed, fmt, 3, statements)
    target: dict[int, Row] = {}
    for events, expected in batches:
        target = fold(target, events)
        assert fixed(target) == fixed(expected)


@folds
@pytest.mark.parametrize("fmt", ["json", "sql"])
@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32), statements=st.integers(1, 12), split=st.integers(0, 12))
def test_a_target_that_already_shows_part_of_the_batch_ends_the_same(
    fold, fmt, seed, statements, split
):
    """A target that already shows the batch's first transactions (a snapshot taken while
    the batch's transactions committed, as cdc resync takes it) ends at the source's state
    too: the fold decides by each key's last deciding transaction, not by the start state."""
    _, batches = simulate(seed, fmt, 2, statements)
    (_, start), (events, expected) = batches
    txids = sorted({e.txid for e in events})
    seen = set(txids[: min(split, len(txids))])
    snapshot = python_fold(start, [e for e in events if e.txid in seen])
    # a TRUNCATE the snapshot already shows empties it again: the same
    assert fixed(fold(snapshot, events)) == fixed(expected)


@folds
def test_a_shift_and_a_swap_by_the_rules(fold):
    """id = id + 1 over 1, 2, 3 (D1 I2 D2 I3 D3 I4) leaves 2, 3, 4; a swap leaves both rows
    with exchanged data; the last-event fold of before lost rows in both."""
    src = Source("sql")
    for k in (1, 2, 3):
        src.insert(k, k * 10, str(k))
    start = fold({}, src.events)
    shift_from = len(src.events)
    src.move({1: 2, 2: 3, 3: 4}, [1, 2, 3])
    after = fold(start, src.events[shift_from:])
    assert fixed(after) == {2: (2, 10, "1"), 3: (3, 20, "2"), 4: (4, 30, "3")}
    swap_from = len(src.events)
    src.move({2: 3, 3: 2}, [2, 3])
    swapped = fold(after, src.events[swap_from:])
    assert fixed(swapped) == {2: (2, 20, "2"), 3: (3, 10, "1"), 4: (4, 30, "3")}


@folds
@pytest.mark.parametrize("case", RULES, ids=lambda c: f"{c.name}-{c.fmt}")
def test_each_rule_by_its_case(fold, case: RuleCase):
    """Each named rule (reset on insert and delete, column-wise sql UPDATEs, TRUNCATE
    cut-off, delete-then-insert, key change) gives the expected rows, which are the
    source's."""
    src, first, second = case.run()
    target = fold(fold({}, first), second)
    assert fixed(target) == case.expected
    assert fixed(src.rows) == case.expected
