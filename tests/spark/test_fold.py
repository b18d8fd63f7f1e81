"""The fold's rules (cdc.targets.fold) against a simulation of PostgreSQL: random transactions
over a small key space with key moves and swaps under a DEFERRABLE key, deletes, re-inserts,
column-wise sql UPDATEs and truncates, captured as the json and sql formats capture them.

The rules are checked twice: in pure Python (many examples, no Spark), and by the real
fold and MERGE on a local Delta table (fewer examples, no PostgreSQL)."""

from __future__ import annotations

import random
import tempfile
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdc.pg.pgtypes import Column
from cdc.targets import fold

KEYS = range(1, 6)
COLUMNS = [
    Column("id", "integer", "int", True),
    Column("a", "integer", "int", False),
    Column("b", "text", "string", False),
]

Row = dict[str, object]


@dataclass
class Event:
    ev_id: int
    op: str  # I U D R
    values: Row  # the columns the event carries (the key always, but for R)
    txid: int


@dataclass
class Source:
    """PostgreSQL's side: the table (key -> row) and the events its capture writes."""

    fmt: str
    rows: dict[int, Row] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    next_id: int = 1
    txid: int = 1

    def emit(self, op: str, values: Row) -> None:
        self.events.append(Event(self.next_id, op, values, self.txid))
        self.next_id += 1

    def commit(self) -> None:
        self.txid += 1

    def insert(self, key: int, a: int, b: str) -> None:
        self.rows[key] = {"id": key, "a": a, "b": b}
        self.emit("I", dict(self.rows[key]))

    def delete(self, key: int) -> None:
        row = self.rows.pop(key)
        self.emit("D", dict(row) if self.fmt == "json" else {"id": key})

    def update(self, key: int, changes: Row) -> None:
        self.rows[key].update(changes)
        carried = dict(self.rows[key]) if self.fmt == "json" else {"id": key, **changes}
        self.emit("U", carried)

    def move(self, mapping: dict[int, int], order: list[int]) -> None:
        """One UPDATE statement setting each key k of mapping to mapping[k], rows processed in
        order: under a DEFERRABLE key each row's change is a delete of its old key and an
        insert of its new one, and keys may repeat until the statement ends."""
        old = {k: self.rows[k] for k in mapping}
        for k in order:
            row = old[k]
            self.emit("D", dict(row) if self.fmt == "json" else {"id": k})
            self.emit("I", {**row, "id": mapping[k]})
        for k in mapping:
            self.rows.pop(k)
        for k, new in mapping.items():
            self.rows[new] = {**old[k], "id": new}

    def truncate(self) -> None:
        self.rows.clear()
        self.emit("R", {})


def run_statement(src: Source, rnd: random.Random) -> None:
    """One random valid statement against the source's current state."""
    present = sorted(src.rows)
    absent = [k for k in KEYS if k not in src.rows]
    kind = rnd.choice(["insert", "delete", "update", "move", "swap", "shift", "truncate"])
    if kind == "insert" and absent:
        src.insert(rnd.choice(absent), rnd.randint(0, 9), rnd.choice("xyz"))
    elif kind == "delete" and present:
        src.delete(rnd.choice(present))
    elif kind == "update" and present:
        changes: Row = {}
        if rnd.random() < 0.6:
            changes["a"] = rnd.choice([None, rnd.randint(0, 9)])
        if rnd.random() < 0.6 or not changes:
            changes["b"] = rnd.choice([None, "p", "q"])
        src.update(rnd.choice(present), changes)
    elif kind == "move" and present and absent:
        key = rnd.choice(present)
        src.move({key: rnd.choice(absent)}, [key])
    elif kind == "swap" and len(present) >= 2:
        x, y = rnd.sample(present, 2)
        src.move({x: y, y: x}, rnd.sample([x, y], 2))
    elif kind == "shift" and present:
        # update t set id = id + 1 over a run of keys whose successor is free at the end
        start = end = rnd.choice(present)
        while end + 1 in src.rows:
            end += 1
        if end + 1 in KEYS:
            keys = list(range(start, end + 1))
            src.move({k: k + 1 for k in keys}, rnd.sample(keys, len(keys)))
    elif kind == "truncate" and rnd.random() < 0.3:
        src.truncate()


def batch_of(src: Source, rnd: random.Random, statements: int) -> list[Event]:
    """Random statements, grouped into transactions of one to three statements."""
    start = len(src.events)
    for _ in range(statements):
        run_statement(src, rnd)
        if rnd.random() < 0.5:
            src.commit()
    src.commit()
    return src.events[start:]


def simulate(seed: int, fmt: str, batches: int, statements: int) -> tuple[Source, list]:
    rnd = random.Random(seed)
    src = Source(fmt)
    out = []
    for _ in range(batches):
        events = batch_of(src, rnd, statements)
        out.append((events, {k: dict(v) for k, v in src.rows.items()}))
    return src, out


