"""Batch semantics of the queue engine (DESIGN §2), against a real server."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from cdc import errors
from cdc.pg import install
from cdc.pg.queue import Consumer, Producer, Queue
from tests.support.roles import LoginRoles


def tick(conn: psycopg.Connection, queue: str = "q") -> int:
    """Force and make a tick; its id."""
    q = Queue(conn, queue)
    q.force_tick()
    tick_id = q.tick()
    assert tick_id is not None
    return tick_id


def drain(consumer: Consumer) -> list[list[int]]:
    """Take batches until there are none; the ev_ids of each batch."""
    batches = []
    while True:
        with consumer.batch() as batch:
            if batch is None:
                return batches
            batches.append([e.ev_id for e in batch.events()])


def flat(batches: list[list[int]]) -> list[int]:
    return [ev for b in batches for ev in b]


@pytest.fixture
def queue(conn: psycopg.Connection) -> Queue:
    q = Queue(conn, "q")
    q.create()
    return q


def test_create_queue_twice_returns_false(queue):
    """create_queue on an existing queue changes nothing and says so."""
    assert queue.create() is False


def test_lifecycle_create_register_batch_finish_unregister_drop(conn, queue):
    """The full life of a queue and a consumer, ending with nothing left behind."""
    c = Consumer(conn, "q", "c")
    assert c.register() is True
    assert c.register() is False
    ev = Producer(conn, "q").insert("I", "x", "public.t")
    tick(conn)
    batch = c.next_batch()
    assert batch is not None
    events = list(batch.events())
    assert [(e.ev_id, e.ev_type, e.ev_data, e.ev_extra1) for e in events] == [
        (ev, "I", "x", "public.t")
    ]
    batch.finish()
    with pytest.raises(errors.BatchNotFound):
        batch.finish()
    c.unregister()
    queue.drop()
    assert conn.execute("select count(*) from cdc.queue").fetchone()[0] == 0
    assert conn.execute("select count(*) from cdc.consumer").fetchone()[0] == 0
    assert (
        conn.execute(
            "select count(*) from pg_inherits where inhparent = 'cdc.event'::regclass"
        ).fetchone()[0]
        == 0
    )


def test_drop_queue_with_consumers_needs_force(conn, queue):
    """A queue with consumers is dropped only with force."""
    Consumer(conn, "q", "c").register()
    with pytest.raises(errors.QueueInUse, match="'c'"):
        queue.drop()
    queue.drop(force=True)
    assert conn.execute("select count(*) from cdc.subscription").fetchone()[0] == 0


def test_events_before_registration_are_not_delivered(conn, queue):
    """register_consumer starts at the latest tick: earlier events are not delivered."""
    p = Producer(conn, "q")
    p.insert("I", "before")
    tick(conn)
    c = Consumer(conn, "q", "c")
    c.register()
    after = p.insert("I", "after")
    tick(conn)
    assert flat(drain(c)) == [after]


def test_several_consumers_each_get_every_event_once(conn, queue):
    """Three consumers, several batches each: each gets every event exactly once."""
    consumers = [Consumer(conn, "q", name) for name in ("a", "b", "c")]
    for c in consumers:
        c.register()
    p = Producer(conn, "q")
    sent: list[int] = []
    for round_ in range(4):
        sent += [p.insert("I", f"{round_}-{i}") for i in range(5)]
        tick(conn)
        drain(consumers[round_ % 3])  # consumers advance at different paces
    for c in consumers:
        drain(c)
    for c in consumers:
        got = conn.execute(
            "select count(*) from cdc.subscription s"
            " join cdc.consumer c on c.co_id = s.sub_consumer"
            " where c.co_name = %s and s.sub_batch is null",
            (c.name,),
        ).fetchone()[0]
        assert got == 1
    # Re-run from scratch with a fresh set of consumers to compare full deliveries.
    delivered = {}
    for c in consumers:
        c.register_at(1)
        delivered[c.name] = flat(drain(c))
    for name, got in delivered.items():
        assert got == sent, name


def test_next_batch_is_idempotent_until_finish(conn, queue):
    """next_batch returns the same batch id and the same rows until finish_batch."""
    c = Consumer(conn, "q", "c")
    c.register()
    p = Producer(conn, "q")
    for i in range(10):
        p.insert("I", str(i))
    tick(conn)
    p.insert("I", "later")
    tick(conn)
    first = c.next_batch()
    rows1 = list(first.events())
    second = c.next_batch()
    assert second.batch_id == first.batch_id
    assert second.info == first.info
    assert list(second.events()) == rows1
    first.finish()
    third = c.next_batch()
    assert third.batch_id != first.batch_id
    assert [e.ev_data for e in third.events()] == ["later"]


def test_failed_block_leaves_batch_open(conn, queue):
    """An exception in the batch block leaves the batch open; the next call gets it again."""
    c = Consumer(conn, "q", "c")
    c.register()
    Producer(conn, "q").insert("I", "x")
    tick(conn)
    with pytest.raises(RuntimeError), c.batch() as batch:
        opened = batch.batch_id
        raise RuntimeError("apply failed")
    with c.batch() as batch:
        assert batch.batch_id == opened
        assert [e.ev_data for e in batch.events()] == ["x"]
    with c.batch() as batch:
        assert batch is None


def test_chunks_are_bounded_and_ordered(conn, queue):
    """The chunked reader returns the batch in ev_id order, chunk_size rows at most."""
    c = Consumer(conn, "q", "c", chunk_size=7)
    c.register()
    conn.execute("select cdc.insert_event('q', 'I', g::text) from generate_series(1, 50) g")
    tick(conn)
    with c.batch() as batch:
        chunks = list(batch.chunks())
    assert [len(ch) for ch in chunks] == [7] * 7 + [1]
    ids = [e.ev_id for ch in chunks for e in ch]
    assert ids == sorted(ids) and len(ids) == 50


def test_open_transaction_across_ticks_delivered_once_when_committed(conn, queue, connect):
    """A transaction open across ticks lands, exactly once, in the batch after its commit."""
    c = Consumer(conn, "q", "c")
    c.register()
    long_tx = connect(autocommit=False)
    long_ev = Producer(long_tx, "q").insert("I", "long")  # transaction stays open
    p = Producer(conn, "q")
    early = p.insert("I", "early")
    tick(conn)
    assert flat(drain(c)) == [early]
    mid = p.insert("I", "mid")
    tick(conn)
    assert flat(drain(c)) == [mid]
    long_tx.commit()
    tick(conn)
    assert flat(drain(c)) == [long_ev]
    tick(conn)
    assert drain(c) == [[]]


def test_rolled_back_events_never_delivered(conn, queue, connect):
    """Events of rolled-back transactions and of rolled-back savepoints are not delivered."""
    c = Consumer(conn, "q", "c")
    c.register()
    tx = connect(autocommit=False)
    p = Producer(tx, "q")
    p.insert("I", "rolled back")
    tx.rollback()
    kept = p.insert("I", "kept")
    with tx.transaction():  # a savepoint inside the open transaction
        p.insert("I", "savepoint kept")
    with pytest.raises(RuntimeError), tx.transaction():
        p.insert("I", "savepoint rolled back")
        raise RuntimeError
    also = p.insert("I", "after savepoint")
    tx.commit()
    tick(conn)
    got = [e for b in drain(c) for e in b]
    data = [
        r[0]
        for r in conn.execute(
            "select ev_data from cdc.event where ev_id = any(%s) order by ev_id", (got,)
        )
    ]
    assert data == ["kept", "savepoint kept", "after savepoint"]
    assert kept in got and also in got


def test_next_batch_custom_spans_ticks_by_count(conn, queue):
    """next_batch_custom with min_count joins ticks until enough events, else gives none."""
    c = Consumer(conn, "q", "c")
    c.register()
    p = Producer(conn, "q")
    for i in range(3):
        p.insert("I", str(i))
        tick(conn)
    assert c.next_batch(min_count=10) is None
    for i in range(8):
        p.insert("I", str(i))
    tick(conn)
    batch = c.next_batch(min_count=10)
    assert batch is not None
    assert batch.info.cur_tick_id - batch.info.prev_tick_id == 4
    assert len(list(batch.events())) == 11


def test_each_tick_notifies(conn, queue, connect):
    """Every tick sends NOTIFY cdc_tick with the queue and tick id as JSON."""
    listener = connect()
    listener.execute("listen cdc_tick")
    made = tick(conn)
    notes = []
    for note in listener.notifies(timeout=5, stop_after=1):
        notes.append(note)
    assert [json.loads(n.payload) for n in notes] == [{"queue": "q", "tick_id": made}]
    assert notes[0].channel == "cdc_tick"


def test_ticker_thresholds(conn, queue):
    """The ticker ticks on max_count new events, not before; idle queues wait idle_period."""
    queue.set_config("ticker_max_count", 5)
    queue.set_config("ticker_max_lag", "1 hour")
    queue.set_config("ticker_idle_period", "1 hour")
    assert queue.tick() is None  # no events, idle period not reached
    p = Producer(conn, "q")
    for _ in range(4):
        p.insert("I", "x")
    assert queue.tick() is None  # 4 < 5 and lag not reached
    p.insert("I", "x")
    assert queue.tick() is not None
    queue.set_config("ticker_max_lag", "1 microsecond")
    p.insert("I", "x")
    assert queue.tick() is not None  # one event, lag passed


def test_general_ticker_skips_paused_and_external(conn, queue):
    """cdc.ticker() skips paused queues and queues with an external ticker."""
    for name in ("paused", "external"):
        Queue(conn, name).create()
    Queue(conn, "paused").set_config("ticker_paused", True)
    Queue(conn, "external").set_config("external_ticker", True)
    for name in ("q", "paused", "external"):
        Queue(conn, name).force_tick()
    assert conn.execute("select cdc.ticker()").fetchone()[0] == 1
    with pytest.raises(errors.TickerNotAllowed, match="paused"):
        Queue(conn, "paused").tick()


def test_ticker_refuses_repeatable_read(conn, queue, connect):
    """A tick made at REPEATABLE READ is refused: it could break the order of snapshots."""
    rr = connect(autocommit=False)
    rr.execute("set transaction isolation level repeatable read")
    with pytest.raises(errors.WrongIsolation):
        Queue(rr, "q").tick()


def test_per_tx_limit_is_enforced(conn, queue, connect):
    """More events than per_tx_limit in one transaction fail; a new transaction starts at 0."""
    queue.set_config("per_tx_limit", 3)
    tx = connect(autocommit=False)
    p = Producer(tx, "q")
    for _ in range(3):
        p.insert("I", "x")
    with pytest.raises(errors.PerTxLimitExceeded, match="limit of 3"):
        p.insert("I", "x")
    tx.rollback()
    for _ in range(3):
        p.insert("I", "x")
    tx.commit()
    queue.set_config("per_tx_limit", None)
    for _ in range(5):
        p.insert("I", "x")
    tx.commit()


def test_disable_insert(conn, queue):
    """A queue with disable_insert refuses events with a typed error."""
    queue.set_config("disable_insert", True)
    with pytest.raises(errors.InsertDisabled):
        Producer(conn, "q").insert("I", "x")


def test_retry_returns_to_the_asking_consumer_only(conn, queue):
    """A retried event comes back, with ev_retry 1, to the consumer that asked, not to others."""
    a, b = Consumer(conn, "q", "a"), Consumer(conn, "q", "b")
    a.register()
    b.register()
    ev = Producer(conn, "q").insert("I", "x")
    tick(conn)
    with a.batch() as batch:
        batch.retry(ev, seconds=0)
    assert flat(drain(b)) == [ev]
    assert conn.execute("select cdc.maint_retry_events()").fetchone()[0] == 1
    tick(conn)
    with a.batch() as batch:
        again = list(batch.events())
    assert [(e.ev_id, e.ev_retry, e.ev_data) for e in again] == [(ev, 1, "x")]
    assert drain(b) == [[]]


def test_batch_retry_and_not_due_retries_wait(conn, queue):
    """batch_retry moves every event; retries not yet due stay in the retry queue."""
    c = Consumer(conn, "q", "c")
    c.register()
    p = Producer(conn, "q")
    ids = [p.insert("I", str(i)) for i in range(3)]
    tick(conn)
    with c.batch() as batch:
        assert batch.retry_all(seconds=3600) == 3
    assert conn.execute("select cdc.maint_retry_events()").fetchone()[0] == 0
    conn.execute("update cdc.retry_queue set ev_retry_after = now() - interval '1 second'")
    assert conn.execute("select cdc.maint_retry_events()").fetchone()[0] == 3
    tick(conn)
    assert flat(drain(c)) == ids


def test_retry_limit_sends_event_to_dead_letter(conn, queue):
    """Past max_retries an event goes to cdc.dead_letter with the reason, and stops coming back."""
    queue.set_config("max_retries", 2)
    c = Consumer(conn, "q", "c")
    c.register()
    ev = Producer(conn, "q").insert("I", "poison")
    tick(conn)
    seen = 0
    for _ in range(5):
        with c.batch() as batch:
            events = list(batch.events())
            for e in events:
                seen += 1
                batch.retry(e.ev_id, seconds=0)
        conn.execute("select cdc.maint_retry_events()")
        tick(conn)
    assert seen == 3  # first delivery and two retries
    dead = conn.execute(
        "select dl_consumer, dl_reason, ev_id, ev_data, ev_retry from cdc.dead_letter"
    ).fetchall()
    assert dead == [("c", "retry limit of 2 reached", ev, "poison", 2)]


def test_event_dead_and_event_not_in_batch(conn, queue):
    """event_dead sends one event to dead letter; an ev_id outside the batch is refused."""
    c = Consumer(conn, "q", "c")
    c.register()
    ev = Producer(conn, "q").insert("I", "x")
    tick(conn)
    with c.batch() as batch:
        batch.dead(ev, "cannot decode")
        with pytest.raises(errors.EventNotInBatch):
            batch.retry(ev + 1000, seconds=0)
    assert conn.execute("select dl_reason, ev_id from cdc.dead_letter").fetchall() == [
        ("cannot decode", ev)
    ]


def rotate(conn: psycopg.Connection, queue: str = "q") -> int:
    """Rotation step 1 then step 2, in separate transactions; 1 if the queue rotated."""
    rotated = conn.execute("select cdc.maint_rotate_tables_step1(%s)", (queue,)).fetchone()[0]
    conn.execute("select cdc.maint_rotate_tables_step2()")
    return rotated


def table_sizes(conn: psycopg.Connection) -> list[int]:
    return [
        r[0]
        for r in conn.execute(
            "select count(e.*) from generate_series(0, 2) n"
            " left join cdc.event e on e.ev_part = 1000 + n group by n order by n"
        )
    ]


def test_rotation_with_lagging_consumer_loses_nothing(conn, queue):
    """A lagging consumer blocks the truncation of tables it still needs; it gets every event."""
    queue.set_config("rotation_period", "1 microsecond")
    fast, slow = Consumer(conn, "q", "fast"), Consumer(conn, "q", "slow")
    fast.register()
    slow.register()
    p = Producer(conn, "q")
    sent: list[int] = []
    slow_got: list[int] = []
    for round_ in range(8):
        sent += [p.insert("I", f"{round_}-{i}") for i in range(10)]
        tick(conn)
        drain(fast)
        rotate(conn)
        if round_ == 5:  # the slow consumer catches up once in the middle
            slow_got += flat(drain(slow))
    slow_got += flat(drain(slow))
    assert slow_got == sent
    stored = conn.execute("select count(*) from cdc.event").fetchone()[0]
    assert stored < len(sent)  # tables were truncated along the way


def test_rotation_waits_for_a_consumer_that_needs_the_oldest_table(conn, queue):
    """The oldest table is not truncated while a consumer has not consumed its events."""
    queue.set_config("rotation_period", "1 microsecond")
    c = Consumer(conn, "q", "c")
    c.register()
    p = Producer(conn, "q")
    first = p.insert("I", "in table 0")
    tick(conn)
    assert rotate(conn) == 1  # 0 -> 1: table 1 was empty
    assert rotate(conn) == 1  # 1 -> 2: table 2 was empty
    assert rotate(conn) == 0  # 2 -> 0 would truncate the unread event
    assert flat(drain(c)) == [first]
    tick(conn)
    drain(c)
    assert rotate(conn) == 1


def test_rotation_without_lag_really_truncates(conn, queue):
    """With consumers keeping up, event tables are emptied by TRUNCATE: storage does not grow."""
    queue.set_config("rotation_period", "1 microsecond")
    c = Consumer(conn, "q", "c")
    c.register()
    for round_ in range(6):
        conn.execute(
            "select cdc.insert_event('q', 'I', repeat('x', 200)) from generate_series(1, 500)"
        )
        tick(conn)
        drain(c)
        tick(conn)
        drain(c)
        assert rotate(conn) == 1, round_
    # 3,000 events went in; a table is emptied when it becomes current again, so only the
    # two tables before the current one still hold rows.
    assert table_sizes(conn) == [0, 500, 500]
    dead = conn.execute(
        "select coalesce(sum(n_dead_tup), 0) from pg_stat_user_tables where relname like 'event_%'"
    ).fetchone()[0]
    assert dead == 0


def test_rotation_with_repeatable_read_writer_loses_nothing(conn, queue, connect):
    """A writer whose snapshot predates a rotation still has its events delivered."""
    queue.set_config("rotation_period", "1 microsecond")
    c = Consumer(conn, "q", "c")
    c.register()
    rr = connect(autocommit=False)
    rr.execute("set transaction isolation level repeatable read")
    rr.execute("select 1")  # snapshot taken: it sees table 0 as current
    assert rotate(conn) == 1
    late = Producer(rr, "q").insert("I", "stale snapshot")
    rr.commit()
    part = conn.execute("select ev_part from cdc.event where ev_id = %s", (late,)).fetchone()[0]
    assert part == 1000  # it went to the old table
    tick(conn)
    assert flat(drain(c)) == [late]


def test_step2_in_the_same_transaction_does_nothing(conn, queue, connect):
    """Rotation step 2 only completes a step 1 that committed in an earlier transaction."""
    queue.set_config("rotation_period", "1 microsecond")
    tx = connect(autocommit=False)
    assert tx.execute("select cdc.maint_rotate_tables_step1('q')").fetchone()[0] == 1
    assert tx.execute("select cdc.maint_rotate_tables_step2()").fetchone()[0] == 0
    tx.commit()
    assert conn.execute("select cdc.maint_rotate_tables_step2()").fetchone()[0] == 1


def test_register_consumer_at_unknown_tick(conn, queue):
    """register_consumer_at a tick that does not exist is a typed error."""
    with pytest.raises(errors.TickNotFound):
        Consumer(conn, "q", "c").register_at(999)


def test_info_functions(conn, queue):
    """get_queue_info / get_consumer_info / get_batch_info report positions and pending events."""
    c = Consumer(conn, "q", "c")
    c.register()
    for _ in range(3):
        Producer(conn, "q").insert("I", "x")
    info = queue.info()
    assert info["queue_name"] == "q" and info["ev_new"] == 3 and info["queue_ntables"] == 3
    row = conn.execute(
        "select consumer_name, pending_events, current_batch from cdc.get_consumer_info('q', 'c')"
    ).fetchone()
    assert row == ("c", 3, None)
    tick(conn)
    batch = c.next_batch()
    binfo = conn.execute(
        "select queue_name, consumer_name, seq_start, seq_end from cdc.get_batch_info(%s)",
        (batch.batch_id,),
    ).fetchone()
    assert binfo == ("q", "c", 0, 3)
    assert (
        conn.execute("select cdc.version()").fetchone()[0]
        == conn.execute("select inst_version from cdc.installed").fetchone()[0]
    )


def test_reading_raises_work_mem_for_the_batch_transaction_only(conn, queue):
    """Batch reads sort in memory: work_mem is raised in the batch's transaction, then restored."""
    c = Consumer(conn, "q", "c", work_mem="96MB")
    c.register()
    Producer(conn, "q").insert("I", "x")
    tick(conn)
    with c.batch() as batch:
        for _ in batch.chunks():
            assert conn.execute("show work_mem").fetchone()[0] == "96MB"
    assert conn.execute("show work_mem").fetchone()[0] != "96MB"


