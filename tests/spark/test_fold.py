"""The fold and MERGE (cdc.engines.spark.fold, cdc.targets.mirror) on a local Delta table, no
PostgreSQL: random transactions of tests/support/foldsim.py's simulation of PostgreSQL (key
moves, swaps and shifts under a DEFERRABLE key, deletes, re-inserts, column-wise sql UPDATEs,
truncates), and its named case per rule, batch after batch. The same rules in pure Python,
with many more examples, are in tests/unit/test_fold_rules.py."""

from __future__ import annotations

import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.foldsim import COLUMNS, RULES, Event, RuleCase, Source, fixed, simulate

# ---------------------------------------------------------------- the real fold and MERGE


def decoded_frame(spark, events: list[Event], tick: int):
    """The events as cdc.engines.spark.decode's rows frame."""
    from cdc.rows import meta, present, value

    schema = (
        f"{meta('ev_id')} long, {meta('ev_time')} timestamp, {meta('ev_txid')} long,"
        f" {meta('tick_id')} long, {meta('op')} string, "
        + ", ".join(f"{value(i)} {c.spark_type}" for i, c in enumerate(COLUMNS))
        + ", "
        + ", ".join(f"{present(i)} boolean" for i in range(len(COLUMNS)))
    )
    rows = [
        (
            e.ev_id,
            None,
            e.txid,
            tick,
            e.op,
            *[e.values.get(c.name) for c in COLUMNS],
            *[c.name in e.values for c in COLUMNS],
        )
        for e in events
    ]
    return spark.createDataFrame(rows, schema)


def apply_batch(spark, path: str, events: list[Event], tick: int) -> None:
    from cdc.rows import TableBatch
    from cdc.targets import registry
    from cdc.targets.table import Commit, TableRef

    truncates = [e.ev_id for e in events if e.op == "R"]
    keys = [str(e.values["id"]) for e in events if e.op != "R"]
    ints = sorted(int(k) for k in keys)
    key_range = (str(ints[0]), str(ints[-1])) if ints else None
    batch = TableBatch(
        decoded_frame(spark, events, tick),
        COLUMNS,
        truncates[-1] if truncates else None,
        key_range,
    )
    registry.kind("mirror").apply(spark, TableRef(path), Commit("test/fold", tick), batch)


def delta_state(spark, path: str) -> dict[int, tuple]:
    rows = spark.read.format("delta").load(path).collect()
    return {r["id"]: (r["id"], r["a"], r["b"]) for r in rows}


@pytest.mark.spark
@pytest.mark.parametrize("fmt", ["json", "sql"])
@settings(
    max_examples=4,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(seed=st.integers(0, 2**32), statements=st.integers(3, 12))
def test_fold_and_merge_give_the_sources_final_state(spark, fmt, seed, statements):
    """The real fold and MERGE on a local Delta table, batch after batch, leave the source's
    state for random statements with key moves, swaps, shifts, partial sql UPDATEs and
    truncates."""
    _, batches = simulate(seed, fmt, 3, statements)
    path = tempfile.mkdtemp(prefix="cdc-fold-")
    for tick, (events, expected) in enumerate(batches, start=1):
        if events:
            apply_batch(spark, path, events, tick)
            assert delta_state(spark, path) == fixed(expected), f"batch {tick}"


@pytest.mark.spark
def test_shift_swap_and_moves_back_on_delta(spark, tmp_path):
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
    apply_batch(spark, path, src.events, 1)
    for tick, step in enumerate(steps, start=2):
        start = len(src.events)
        step()
        apply_batch(spark, path, src.events[start:], tick)
        assert delta_state(spark, path) == fixed(src.rows), f"step {tick - 1}"


@pytest.mark.spark
def test_a_target_that_shows_part_of_the_batch_on_delta(spark, tmp_path):
    """Insert of key 5 in one transaction, its delete in the next: applied to a target that
    already shows the insert (a snapshot in between), key 5 is deleted (a count over the
    whole batch, net 0, would have kept it)."""
    path = str(tmp_path / "t")
    src = Source("sql")
    src.insert(5, 1, "x")
    src.commit()
    apply_batch(spark, path, src.events, 1)
    src.delete(5)
    src.commit()
    apply_batch(spark, path, src.events, 2)
    assert delta_state(spark, path) == {}


@pytest.mark.spark
@pytest.mark.parametrize("case", RULES, ids=lambda c: f"{c.name}-{c.fmt}")
def test_each_rule_on_delta(spark, tmp_path, case: RuleCase):
    """Each named rule's case (reset on insert and delete, column-wise sql UPDATEs, TRUNCATE
    cut-off, delete-then-insert, key change), as two batches through the real fold and
    MERGE, leaves the expected rows."""
    path = str(tmp_path / "t")
    _, first, second = case.run()
    apply_batch(spark, path, first, 1)
    apply_batch(spark, path, second, 2)
    assert delta_state(spark, path) == case.expected