def python_fold(target: dict[int, Row], events: list[Event]) -> dict[int, Row]:
    """cdc.targets.fold's rules in plain Python: the target after one batch."""
    truncated = [e.ev_id for e in events if e.op == "R"]
    result = {} if truncated else {k: dict(v) for k, v in target.items()}
    after = [e for e in events if not truncated or e.ev_id > truncated[-1]]
    for key in {e.values["id"] for e in after}:
        mine = [e for e in after if e.values["id"] == key]
        deciding = None  # (reset id, exists after) of the last deciding transaction
        for txid in sorted({e.txid for e in mine}):
            resets = [e for e in mine if e.txid == txid and e.op in ("I", "D")]
            if not resets:
                continue
            n = sum(1 if e.op == "I" else -1 for e in resets)
            if n != 0 or resets[-1].op == "I":
                deciding = (resets[-1].ev_id, n >= 0)
        inserts = [e.ev_id for e in mine if e.op == "I"]
        last_insert = max(inserts, default=None)
        has_resets = any(e.op in ("I", "D") for e in mine)
        if not has_resets or (deciding and deciding[1]):
            action = fold.UPSERT
        elif deciding is None:
            action = fold.UPDATE_IF_PRESENT
        else:
            action = fold.DELETE
        if action == fold.DELETE:
            result.pop(key, None)
            continue
        if action == fold.UPDATE_IF_PRESENT and key not in result:
            continue
        row = {"id": key, "a": None, "b": None} if last_insert else dict(result.get(key, {}))
        if not row:
            row = {"id": key, "a": None, "b": None}
        for e in mine:
            if e.op in ("I", "U") and (last_insert is None or e.ev_id >= last_insert):
                row.update(e.values)
        result[key] = row
    return result


def fixed(src_rows: dict[int, Row]) -> dict[int, tuple]:
    return {k: (v["id"], v["a"], v["b"]) for k, v in src_rows.items()}


@pytest.mark.parametrize("fmt", ["json", "sql"])
@settings(max_examples=400, deadline=None)
@given(seed=st.integers(0, 2**32), statements=st.integers(1, 12))
def test_the_rules_give_the_sources_final_state(fmt, seed, statements):
    """Folded by the documented rules, batch after batch, the events of random statements
    (key moves, swaps and shifts under a DEFERRABLE key, deletes, re-inserts, partial sql
    UPDATEs, truncates) leave the source's state."""
    _, batches = simulate(seed, fmt, 3, statements)
    target: dict[int, Row] = {}
    for events, expected in batches:
        target = python_fold(target, events)
        assert fixed(target) == fixed(expected)


@pytest.mark.parametrize("fmt", ["json", "sql"])
@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32), statements=st.integers(1, 12), split=st.integers(0, 12))
def test_a_target_that_already_shows_part_of_the_batch_ends_the_same(fmt, seed, statements,
                                                                     split):  # fmt: skip
    """A target that already shows the batch's first transactions (a snapshot taken while
    the batch's transactions committed, as cdc resync takes it) ends at the source's state
    too: the fold decides by each key's last deciding transaction, not by the start state."""
    _, batches = simulate(seed, fmt, 2, statements)
    (_, start), (events, expected) = batches
    txids = sorted({e.txid for e in events})
    seen = set(txids[: min(split, len(txids))])
    snapshot = python_fold(start, [e for e in events if e.txid in seen])
    # a TRUNCATE the snapshot already shows empties it again: the same
    assert fixed(python_fold(snapshot, events)) == fixed(expected)


def test_a_shift_and_a_swap_by_the_rules():
    """id = id + 1 over 1, 2, 3 (D1 I2 D2 I3 D3 I4) leaves 2, 3, 4; a swap leaves both rows
    with exchanged data; the last-event fold of before lost rows in both."""
    src = Source("sql")
    for k in (1, 2, 3):
        src.insert(k, k * 10, str(k))
    start = python_fold({}, src.events)
    shift_from = len(src.events)
    src.move({1: 2, 2: 3, 3: 4}, [1, 2, 3])
    after = python_fold(start, src.events[shift_from:])
    assert fixed(after) == {2: (2, 10, "1"), 3: (3, 20, "2"), 4: (4, 30, "3")}
    swap_from = len(src.events)
    src.move({2: 3, 3: 2}, [2, 3])
    swapped = python_fold(after, src.events[swap_from:])
    assert fixed(swapped) == {2: (2, 20, "2"), 3: (3, 10, "1"), 4: (4, 30, "3")}


# ---------------------------------------------------------------- the real fold and MERGE


def decoded_frame(spark, events: list[Event], tick: int):
    """The events as cdc.pipeline.decode's rows frame."""
    from cdc.pipeline.decode import meta, present, value

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
    from cdc.targets import merge

    truncates = [e.ev_id for e in events if e.op == "R"]
    keys = [str(e.values["id"]) for e in events if e.op != "R"]
    ints = sorted(int(k) for k in keys)
    key_range = (str(ints[0]), str(ints[-1])) if ints else None
    target = merge.Target(path, "test/fold", tick)
    merge.apply_mirror(
        spark,
        target,
        decoded_frame(spark, events, tick),
        COLUMNS,
        truncates[-1] if truncates else None,
        key_range,
    )


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