# ---------------------------------------------------------------------- consumer ownership


@pytest.fixture
def login(admin_dsn: str, dsn: str) -> Iterator[Callable[[str | None], psycopg.Connection]]:
    """Connects to the test's database as a new login role, member of a role or none."""
    roles = LoginRoles(admin_dsn, dsn)
    yield roles.connect
    roles.cleanup()


def open_batch_of(reader: psycopg.Connection, admin: psycopg.Connection) -> tuple[int, int]:
    """Queue 'q' gets consumer 'a', registered by ``reader``, with one event in an open
    batch; (batch_id, ev_id)."""
    assert Consumer(reader, "q", "a").register()
    ev = Producer(admin, "q").insert("I", "x")
    tick(admin)
    batch = Consumer(reader, "q", "a").next_batch()
    assert batch is not None
    return batch.batch_id, ev


# What another reader could try with consumer 'a' of queue 'q' and its open batch %(b)s.
FOREIGN_ACTS = {
    "finish_batch": "select cdc.finish_batch(%(b)s)",
    "event_retry_seconds": "select cdc.event_retry(%(b)s, %(e)s, 0)",
    "event_retry_time": "select cdc.event_retry(%(b)s, %(e)s, now())",
    "batch_retry": "select cdc.batch_retry(%(b)s, 0)",
    "event_dead": "select cdc.event_dead(%(b)s, %(e)s, 'gone')",
    "get_batch_events": "select * from cdc.get_batch_events(%(b)s)",
    "get_batch_events_slice": "select * from cdc.get_batch_events(%(b)s, 0, null)",
    "open_batch_cursor": "select cdc.open_batch_cursor(%(b)s, 'c')",
    "next_batch": "select cdc.next_batch('q', 'a')",
    "next_batch_info": "select * from cdc.next_batch_info('q', 'a')",
    "next_batch_custom": "select * from cdc.next_batch_custom('q', 'a', null, 1, null)",
    "register_consumer": "select cdc.register_consumer('q', 'a')",
    "register_consumer_at": "select cdc.register_consumer_at('q', 'a', 1)",
    "unregister_consumer": "select cdc.unregister_consumer('q', 'a')",
}


