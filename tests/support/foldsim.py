"""A model of PostgreSQL's side for the fold's tests (cdc.engines.spark.fold), and the fold's
rules in plain Python.

``Source`` is a table of three columns over the keys 1..5 and the events its capture writes
in the json or sql format (a sql DELETE carries the key only, a sql UPDATE the changed
columns); ``simulate`` runs random transactions on it (key moves, swaps and shifts under a
DEFERRABLE key, deletes, re-inserts, partial UPDATEs, truncates). ``python_fold`` applies
the documented rules to a target; ``RULES`` names one small case per rule. The same cases
and simulations feed the pure tests (tests/unit) and the real fold and MERGE (tests/spark).
``engine_fold`` runs the same simulations through an engine's fold (both engines: the
``engine`` fixture, tests/spark/conftest.py; the Arrow fold without a JVM: tests/unit). No
Spark and no PostgreSQL here.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from cdc.pg.pgtypes import Column
from cdc.rows import meta, present, value
from tests.support.foldrows import merge_folded

# The fold's three actions per key (cdc.rows.UPSERT, DELETE, UPDATE_IF_PRESENT).
UPSERT, DELETE, UPDATE_IF_PRESENT = "U", "D", "M"

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

    def insert(self, key: int, a: int | None, b: str | None) -> None:
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
    """cdc.engines.spark.fold's rules in plain Python: the target after one batch."""
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
            action = UPSERT
        elif deciding is None:
            action = UPDATE_IF_PRESENT
        else:
            action = DELETE
        if action == DELETE:
            result.pop(key, None)
            continue
        if action == UPDATE_IF_PRESENT and key not in result:
            continue
        row = {"id": key, "a": None, "b": None} if last_insert else dict(result.get(key, {}))
        if not row:
            row = {"id": key, "a": None, "b": None}
        for e in mine:
            if e.op in ("I", "U") and (last_insert is None or e.ev_id >= last_insert):
                row.update(e.values)
        result[key] = row
    return result


def decoded(events: list[Event]) -> list[Row]:
    """The events as decoded rows of COLUMNS, under the row contract's names (cdc.rows: meta
    op, ev_id, ev_txid; value(i) and present(i) per column)."""
    return [
        {
            meta("op"): e.op,
            meta("ev_id"): e.ev_id,
            meta("ev_txid"): e.txid,
            **{value(i): e.values.get(c.name) for i, c in enumerate(COLUMNS)},
            **{present(i): c.name in e.values for i, c in enumerate(COLUMNS)},
        }
        for e in events
    ]


Fold = Callable[[list[Row], list[Column]], list[Row]]


def engine_fold(fold: Fold) -> Callable[[dict[int, Row], list[Event]], dict[int, Row]]:
    """python_fold's counterpart by an engine's fold (decoded rows -> folded rows, as
    tests/support/engines.py gives them): the events after the batch's last TRUNCATE (which
    empties the target) folded, and MERGEd into the target as the batch's MERGE plan says
    (tests/support/foldrows.py's merge_folded)."""

    def run(target: dict[int, Row], events: list[Event]) -> dict[int, Row]:
        truncated = [e.ev_id for e in events if e.op == "R"]
        after = [e for e in events if not truncated or e.ev_id > truncated[-1]]
        start = {} if truncated else {(k,): v for k, v in target.items()}
        folded = fold(decoded(after), COLUMNS) if after else []
        return {k: v for (k,), v in merge_folded(start, folded, COLUMNS).items()}

    return run


def fixed(src_rows: dict[int, Row]) -> dict[int, tuple]:
    return {k: (v["id"], v["a"], v["b"]) for k, v in src_rows.items()}


# ---------------------------------------------------------------- one case per rule


@dataclass(frozen=True)
class RuleCase:
    """Two batches on one Source: ``setup`` fills the target, ``batch`` shows the rule;
    ``expected`` is the target after both (and the source's state)."""

    name: str
    fmt: str
    setup: Callable[[Source], None]
    batch: Callable[[Source], None]
    expected: dict[int, tuple]

    def run(self) -> tuple[Source, list[Event], list[Event]]:
        """The source after both batches, and each batch's events."""
        src = Source(self.fmt)
        self.setup(src)
        src.commit()
        first = len(src.events)
        self.batch(src)
        src.commit()
        return src, src.events[:first], src.events[first:]


