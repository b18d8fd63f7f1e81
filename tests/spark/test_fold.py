"""The fold and MERGE of both engines (the ``engine`` fixture: the Arrow engine's fold and
delta-rs MERGE, Spark's fold and Delta MERGE) on a local Delta table, no PostgreSQL: random
transactions of tests/support/foldsim.py's simulation of PostgreSQL (key moves, swaps and
shifts under a DEFERRABLE key, deletes, re-inserts, column-wise sql UPDATEs, truncates), and
its named case per rule, batch after batch. A batch holding a TRUNCATE is Spark's on either
engine (the drain's Arrow decoder leaves it to Spark): each test says which batches each
engine wrote. The same rules in pure Python and on the Arrow fold, with many more
examples, are in tests/unit/test_fold_rules.py."""

from __future__ import annotations

import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdc.engines.planner import SPARK
from tests.support.engines import Engine, Part
from tests.support.foldsim import COLUMNS, RULES, Event, RuleCase, Source, decoded, fixed, simulate


def apply_batch(engine: Engine, path: str, events: list[Event], tick: int) -> str:
    """Writes the batch with the engine; returns the engine that wrote it."""
    truncates = [e.ev_id for e in events if e.op == "R"]
    part = Part(decoded(events), COLUMNS, tick, truncates[-1] if truncates else None)
    return engine.write(path, part)


def expected_writer(engine: Engine, events: list[Event]) -> str:
    """The engine that writes the batch: Spark where it holds a TRUNCATE."""
    return SPARK if any(e.op == "R" for e in events) else engine.name


def delta_state(engine: Engine, path: str) -> dict[int, tuple]:
    return {r["id"]: (r["id"], r["a"], r["b"]) for r in engine.read(path)}


@pytest.mark.spark
@pytest.mark.parametrize("fmt", ["json", "sql"])
@settings(
    max_examples=4,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(seed=st.integers(0, 2**32), statements=st.integers(3, 12))
def test_fold_and_merge_give_the_sources_final_state(engine, fmt, seed, statements):
    """The real fold and MERGE on a local Delta table, batch after batch, leave the source's
    state for random statements with key moves, swaps, shifts, partial sql UPDATEs and
    truncates."""
    _, batches = simulate(seed, fmt, 3, statements)
    path = tempfile.mkdtemp(prefix="cdc-fold-")
    for tick, (events, expected) in enumerate(batches, start=1):
        if events:
            written = apply_batch(engine, path, events, tick)
            assert written == expected_writer(engine, events)
            assert delta_state(engine, path) == fixed(expected), f"batch {tick}"


@pytest.mark.spark
def test_shift_swap_and_moves_back_on_delta(engine, tmp_path):
    """id = id + 1 over 1, 2, 3 in both processing orders, then a swap, each its own batch:
    the Delta table follows the source exactly (the last-event fold left only id 4)."""
    path = str(tmp_path / "t")
    src = Source("sql")
    for k in (1, 2, 3):
        src.insert(k, k * 10, str(k))
    steps = [
        lambda: src.move({1: 2, 2: 3, 3: 4}, [1, 2, 3]),
        lambda: src.move({2: 3, 3: 4, 4: 5}, [4, 3, 2]),
        lambda: src.move({3: 4, 4: 3}, [3, 4]),
    ]
    assert apply_batch(engine, path, src.events, 1) == engine.name
    for tick, step in enumerate(steps, start=2):
        start = len(src.events)
        step()
        assert apply_batch(engine, path, src.events[start:], tick) == engine.name
        assert delta_state(engine, path) == fixed(src.rows), f"step {tick - 1}"


@pytest.mark.spark
def test_a_target_that_shows_part_of_the_batch_on_delta(engine, tmp_path):
    """Insert of key 5 in one transaction, its delete in the next: applied to a target that
    already shows the insert (a snapshot in between), key 5 is deleted (a count over the
    whole batch, net 0, would have kept it)."""
    path = str(tmp_path / "t")
    src = Source("sql")
    src.insert(5, 1, "x")
    src.commit()
    apply_batch(engine, path, src.events, 1)
    src.delete(5)
    src.commit()
    assert apply_batch(engine, path, src.events, 2) == engine.name
    assert delta_state(engine, path) == {}


@pytest.mark.spark
@pytest.mark.parametrize("case", RULES, ids=lambda c: f"{c.name}-{c.fmt}")
def test_each_rule_on_delta(engine, tmp_path, case: RuleCase):
    """Each named rule's case (reset on insert and delete, column-wise sql UPDATEs, TRUNCATE
    cut-off, delete-then-insert, key change), as two batches through the real fold and
    MERGE, leaves the expected rows."""
    path = str(tmp_path / "t")
    _, first, second = case.run()
    written = [apply_batch(engine, path, first, 1), apply_batch(engine, path, second, 2)]
    assert written == [expected_writer(engine, first), expected_writer(engine, second)]
    assert delta_state(engine, path) == case.expected