@pytest.mark.parametrize("act", list(FOREIGN_ACTS))
def test_reader_cannot_act_for_another_readers_consumer(conn, queue, login, act):
    """A cdc_reader member gets QC014 for every act on a consumer another reader registered
    (even with check_function_bodies off), and the consumer's batch stays as it was."""
    batch_id, ev = open_batch_of(login("cdc_reader"), conn)
    other = login("cdc_reader")
    other.execute("set check_function_bodies = off")
    with pytest.raises(errors.NotConsumerRole, match=r"may not act for consumer 'a' on queue"):
        try:
            other.execute(FOREIGN_ACTS[act], {"b": batch_id, "e": ev})
        except psycopg.Error as exc:
            raise errors.translate(exc) from exc
    row = conn.execute("select sub_batch from cdc.subscription").fetchone()
    assert row == (batch_id,)
    assert conn.execute("select count(*) from cdc.retry_queue").fetchone() == (0,)
    assert conn.execute("select count(*) from cdc.dead_letter").fetchone() == (0,)


def test_consumer_role_its_members_and_admins_may_act(conn, queue, login, admin_dsn):
    """The registering role reads and finishes its batch; a member of that role, a cdc_admin
    member and a superuser may act for the consumer too."""
    owner = login("cdc_reader")
    _, ev = open_batch_of(owner, conn)
    assert [e.ev_id for e in Consumer(owner, "q", "a").next_batch().events()] == [ev]
    Consumer(owner, "q", "a").next_batch().finish()
    member = login("cdc_reader")
    with psycopg.connect(admin_dsn, autocommit=True) as su:
        su.execute(
            sql.SQL("grant {} to {}").format(
                sql.Identifier(owner.info.user), sql.Identifier(member.info.user)
            )
        )
    for who in (member, login("cdc_admin"), conn):
        Producer(conn, "q").insert("I", "y")
        tick(conn)
        with Consumer(who, "q", "a").batch() as batch:
            assert batch is not None and len(list(batch.events())) == 1
    Consumer(login("cdc_admin"), "q", "a").unregister()
    assert conn.execute("select count(*) from cdc.subscription").fetchone() == (0,)