def _rows_1_2(src: Source) -> None:
    src.insert(1, 10, "x")
    src.insert(2, 20, "y")


def _reinsert_then_update(src: Source) -> None:
    src.delete(1)
    src.insert(1, None, "n")
    src.update(1, {"b": "z"})


def _update_then_delete(src: Source) -> None:
    src.update(1, {"a": 5})
    src.commit()
    src.delete(1)


def _column_wise(src: Source) -> None:
    src.update(1, {"a": 5})
    src.commit()
    src.update(1, {"b": "p"})
    src.update(1, {"a": None})
    src.update(2, {"b": "q"})


def _truncate(src: Source) -> None:
    src.update(1, {"a": 5})
    src.insert(3, 30, "z")
    src.commit()
    src.truncate()
    src.insert(4, 40, "w")
    src.update(4, {"b": "v"})


def _delete_then_insert(src: Source) -> None:
    src.delete(2)
    src.insert(2, 21, None)


def _insert_then_delete(src: Source) -> None:
    src.insert(3, 30, "z")
    src.delete(3)


def _key_change(src: Source) -> None:
    src.move({1: 3}, [1])
    src.commit()
    src.update(3, {"a": 31})


def _key_change_back(src: Source) -> None:
    src.move({1: 3}, [1])
    src.move({3: 1}, [3])


RULES = [
    # an INSERT resets the row: its columns start from it, not from the target's row
    RuleCase("insert_resets", "sql", _rows_1_2, _reinsert_then_update,
             {1: (1, None, "z"), 2: (2, 20, "y")}),
    RuleCase("insert_resets", "json", _rows_1_2, _reinsert_then_update,
             {1: (1, None, "z"), 2: (2, 20, "y")}),
    # a DELETE after the UPDATEs ends the row
    RuleCase("delete_ends", "sql", _rows_1_2, _update_then_delete, {2: (2, 20, "y")}),
    RuleCase("delete_ends", "json", _rows_1_2, _update_then_delete, {2: (2, 20, "y")}),
    # sql UPDATEs carry the changed columns only: each column its last present value
    # (NULL included), the others kept from the target's row
    RuleCase("sql_update_column_wise", "sql", _rows_1_2, _column_wise,
             {1: (1, None, "p"), 2: (2, 20, "q")}),
    # a TRUNCATE empties the target; only the events after it count
    RuleCase("truncate_cut_off", "sql", _rows_1_2, _truncate, {4: (4, 40, "v")}),
    RuleCase("truncate_cut_off", "json", _rows_1_2, _truncate, {4: (4, 40, "v")}),
    # delete then insert in one transaction: the new row, none of the old row's columns
    RuleCase("delete_then_insert", "sql", _rows_1_2, _delete_then_insert,
             {1: (1, 10, "x"), 2: (2, 21, None)}),
    RuleCase("delete_then_insert", "json", _rows_1_2, _delete_then_insert,
             {1: (1, 10, "x"), 2: (2, 21, None)}),
    # insert then delete in one transaction: nothing
    RuleCase("insert_then_delete", "sql", _rows_1_2, _insert_then_delete,
             {1: (1, 10, "x"), 2: (2, 20, "y")}),
    # a key change is a DELETE of the old key and an INSERT of the new one
    RuleCase("key_change", "sql", _rows_1_2, _key_change, {2: (2, 20, "y"), 3: (3, 31, "x")}),
    RuleCase("key_change", "json", _rows_1_2, _key_change, {2: (2, 20, "y"), 3: (3, 31, "x")}),
    # moved away and back in one transaction: the row as it was
    RuleCase("key_change_and_back", "sql", _rows_1_2, _key_change_back,
             {1: (1, 10, "x"), 2: (2, 20, "y")}),
]  # fmt: skip
