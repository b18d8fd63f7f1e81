"""Randomized interleavings of producers, ticks, rotations and consumers (hypothesis).

Each example runs a list of operations against a fresh clone of the template database:
producer transactions on their own connections (READ COMMITTED or REPEATABLE READ, with
savepoints that are released or rolled back, ending in commit or rollback), forced ticks,
both steps of table rotation (with a rotation period of one microsecond, so that every
step 1 may rotate), and consumer steps that open, read (in chunks of 3), re-read and finish
batches. Along the way every batch is checked against a model of the queue, then everything
is drained and every consumer must have received each committed event exactly once.

CDC_HYPOTHESIS_EXAMPLES sets the number of examples (40 by default).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import psycopg
import pytest
from hypothesis import event, example, given, note, settings
from hypothesis import strategies as st

from cdc.pg.queue import Batch, Consumer, Event, Producer, Queue
from tests.support.databases import TEMPLATE, create_database, drop_database

QUEUE = "q"
PRODUCERS = 3
MAX_CONSUMERS = 3
CHUNK_SIZE = 3
EXAMPLES = int(os.environ.get("CDC_HYPOTHESIS_EXAMPLES", "40"))


# ---------------------------------------------------------------------------------------------
# Operations. Each is total, so that any list is a valid example and shrinks to a valid one:
# `txn` picks one of the open producer transactions (modulo their number; an Insert or a
# Savepoint with none open begins one, READ COMMITTED and to be committed), `consumer` one of
# the consumers, and an operation that does not apply (End with no transaction open, Begin with
# every producer busy) does nothing.


@dataclass(frozen=True)
class Begin:
    """Begin on a free producer; REPEATABLE READ takes its snapshot at once."""

    repeatable_read: bool
    commit: bool  # the plan: how End (or the final drain) ends the transaction


@dataclass(frozen=True)
class Insert:
    txn: int
    count: int


@dataclass(frozen=True)
class Savepoint:
    txn: int


@dataclass(frozen=True)
class RollbackToSavepoint:
    """Roll back to the innermost savepoint (of a transaction that has one) and release it."""

    txn: int


@dataclass(frozen=True)
class ReleaseSavepoint:
    txn: int


@dataclass(frozen=True)
class InsertInSavepoint:
    """Savepoint, insert, then roll back to the savepoint or release it, in one step."""

    txn: int
    count: int
    rollback: bool


@dataclass(frozen=True)
class End:
    """Commit or roll back a transaction, as planned at its beginning."""

    txn: int


@dataclass(frozen=True)
class Tick:
    """force_tick, then cdc.ticker(queue) or the general cdc.ticker()."""

    general: bool


@dataclass(frozen=True)
class RotateStep1:
    """maint_rotate_tables_step1, and maybe step 2 right after in its own transaction.

    When an open transaction holds the table step 1 would empty, step 1 waits out its
    lock_timeout (2 s) and gives up; that is skipped unless wait_if_locked (too slow to
    do in every run: the explicit examples do it).
    """

    then_step2: bool
    wait_if_locked: bool = False


@dataclass(frozen=True)
class RotateStep2:
    pass


@dataclass(frozen=True)
class Consume:
    """next_batch and read it; maybe read it a second time; maybe finish it."""

    consumer: int
    reread: bool
    finish: bool


Op = (
    Begin
    | Insert
    | Savepoint
    | RollbackToSavepoint
    | ReleaseSavepoint
    | InsertInSavepoint
    | End
    | Tick
    | RotateStep1
    | RotateStep2
    | Consume
)

# picks an open transaction or a consumer, modulo their number
index = st.integers(0, max(PRODUCERS, MAX_CONSUMERS) - 1)


def weighted(*choices: tuple[int, st.SearchStrategy[Op]]) -> st.SearchStrategy[Op]:
    """One of the strategies, each as often as its weight (shrinks towards the first)."""
    pool = [strategy for weight, strategy in choices for _ in range(weight)]
    return st.sampled_from(pool).flatmap(lambda strategy: strategy)


operation: st.SearchStrategy[Op] = weighted(
    (3, st.builds(Tick, st.booleans())),
    (4, st.builds(Insert, index, st.integers(1, 3))),
    (3, st.builds(Begin, st.booleans(), st.booleans())),
    (2, st.builds(End, index)),
    (1, st.builds(Savepoint, index)),
    (1, st.builds(RollbackToSavepoint, index)),
    (1, st.builds(ReleaseSavepoint, index)),
    (2, st.builds(InsertInSavepoint, index, st.integers(1, 3), st.booleans())),
    (4, st.builds(RotateStep1, st.booleans())),
    (1, st.just(RotateStep2())),
    (4, st.builds(Consume, index, st.booleans(), st.booleans())),
)
# Runs of about 25 operations (up to 100): one list strategy would make most runs a few steps
# long, while a list of lists still shrinks well (by dropping operations or whole sublists).
operations = st.lists(st.lists(operation, max_size=10), max_size=10).map(
    lambda parts: [op for part in parts for op in part]
)


# ---------------------------------------------------------------------------------------------
# The model of the queue, and the runner that applies operations to the database and checks
# every batch against the model.


@dataclass
class Txn:
    commit: bool
    repeatable_read: bool
    # levels[0]: events inserted at top level; levels[i]: inside the i-th open savepoint
    levels: list[list[int]] = field(default_factory=lambda: [[]])
    cur_table_at_start: int | None = None
    dropped_savepoint: bool = False  # a savepoint with events in it was rolled back


@dataclass
class OpenBatch:
    batch_id: int
    prev_tick_id: int
    cur_tick_id: int
    rows: list[Event]


class Runner:
    """Applies operations to a database and checks every batch against a model of the queue."""

    def __init__(self, dsn: str, consumers: int) -> None:
        self.opened: list[psycopg.Connection] = []
        try:
            self._setup(dsn, consumers)
        except BaseException:
            self.close()
            raise

    def _setup(self, dsn: str, consumers: int) -> None:
        self.admin = self._connect(dsn)
        self.ticker = self._connect(dsn)
        self.maint = self._connect(dsn)
        self.queue = Queue(self.admin, QUEUE)
        assert self.queue.create()
        self.queue.set_config("rotation_period", "1 microsecond")
        self.queue_id: int = self.admin.execute(
            "select queue_id from cdc.queue where queue_name = %s", (QUEUE,)
        ).fetchone()[0]  # type: ignore[index]
        self.consumers = [
            Consumer(self._connect(dsn), QUEUE, f"c{i}", chunk_size=CHUNK_SIZE)
            for i in range(consumers)
        ]
        for c in self.consumers:  # before any insert: registration starts at the latest tick
            assert c.register()
        first_tick = self.queue.info()["last_tick_id"]
        self.ticks: list[int] = [first_tick]
        self.position = [first_tick for _ in self.consumers]
        self.open_batch: list[OpenBatch | None] = [None for _ in self.consumers]
        self.delivered: list[list[int]] = [[] for _ in self.consumers]
        self.producers = [Producer(self._connect(dsn), QUEUE) for _ in range(PRODUCERS)]
        self.txns: list[Txn | None] = [None] * PRODUCERS
        self.data: dict[int, str] = {}  # ev_id -> ev_data of every inserted event
        self.committed: dict[int, int] = {}  # ev_id -> last tick id when its txn committed
        self.rolled_back: set[int] = set()
        self.step1_pending = False  # a rotation's step 2 is still to be run
        self.rotations = 0
        self.rotations_at_insert: dict[int, int] = {}  # ev_id -> rotations before its insert

    def _connect(self, dsn: str) -> psycopg.Connection:
        # Commits need not wait for the disk: what other sessions see is the same.
        conn = psycopg.connect(dsn, autocommit=True, options="-c synchronous_commit=off")
        self.opened.append(conn)
        return conn

    def close(self) -> None:
        for conn in self.opened:
            conn.close()

    def cur_table(self) -> int:
        return self.queue.info()["queue_cur_table"]

    def busy(self, with_savepoint: bool = False) -> list[int]:
        """Producers with an open transaction (that has an open savepoint)."""
        return [
            p
            for p, txn in enumerate(self.txns)
            if txn is not None and (len(txn.levels) > 1 or not with_savepoint)
        ]

    def pick(self, k: int, with_savepoint: bool = False) -> int | None:
        busy = self.busy(with_savepoint)
        return busy[k % len(busy)] if busy else None

    def pick_or_begin(self, k: int) -> int:
        p = self.pick(k)
        if p is None:
            p = 0
            self.begin(p, repeatable_read=False, commit=True)
        return p

    # -- producers ------------------------------------------------------------------------

    def begin(self, p: int, repeatable_read: bool, commit: bool) -> Txn:
        conn = self.producers[p].conn
        level = "repeatable read" if repeatable_read else "read committed"
        conn.execute(f"begin isolation level {level}")
        txn = Txn(commit=commit, repeatable_read=repeatable_read)
        if repeatable_read:
            # The snapshot is taken now, so later rotations may make it stale: its inserts
            # then go to the table that was current at this moment.
            row = conn.execute(
                "select queue_cur_table from cdc.queue where queue_name = %s", (QUEUE,)
            ).fetchone()
            assert row is not None
            txn.cur_table_at_start = row[0]
        self.txns[p] = txn
        plan = "commit" if commit else "rollback"
        note(f"p{p}: begin {level} (to {plan}), current table {txn.cur_table_at_start}")
        return txn

    def insert(self, p: int, count: int) -> None:
        txn = self.txns[p]
        assert txn is not None
        if txn.repeatable_read and txn.cur_table_at_start != self.cur_table():
            event("insert from a REPEATABLE READ snapshot older than a rotation")
        ids = []
        for _ in range(count):
            data = f"p{p}-{len(self.data)}"
            ev_id = self.producers[p].insert("I", data)
            assert ev_id not in self.data, f"ev_id {ev_id} handed out twice"
            self.data[ev_id] = data
            self.rotations_at_insert[ev_id] = self.rotations
            ids.append(ev_id)
        txn.levels[-1].extend(ids)
        note(f"p{p}: insert {ids}")

    def savepoint(self, p: int) -> None:
        txn = self.txns[p]
        assert txn is not None
        txn.levels.append([])
        name = f"sp{len(txn.levels) - 1}"
        self.producers[p].conn.execute(f"savepoint {name}")
        note(f"p{p}: savepoint {name}")

    def rollback_to_savepoint(self, p: int) -> None:
        txn = self.txns[p]
        assert txn is not None and len(txn.levels) > 1
        name = f"sp{len(txn.levels) - 1}"
        self.producers[p].conn.execute(f"rollback to savepoint {name}")
        self.producers[p].conn.execute(f"release savepoint {name}")
        dropped = txn.levels.pop()
        if dropped:
            txn.dropped_savepoint = True
        self.rolled_back.update(dropped)
        note(f"p{p}: rollback to savepoint {name}, dropping {dropped}")

    def release_savepoint(self, p: int) -> None:
        txn = self.txns[p]
        assert txn is not None and len(txn.levels) > 1
        name = f"sp{len(txn.levels) - 1}"
        self.producers[p].conn.execute(f"release savepoint {name}")
        inner = txn.levels.pop()
        txn.levels[-1].extend(inner)
        note(f"p{p}: release savepoint {name}")

    def end(self, p: int) -> None:
        txn = self.txns[p]
        if txn is None:
            return
        ids = [ev_id for level in txn.levels for ev_id in level]
        if txn.commit:
            self.producers[p].conn.execute("commit")
            for ev_id in ids:
                self.committed[ev_id] = self.ticks[-1]
            if ids and txn.dropped_savepoint:
                event("commit of other events after a savepoint rolled back")
        else:
            self.producers[p].conn.execute("rollback")
            self.rolled_back.update(ids)
        self.txns[p] = None
        note(f"p{p}: {'commit' if txn.commit else 'rollback'} of {ids}")

    # -- ticker and maintenance ------------------------------------------------------------

    def tick(self, general: bool) -> None:
        q = Queue(self.ticker, QUEUE)
        last = q.force_tick()
        assert last == self.ticks[-1]
        if general:
            assert self.ticker.execute("select cdc.ticker()").fetchone() == (1,)
            new = q.info()["last_tick_id"]
        else:
            new = q.tick()
        assert new is not None and new > last
        self.ticks.append(new)
        note(f"tick {new}")

    def next_table_locked(self) -> bool:
        """Whether an open producer transaction holds a lock on the table step 1 would empty."""
        info = self.queue.info()
        nxt = (info["queue_cur_table"] + 1) % info["queue_ntables"]
        row = self.maint.execute(
            "select exists (select 1 from pg_locks"
            " where database = (select oid from pg_database where datname = current_database())"
            " and relation = to_regclass(%s) and pid <> pg_backend_pid())",
            (f"cdc.event_{self.queue_id}_{nxt}",),
        ).fetchone()
        assert row is not None
        return bool(row[0])

    def rotate_step1(self, wait_if_locked: bool) -> None:
        locked = self.next_table_locked()
        if locked and not self.step1_pending:
            # Step 1 would wait out its lock_timeout, then must give up: the uncommitted rows
            # are invisible to its check of the table's newest transaction.
            if not wait_if_locked:
                event("rotation step 1 skipped: a producer holds the next table")
                note("rotation step 1 skipped: a producer holds the next table")
                return
            event("rotation step 1 waited for a producer holding the next table")
        row = self.maint.execute("select cdc.maint_rotate_tables_step1(%s)", (QUEUE,)).fetchone()
        assert row is not None
        if locked:
            assert row[0] == 0, "step 1 emptied a table that an open transaction inserts into"
        if row[0] == 1:
            assert not self.step1_pending, "rotated again before step 2"
            self.step1_pending = True
            self.rotations += 1
            event("rotated")
            if self.rotations >= 3:
                event("rotated 3 times (every table emptied once)")
        note(f"rotation step 1: {row[0]}, current table now {self.cur_table()}")

    def rotate_step2(self) -> None:
        row = self.maint.execute("select cdc.maint_rotate_tables_step2()").fetchone()
        assert row is not None
        assert row[0] == (1 if self.step1_pending else 0)
        self.step1_pending = False
        note(f"rotation step 2: {row[0]}")

    # -- consumers -------------------------------------------------------------------------

    @staticmethod
    def read(batch: Batch) -> list[Event]:
        chunks = list(batch.chunks())
        assert all(0 < len(chunk) <= CHUNK_SIZE for chunk in chunks)
        return [e for chunk in chunks for e in chunk]

    def consume(self, c: int, reread: bool, finish: bool) -> bool:
        """One consumer step; False when there was no batch."""
        consumer = self.consumers[c]
        batch = consumer.next_batch()
        known = self.open_batch[c]
        pos = self.position[c]
        if batch is None:
            assert known is None, f"consumer {c}: open batch {known} not returned again"
            assert self.ticks[-1] == pos, f"consumer {c}: no batch although ticks follow {pos}"
            return False
        rows = self.read(batch)
        if reread:
            assert self.read(batch) == rows, f"batch {batch.batch_id}: re-read differs"
        info = batch.info
        if known is not None:
            assert (info.batch_id, info.prev_tick_id, info.cur_tick_id) == (
                known.batch_id,
                known.prev_tick_id,
                known.cur_tick_id,
            ), f"consumer {c}: next_batch changed the open batch"
            assert rows == known.rows, f"batch {info.batch_id}: rows changed while open"
            event("open batch read again in a later step")
        else:
            self.check_new_batch(c, info.prev_tick_id, info.cur_tick_id, rows)
            known = OpenBatch(info.batch_id, info.prev_tick_id, info.cur_tick_id, rows)
            self.open_batch[c] = known
        note(
            f"c{c}: batch {info.batch_id} ({info.prev_tick_id}, {info.cur_tick_id}]:"
            f" {[e.ev_id for e in rows]}{', finished' if finish else ''}"
        )
        if finish:
            batch.finish()
            self.delivered[c].extend(e.ev_id for e in rows)
            self.position[c] = known.cur_tick_id
            self.open_batch[c] = None
        return True

    def check_new_batch(self, c: int, prev_tick: int, cur_tick: int, rows: list[Event]) -> None:
        pos = self.position[c]
        assert prev_tick == pos, f"consumer {c}: batch starts at tick {prev_tick}, not {pos}"
        assert cur_tick == self.ticks[self.ticks.index(pos) + 1], (
            f"consumer {c}: batch from tick {prev_tick} ends at {cur_tick}, not the next tick"
        )
        ids = [e.ev_id for e in rows]
        assert ids == sorted(set(ids)), f"batch ({prev_tick}, {cur_tick}]: not in ev_id order"
        leaked = [i for i in ids if i in self.rolled_back]
        assert not leaked, f"rolled-back events delivered: {leaked}"
        uncommitted = [i for i in ids if i not in self.committed]
        assert not uncommitted, f"events of open transactions delivered: {uncommitted}"
        # The ticks cut the committed transactions into batches: an event belongs to the batch
        # whose ticks enclose its commit.
        expected = sorted(i for i, t in self.committed.items() if prev_tick <= t < cur_tick)
        assert ids == expected, (
            f"consumer {c}, batch ({prev_tick}, {cur_tick}]: got {ids}, expected {expected}"
        )
        for e in rows:
            assert e.ev_data == self.data[e.ev_id] and e.ev_type == "I"
        if rows:
            event("batch with events")
        if len({self.rotations_at_insert[i] for i in ids}) > 1:
            event("batch with events inserted before and after a rotation")

    # -- the run ---------------------------------------------------------------------------

    def apply(self, op: Op) -> None:
        match op:
            case Begin(rr, commit):
                free = [p for p, txn in enumerate(self.txns) if txn is None]
                if free:
                    self.begin(free[0], rr, commit)
            case Insert(k, n):
                self.insert(self.pick_or_begin(k), n)
            case Savepoint(k):
                self.savepoint(self.pick_or_begin(k))
            case RollbackToSavepoint(k):
                if (p := self.pick(k, with_savepoint=True)) is not None:
                    self.rollback_to_savepoint(p)
            case ReleaseSavepoint(k):
                if (p := self.pick(k, with_savepoint=True)) is not None:
                    self.release_savepoint(p)
            case InsertInSavepoint(k, n, rollback):
                p = self.pick_or_begin(k)
                self.savepoint(p)
                self.insert(p, n)
                if rollback:
                    self.rollback_to_savepoint(p)
                else:
                    self.release_savepoint(p)
            case End(k):
                if (p := self.pick(k)) is not None:
                    self.end(p)
            case Tick(general):
                self.tick(general)
            case RotateStep1(then_step2, wait_if_locked):
                self.rotate_step1(wait_if_locked)
                if then_step2:
                    self.rotate_step2()
            case RotateStep2():
                self.rotate_step2()
            case Consume(k, reread, finish):
                self.consume(k % len(self.consumers), reread, finish)

    def drain(self) -> None:
        for p in range(PRODUCERS):
            self.end(p)
        self.tick(general=False)
        for c in range(len(self.consumers)):
            for _ in range(len(self.ticks) + 1):
                if not self.consume(c, reread=False, finish=True):
                    break
            else:
                pytest.fail(f"consumer {c}: more batches than ticks")
        inserted = set(self.data)
        assert self.rolled_back.isdisjoint(self.committed)
        assert inserted == self.rolled_back | set(self.committed)
        for c, ids in enumerate(self.delivered):
            dupes = sorted({i for i in ids if ids.count(i) > 1})
            assert not dupes, f"consumer {c}: delivered more than once: {dupes}"
            missing = sorted(set(self.committed) - set(ids))
            assert not missing, f"consumer {c}: committed events never delivered: {missing}"
            assert set(ids) == set(self.committed)


@contextmanager
def fresh_database(admin_dsn: str) -> Iterator[str]:
    name = f"cdc_prop_{uuid.uuid4().hex[:12]}"
    dsn = create_database(admin_dsn, name, template=TEMPLATE)
    try:
        yield dsn
    finally:
        drop_database(admin_dsn, name)


@pytest.mark.slow
@settings(max_examples=EXAMPLES, deadline=None)
# A transaction open across two rotations commits after the consumers' last tick, whose snapshot
# xmin it is: the third rotation must not empty its table before the consumers pass it.
@example(
    consumers=2,
    ops=[
        Insert(0, 1),
        RotateStep1(then_step2=True),
        RotateStep1(then_step2=True),
        Tick(general=False),
        Consume(0, reread=False, finish=True),
        Consume(1, reread=False, finish=True),
        End(0),
        RotateStep1(then_step2=True),
    ],
)
# The third rotation would empty the table an open transaction has inserted into: step 1 waits
# for its lock (2 s) and gives up.
@example(
    consumers=2,
    ops=[
        Insert(0, 1),
        RotateStep1(then_step2=True),
        RotateStep1(then_step2=True),
        RotateStep1(then_step2=True, wait_if_locked=True),
    ],
)
# A REPEATABLE READ snapshot taken before a rotation inserts into the previous table, while a
# batch stays open across the rotation and the commit.
@example(
    consumers=2,
    ops=[
        Begin(repeatable_read=True, commit=True),
        RotateStep1(then_step2=True),
        Insert(0, 2),
        Tick(general=False),
        Consume(0, reread=True, finish=False),
        RotateStep1(then_step2=True),
        End(0),
        Tick(general=True),
        Consume(0, reread=True, finish=True),
        RotateStep1(then_step2=True),
    ],
)
@given(
    consumers=st.integers(2, MAX_CONSUMERS),
    ops=operations,
)
def test_interleavings_deliver_each_committed_event_once(
    admin_dsn: str, template_dsn: str, consumers: int, ops: list[Op]
) -> None:
    """Every committed event reaches every consumer once, in ev_id order, in stable batches."""
    with fresh_database(admin_dsn) as dsn:
        runner = Runner(dsn, consumers)
        try:
            for op in ops:
                runner.apply(op)
            runner.drain()
        finally:
            runner.close()