def test_consumer_registered_under_set_role_belongs_to_that_role(conn, queue, login, admin_dsn):
    """A consumer registered after SET ROLE belongs to that role: another login member of it
    may act for it, a reader outside it may not."""
    group = f"grp_{uuid.uuid4().hex[:8]}"
    first, second, outsider = login(None), login(None), login("cdc_reader")
    with psycopg.connect(admin_dsn, autocommit=True) as su:
        su.execute(
            sql.SQL("create role {} nologin in role cdc_reader").format(sql.Identifier(group))
        )
        for c in (first, second):
            su.execute(
                sql.SQL("grant {} to {}").format(sql.Identifier(group), sql.Identifier(c.info.user))
            )
    try:
        first.execute(sql.SQL("set role {}").format(sql.Identifier(group)))
        assert Consumer(first, "q", "g").register()
        owner = conn.execute("select sub_owner::regrole::text from cdc.subscription").fetchone()
        assert owner == (group,)
        Producer(conn, "q").insert("I", "x")
        tick(conn)
        second.execute(sql.SQL("set role {}").format(sql.Identifier(group)))
        with Consumer(second, "q", "g").batch() as batch:
            assert batch is not None
        with pytest.raises(errors.NotConsumerRole, match=f"belongs to role {group}"):
            Consumer(outsider, "q", "g").next_batch()
    finally:
        for c in (first, second):
            c.execute("reset role")
        conn.execute("select cdc.unregister_consumer('q', 'g')")
        with psycopg.connect(admin_dsn, autocommit=True) as su:
            su.execute(sql.SQL("drop role {}").format(sql.Identifier(group)))


def test_consumer_without_owner_is_for_admins_until_given_one(conn, dsn, queue, login):
    """A subscription from before owners (the column added by an upgrading install, NULL) is
    refused to readers and served to cdc_admin members; set_consumer_owner gives it to a role."""
    reader = login("cdc_reader")
    batch_id, _ = open_batch_of(reader, conn)
    conn.execute("alter table cdc.subscription drop column sub_owner")
    install.install(dsn)  # the upgrade adds the column back, empty
    assert conn.execute("select sub_owner from cdc.subscription").fetchall() == [(None,)]
    with pytest.raises(errors.NotConsumerRole, match="registered before consumers had owners"):
        Consumer(reader, "q", "a").next_batch()
    admin = login("cdc_admin")
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        Consumer(reader, "q", "a").set_owner(reader.info.user)
    assert Consumer(admin, "q", "a").next_batch().batch_id == batch_id
    with pytest.raises(errors.InvalidArgument, match="role 'no such role' does not exist"):
        Consumer(admin, "q", "a").set_owner("no such role")
    Consumer(admin, "q", "a").set_owner(reader.info.user)
    Consumer(reader, "q", "a").next_batch().finish()
    Consumer(admin, "q", "a").set_owner(None)
    with pytest.raises(errors.NotConsumerRole):
        Consumer(reader, "q", "a").unregister()


def test_consumer_of_a_dropped_role_is_for_admins(conn, dsn, queue, login, admin_dsn):
    """When the registering role is dropped, a new role of the same name does not inherit the
    consumer: only cdc_admin members may act for it."""
    name = f"t_gone_{uuid.uuid4().hex[:8]}"
    role = sql.Identifier(name)
    with psycopg.connect(admin_dsn, autocommit=True) as su:
        su.execute(sql.SQL("create role {} login in role cdc_reader").format(role))
    try:
        with psycopg.connect(make_conninfo(dsn, user=name), autocommit=True) as reader:
            open_batch_of(reader, conn)
        with psycopg.connect(admin_dsn, autocommit=True) as su:
            su.execute(sql.SQL("drop role {}").format(role))
            su.execute(sql.SQL("create role {} login in role cdc_reader").format(role))
        again = psycopg.connect(make_conninfo(dsn, user=name), autocommit=True)
        with again, pytest.raises(errors.NotConsumerRole, match="no longer exists"):
            Consumer(again, "q", "a").next_batch()
        assert Consumer(login("cdc_admin"), "q", "a").next_batch() is not None
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as su:
            su.execute(sql.SQL("drop role if exists {}").format(role))
