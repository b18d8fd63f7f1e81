"""Bad input to the queue engine: each case raises the right typed exception from cdc.errors,
with a message naming the problem, and changes nothing.

The refused calls change nothing by definition (that is what each test checks, with a
snapshot of cdc.queue / cdc.consumer / cdc.subscription / cdc.tick and the event, retry and
dead-letter tables), so they share one database per module instead of a clone per test.
Valid odd names get their own queue and consumer each and remove them at the end, so they
share it too (and the same snapshot checks that unregister and drop leave nothing behind).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import psycopg.sql
import pytest

from cdc import errors
from cdc.pg.queue import Batch, BatchInfo, Consumer, Producer, Queue
from tests.support.databases import TEMPLATE, create_database, drop_database

SNAPSHOT_QUERIES = {
    "queue": "select to_jsonb(t) from cdc.queue t order by queue_id",
    "consumer": "select to_jsonb(t) from cdc.consumer t order by co_id",
    "subscription": "select to_jsonb(t) from cdc.subscription t order by sub_id",
    "tick": "select to_jsonb(t) - 'tick_snapshot' || jsonb_build_object("
    "'snap', tick_snapshot::text) from cdc.tick t order by tick_queue, tick_id",
    "event": "select to_jsonb(t) from cdc.event t order by ev_part, ev_id",
    "retry_queue": "select to_jsonb(t) from cdc.retry_queue t order by ev_owner, ev_id",
    "dead_letter": "select to_jsonb(t) from cdc.dead_letter t order by dl_id",
    "relations": "select count(*) from pg_class where relnamespace = 'cdc'::regnamespace",
}


def snapshot(conn: psycopg.Connection) -> dict[str, list[Any]]:
    """Every row of the engine's tables, and the number of its relations."""
    return {
        name: [r[0] for r in conn.execute(q).fetchall()] for name, q in SNAPSHOT_QUERIES.items()
    }


def call(conn: psycopg.Connection, query: str, params: Any = None) -> list[tuple[Any, ...]]:
    """Run a query; engine errors come back typed (cdc.errors.translate)."""
    try:
        return conn.execute(query, params).fetchall()
    except psycopg.Error as exc:
        raise errors.translate(exc) from exc


@dataclass(frozen=True)
class World:
    """Queues 'q' and 'q2'; on 'q', consumer 'c' holds an open batch of one event and
    consumer 'done' finished its batch."""

    batch_id: int
    ev_id: int
    tick_id: int
    finished_batch_id: int


@pytest.fixture(scope="module")
def shared_dsn(admin_dsn: str, template_dsn: str) -> Iterator[str]:
    name = f"cdc_test_bad_{uuid.uuid4().hex[:8]}"
    yield create_database(admin_dsn, name, template=TEMPLATE)
    drop_database(admin_dsn, name)


@pytest.fixture(scope="module")
def world(shared_dsn: str) -> World:
    with psycopg.connect(shared_dsn, autocommit=True) as c:
        q = Queue(c, "q")
        q.create()
        Queue(c, "q2").create()
        Consumer(c, "q", "c").register()
        Consumer(c, "q", "done").register()
        ev_id = Producer(c, "q").insert("I", "payload")
        q.force_tick()
        tick_id = q.tick()
        batch = Consumer(c, "q", "c").next_batch()
        done = Consumer(c, "q", "done").next_batch()
        assert batch is not None and done is not None and tick_id is not None
        done.finish()
        return World(batch.batch_id, ev_id, tick_id, done.batch_id)


@pytest.fixture
def db(shared_dsn: str, world: World) -> Iterator[psycopg.Connection]:
    """A connection to the shared database; the test fails if the engine's rows changed."""
    with psycopg.connect(shared_dsn, autocommit=True) as c:
        before = snapshot(c)
        yield c
        assert snapshot(c) == before, "a refused call changed the engine's tables"


def fake_batch(conn: psycopg.Connection, batch_id: int) -> Batch:
    now = dt.datetime.now(dt.UTC)
    return Batch(conn, BatchInfo(batch_id, 2, 1, now, now, 0, 0), chunk_size=10)


# ---------------------------------------------------------------------- unknown objects

Op = Callable[[psycopg.Connection, World], object]

UNKNOWN_QUEUE_OPS: dict[str, Op] = {
    "drop": lambda c, w: Queue(c, "nope").drop(),
    "drop_force": lambda c, w: Queue(c, "nope").drop(force=True),
    "set_config": lambda c, w: Queue(c, "nope").set_config("ticker_max_count", 10),
    "tick": lambda c, w: Queue(c, "nope").tick(),
    "force_tick": lambda c, w: Queue(c, "nope").force_tick(),
    "info": lambda c, w: Queue(c, "nope").info(),
    "insert": lambda c, w: Producer(c, "nope").insert("I", "x"),
    "insert_extra": lambda c, w: Producer(c, "nope").insert("I", "x", "e1", "e2", "e3", "e4"),
    "register": lambda c, w: Consumer(c, "nope", "c").register(),
    "register_at": lambda c, w: Consumer(c, "nope", "c").register_at(w.tick_id),
    "unregister": lambda c, w: Consumer(c, "nope", "c").unregister(),
    "next_batch": lambda c, w: Consumer(c, "nope", "c").next_batch(),
    "current_event_table": lambda c, w: call(c, "select cdc.current_event_table('nope')"),
    "get_consumer_info": lambda c, w: call(c, "select * from cdc.get_consumer_info('nope')"),
    "maint_rotate": lambda c, w: call(c, "select cdc.maint_rotate_tables_step1('nope')"),
}


@pytest.mark.parametrize("op", list(UNKNOWN_QUEUE_OPS))
def test_unknown_queue(db: psycopg.Connection, world: World, op: str) -> None:
    """An operation on a queue that does not exist raises QueueNotFound naming the queue."""
    with pytest.raises(errors.QueueNotFound, match=r"queue 'nope' does not exist"):
        UNKNOWN_QUEUE_OPS[op](db, world)


UNKNOWN_CONSUMER_OPS: dict[str, Op] = {
    "next_batch": lambda c, w: Consumer(c, "q", "nobody").next_batch(),
    "batch": lambda c, w: Consumer(c, "q", "nobody").batch().__enter__(),
    "unregister": lambda c, w: Consumer(c, "q", "nobody").unregister(),
    "next_batch_sql": lambda c, w: call(c, "select cdc.next_batch('q', 'nobody')"),
    "get_consumer_info": lambda c, w: call(c, "select * from cdc.get_consumer_info('q', 'nobody')"),
}


@pytest.mark.parametrize("op", list(UNKNOWN_CONSUMER_OPS))
def test_unknown_consumer(db: psycopg.Connection, world: World, op: str) -> None:
    """An operation for a consumer not registered on the queue raises ConsumerNotFound."""
    with pytest.raises(
        errors.ConsumerNotFound, match=r"consumer 'nobody' is not registered on queue 'q'"
    ):
        UNKNOWN_CONSUMER_OPS[op](db, world)


def test_consumer_of_another_queue_is_unknown(db: psycopg.Connection, world: World) -> None:
    """A consumer registered on one queue is unknown on another: ConsumerNotFound."""
    with pytest.raises(
        errors.ConsumerNotFound, match="consumer 'c' is not registered on queue 'q2'"
    ):
        Consumer(db, "q2", "c").next_batch()


BATCH_OPS: dict[str, Callable[[psycopg.Connection, int, World], object]] = {
    "finish": lambda c, b, w: fake_batch(c, b).finish(),
    "events": lambda c, b, w: list(fake_batch(c, b).events()),
    "retry": lambda c, b, w: fake_batch(c, b).retry(w.ev_id, 10),
    "retry_all": lambda c, b, w: fake_batch(c, b).retry_all(10),
    "dead": lambda c, b, w: fake_batch(c, b).dead(w.ev_id, "broken"),
    "get_batch_events": lambda c, b, w: call(c, "select * from cdc.get_batch_events(%s)", (b,)),
    "get_batch_info": lambda c, b, w: call(c, "select * from cdc.get_batch_info(%s)", (b,)),
    "event_retry_ts": lambda c, b, w: call(
        c, "select cdc.event_retry(%s, %s, now() + interval '1 minute')", (b, w.ev_id)
    ),
}


@pytest.mark.parametrize("op", list(BATCH_OPS))
def test_unknown_batch_id(db: psycopg.Connection, world: World, op: str) -> None:
    """A batch id that never existed raises BatchNotFound naming the id."""
    with pytest.raises(errors.BatchNotFound, match=r"batch 987654321 is not open"):
        BATCH_OPS[op](db, 987654321, world)


@pytest.mark.parametrize("op", list(BATCH_OPS))
def test_finished_batch_id(db: psycopg.Connection, world: World, op: str) -> None:
    """A batch id that was finished already raises BatchNotFound naming the id."""
    b = world.finished_batch_id
    with pytest.raises(errors.BatchNotFound, match=rf"batch {b} is not open: it was finished"):
        BATCH_OPS[op](db, b, world)


def test_unknown_tick(db: psycopg.Connection, world: World) -> None:
    """register_at a tick that does not exist raises TickNotFound naming tick and queue."""
    with pytest.raises(errors.TickNotFound, match=r"tick 424242 of queue 'q' does not exist"):
        Consumer(db, "q", "late").register_at(424242)


@pytest.mark.parametrize("method", ["retry", "dead"])
def test_event_not_in_batch(db: psycopg.Connection, world: World, method: str) -> None:
    """Retrying or burying an event the open batch does not hold raises EventNotInBatch."""
    batch = fake_batch(db, world.batch_id)
    with pytest.raises(
        errors.EventNotInBatch, match=rf"event 31337 is not in batch {world.batch_id}"
    ):
        if method == "retry":
            batch.retry(31337, 10)
        else:
            batch.dead(31337, "why")


# ---------------------------------------------------------------------- NULL arguments

# Valid values and SQL types of every argument; each case makes one of them NULL.
ARGS: dict[str, tuple[str, Callable[[World], object]]] = {
    "q": ("text", lambda w: "q"),
    "c": ("text", lambda w: "c"),
    "b": ("bigint", lambda w: w.batch_id),
    "ev": ("bigint", lambda w: w.ev_id),
    "lo": ("bigint", lambda w: 0),  # ev_id bounds of a batch slice: NULL means no bound
    "hi": ("bigint", lambda w: None),
    "tick": ("bigint", lambda w: w.tick_id),
    "max": ("bigint", lambda w: 10),
    "force": ("boolean", lambda w: False),
    "param": ("text", lambda w: "ticker_max_count"),
    "value": ("text", lambda w: "10"),
    "type": ("text", lambda w: "I"),
    "data": ("text", lambda w: "x"),
    "extra": ("text", lambda w: "e"),
    "lag": ("interval", lambda w: None),
    "count": ("integer", lambda w: None),
    "interval": ("interval", lambda w: None),
    "cursor": ("text", lambda w: "cur"),
    "secs": ("integer", lambda w: 10),
    "ts": ("timestamptz", lambda w: dt.datetime.now(dt.UTC) + dt.timedelta(minutes=1)),
    "reason": ("text", lambda w: "broken"),
    "role": ("text", lambda w: "cdc_reader"),
    "tbl": ("regclass", lambda w: "cdc.tick"),
    "opts": ("jsonb", lambda w: '{"format": "json"}'),
    "sglob": ("text", lambda w: "public"),
    "tglob": ("text", lambda w: "*"),
    "excl": ("text[]", lambda w: []),
    "rule": ("bigint", lambda w: 1),
    "dry": ("boolean", lambda w: False),
    "retry": ("integer", lambda w: 0),
    "owner": ("integer", lambda w: None),
    "seq": ("bigint", lambda w: 10**6),
}
# insert_event_raw and event_retry_raw: every field of an event
RAW_EVENT = ("type", "data", "extra", "extra", "extra", "extra")

NAME_NULL = (errors.InvalidArgument, "name must not be NULL")


def arg_null(what: str) -> tuple[type[errors.QueueError], str]:
    return errors.InvalidArgument, f"{what} must not be NULL"


RULE_ARGS = ("sglob", "tglob", "q", "opts", "excl")  # cdc.add_capture_rule

# (function, arguments, argument made NULL, expected exception, message fragment)
NULL_CASES: list[tuple[str, tuple[str, ...], str, type[errors.QueueError], str]] = [
    ("create_queue", ("q",), "q", *NAME_NULL),
    ("drop_queue", ("q",), "q", *arg_null("queue name")),
    ("drop_queue", ("q", "force"), "q", *arg_null("queue name")),
    ("drop_queue", ("q", "force"), "force", *arg_null("force")),
    ("set_queue_config", ("q", "param", "value"), "q", *arg_null("queue name")),
    ("set_queue_config", ("q", "param", "value"), "param", *arg_null("parameter name")),
    (
        "set_queue_config",
        ("q", "param", "value"),
        "value",
        errors.InvalidArgument,
        "invalid value NULL for queue parameter 'ticker_max_count': NULL is not allowed",
    ),
    ("insert_event", ("q", "type", "data"), "q", *arg_null("queue name")),
    (
        "insert_event",
        ("q", "type", "data", "extra", "extra", "extra", "extra"),
        "q",
        *arg_null("queue name"),
    ),
    ("current_event_table", ("q",), "q", *arg_null("queue name")),
    ("register_consumer", ("q", "c"), "q", *arg_null("queue name")),
    ("register_consumer", ("q", "c"), "c", *NAME_NULL),
    ("register_consumer_at", ("q", "c", "tick"), "q", *arg_null("queue name")),
    ("register_consumer_at", ("q", "c", "tick"), "c", *NAME_NULL),
    ("register_consumer_at", ("q", "c", "tick"), "tick", *arg_null("tick id")),
    ("unregister_consumer", ("q", "c"), "q", *arg_null("queue name")),
    ("unregister_consumer", ("q", "c"), "c", *arg_null("consumer name")),
    ("set_consumer_owner", ("q", "c", "role"), "q", *arg_null("queue name")),
    ("set_consumer_owner", ("q", "c", "role"), "c", *arg_null("consumer name")),
    ("next_batch", ("q", "c"), "q", *arg_null("queue name")),
    ("next_batch", ("q", "c"), "c", *arg_null("consumer name")),
    ("next_batch_info", ("q", "c"), "q", *arg_null("queue name")),
    ("next_batch_info", ("q", "c"), "c", *arg_null("consumer name")),
    ("next_batch_custom", ("q", "c", "lag", "count", "interval"), "q", *arg_null("queue name")),
    ("next_batch_custom", ("q", "c", "lag", "count", "interval"), "c", *arg_null("consumer name")),
    ("get_batch_events", ("b",), "b", *arg_null("batch id")),
    ("batch_event_tables", ("b",), "b", *arg_null("batch id")),
    ("batch_event_sql", ("b",), "b", *arg_null("batch id")),
    (
        "event_retry_raw",
        ("q", "c", "ts", "ev", "ts", "retry", *RAW_EVENT),
        "q",
        *arg_null("queue name"),
    ),
    (
        "event_retry_raw",
        ("q", "c", "ts", "ev", "ts", "retry", *RAW_EVENT),
        "c",
        *arg_null("consumer name"),
    ),
    (
        "insert_event_raw",
        ("q", "ev", "ts", "owner", "retry", *RAW_EVENT),
        "q",
        *arg_null("queue name"),
    ),
    ("grant_perms", ("q",), "q", *arg_null("queue name")),
    ("ticker", ("q", "tick", "ts", "seq"), "q", *arg_null("queue name")),
    ("get_batch_events", ("b", "lo", "hi"), "b", *arg_null("batch id")),
    ("open_batch_cursor", ("b", "cursor"), "b", *arg_null("batch id")),
    ("open_batch_cursor", ("b", "cursor"), "cursor", *arg_null("cursor name")),
    ("event_retry", ("b", "ev", "secs"), "b", *arg_null("batch id")),
    ("event_retry", ("b", "ev", "secs"), "ev", *arg_null("event id")),
    ("event_retry", ("b", "ev", "secs"), "secs", *arg_null("retry seconds")),
    ("event_retry", ("b", "ev", "ts"), "b", *arg_null("batch id")),
    ("event_retry", ("b", "ev", "ts"), "ev", *arg_null("event id")),
    ("event_retry", ("b", "ev", "ts"), "ts", *arg_null("retry time")),
    ("batch_retry", ("b", "secs"), "b", *arg_null("batch id")),
    ("batch_retry", ("b", "secs"), "secs", *arg_null("retry seconds")),
    ("event_dead", ("b", "ev", "reason"), "b", *arg_null("batch id")),
    ("event_dead", ("b", "ev", "reason"), "ev", *arg_null("event id")),
    ("event_dead", ("b", "ev", "reason"), "reason", *arg_null("reason")),
    ("ticker", ("q",), "q", *arg_null("queue name")),
    ("force_tick", ("q",), "q", *arg_null("queue name")),
    ("maint_rotate_tables_step1", ("q",), "q", *arg_null("queue name")),
    ("get_queue_info", ("q",), "q", *arg_null("queue name")),
    ("get_queue_config", ("q",), "q", *arg_null("queue name")),
    ("get_consumer_status", ("q",), "q", *arg_null("queue name")),
    ("get_queue_incarnation", ("q",), "q", *arg_null("queue name")),
    ("get_consumer_info", ("q",), "q", *arg_null("queue name")),
    ("get_consumer_info", ("q", "c"), "q", *arg_null("queue name")),
    ("get_consumer_info", ("q", "c"), "c", *arg_null("consumer name")),
    ("get_batch_info", ("b",), "b", *arg_null("batch id")),
    ("next_batch_ticks", ("q", "c", "max"), "q", *arg_null("queue name")),
    ("next_batch_ticks", ("q", "c", "max"), "c", *arg_null("consumer name")),
    ("next_batch_ticks", ("q", "c", "max"), "max", *arg_null("max events")),
    ("queue_has_new_events", ("q",), "q", *arg_null("queue name")),
    ("get_tick_snapshot", ("q", "tick"), "q", *arg_null("queue name")),
    ("get_tick_snapshot", ("q", "tick"), "tick", *arg_null("tick id")),
    ("get_dead_letter_counts", ("q", "c"), "q", *arg_null("queue name")),
    ("get_dead_letter_counts", ("q", "c"), "c", *arg_null("consumer name")),
    ("tick_at_snapshot", ("q",), "q", *arg_null("queue name")),
    ("consumer_owner", ("q", "c"), "q", *arg_null("queue name")),
    ("consumer_owner", ("q", "c"), "c", *arg_null("consumer name")),
    ("capture_sql", ("tbl", "q", "opts"), "tbl", *arg_null("table")),
    ("capture_sql", ("tbl", "q", "opts"), "q", *arg_null("queue name")),
    ("capture_sql", ("tbl", "q", "opts"), "opts", *arg_null("options")),
    ("attach", ("tbl", "q", "opts"), "tbl", *arg_null("table")),
    ("attach", ("tbl", "q", "opts"), "q", *arg_null("queue name")),
    ("attach", ("tbl", "q", "opts"), "opts", *arg_null("options")),
    ("detach", ("tbl", "q"), "tbl", *arg_null("table")),
    ("add_capture_rule", RULE_ARGS, "sglob", *arg_null("schema glob")),
    ("add_capture_rule", RULE_ARGS, "tglob", *arg_null("table glob")),
    ("add_capture_rule", RULE_ARGS, "q", *arg_null("queue name")),
    ("add_capture_rule", RULE_ARGS, "opts", *arg_null("options")),
    ("add_capture_rule", RULE_ARGS, "excl", *arg_null("exclude")),
    ("remove_capture_rule", ("rule",), "rule", *arg_null("rule id")),
    ("sync_captures", ("q", "dry"), "dry", *arg_null("dry run")),
    ("sync_capture_rule", ("rule", "dry"), "rule", *arg_null("rule id")),
    ("sync_capture_rule", ("rule", "dry"), "dry", *arg_null("dry run")),
]


def null_case_id(case: tuple[Any, ...]) -> str:
    func, args, null, *_ = case
    return f"{func}({','.join(args)})-{null}"


def signature(func: str, args: tuple[str, ...]) -> str:
    types = {"text": "text", "bigint": "bigint", "boolean": "boolean", "integer": "integer"}
    return f"cdc.{func}({','.join(types.get(ARGS[a][0], ARGS[a][0]) for a in args)})"


@pytest.mark.parametrize("case", NULL_CASES, ids=null_case_id)
def test_null_argument(db: psycopg.Connection, world: World, case: tuple[Any, ...]) -> None:
    """A NULL where a function needs a value raises a typed error naming the argument."""
    func, args, null, exc, fragment = case
    placeholders = ", ".join(f"%({a}_{i})s::{ARGS[a][0]}" for i, a in enumerate(args))
    params = {f"{a}_{i}": None if a == null else ARGS[a][1](world) for i, a in enumerate(args)}
    query = f"select * from cdc.{func}({placeholders})"
    with pytest.raises(exc) as info:
        call(db, query, params)
    assert type(info.value) is exc
    assert fragment in str(info.value)


# Functions that take a NULL without an error, as PgQ's do; each has its own test.
NULL_ACCEPTED = {
    "cdc.finish_batch(bigint)",
    "cdc.seq_getval(text)",
    "cdc.seq_setval(text,bigint)",
    "cdc.quote_fqname(text)",
    "cdc.tune_storage(text)",
    "cdc.find_tick_helper(integer,bigint,timestamptz,bigint,bigint,interval)",
}
# PgQ's STRICT ones among them: a NULL argument gives NULL
STRICT_CALLS = [
    "seq_getval(null)",
    "seq_setval(null, 1)",
    "seq_setval('cdc.tick_id_seq', null)",
    "quote_fqname(null)",
    "tune_storage(null)",
    "find_tick_helper(null, 1, now(), 1, 1, null)",
]


@pytest.mark.parametrize("expr", STRICT_CALLS)
def test_pgqs_strict_functions_give_null_for_null(db: psycopg.Connection, expr: str) -> None:
    """As PgQ's STRICT functions: NULL in, NULL out (every column of a record NULL)."""
    (value,) = call(db, f"select cdc.{expr}")[0]
    assert value is None or all(v is None for v in value)


def test_finish_batch_of_null_warns_and_returns_0(db: psycopg.Connection) -> None:
    """finish_batch(NULL), as PgQ's: a WARNING that the batch is not found, and 0."""
    warnings: list[str] = []
    db.add_notice_handler(lambda d: warnings.append(f"{d.severity}: {d.message_primary}"))
    assert call(db, "select cdc.finish_batch(null)") == [(0,)]
    assert warnings == ["WARNING: finish_batch: batch <NULL> not found"]


def test_null_cases_cover_every_public_function_with_arguments(db: psycopg.Connection) -> None:
    """Every function callers may execute that takes arguments has a NULL-argument case."""
    rows = db.execute(
        """
        select p.proname::text,
               array(select format_type(t, null) from unnest(p.proargtypes::oid[]) t)
          from pg_proc p
         where p.pronamespace = 'cdc'::regnamespace and p.proname !~ '^_' and p.pronargs > 0
        """
    ).fetchall()
    in_db = {f"cdc.{name}({','.join(types)})" for name, types in rows}
    in_db = {s.replace("timestamp with time zone", "timestamptz") for s in in_db}
    covered = {signature(func, args) for func, args, *_ in NULL_CASES} | NULL_ACCEPTED
    assert in_db == covered


# ---------------------------------------------------------------------- names

VALID_NAMES = {
    "single_quote": "a'b",
    "double_quote": 'a"b',
    "spaces": "  with  spaces ",
    "unicode": "zürich-üñï",
    "emoji": "queue 🦀🎉",
    "63_ascii_bytes": "n" * 63,
    "63_utf8_bytes": "ü" * 31 + "n",
    "sql_injection": "x'); drop table cdc.tick; --",
    "ident_injection": 'x"; drop schema cdc cascade; --',
    "format_codes": "%s %I %L %%",
    "backslash": "back\\slash\\'",
    "dollar_quote": "$$; select 1; $$",
}


@pytest.mark.parametrize("name", list(VALID_NAMES.values()), ids=list(VALID_NAMES))
def test_valid_odd_name_round_trips(db: psycopg.Connection, name: str) -> None:
    """A valid name with quotes, spaces, unicode or SQL in it works end to end, stored as is."""
    queue = Queue(db, name)
    assert queue.create()
    consumer = Consumer(db, name, name)
    assert consumer.register()
    ev_id = Producer(db, name).insert(name, name, name)
    queue.force_tick()
    assert queue.tick() is not None
    with consumer.batch() as batch:
        assert batch is not None
        events = list(batch.events())
        info = call(db, "select * from cdc.get_batch_info(%s)", (batch.batch_id,))
        batch.dead(ev_id, name)  # consumer name and reason go through event_dead's dynamic SQL
    dead = db.execute(
        "select dl_consumer, dl_reason, ev_data from cdc.dead_letter where ev_id = %s"
        " and dl_queue = (select queue_id from cdc.queue where queue_name = %s)",
        (ev_id, name),
    ).fetchall()
    assert dead == [(name, name, name)]
    assert [(e.ev_id, e.ev_type, e.ev_data, e.ev_extra1) for e in events] == [
        (ev_id, name, name, name)
    ]
    assert info[0][:2] == (name, name)
    assert queue.info()["queue_name"] == name
    rows = call(
        db, "select queue_name, consumer_name from cdc.get_consumer_info(%s, %s)", (name, name)
    )
    assert rows == [(name, name)]
    assert db.execute(
        "select count(*) from cdc.queue where queue_name = %s", (name,)
    ).fetchone() == (1,)
    # Nothing was injected: the engine's structure is whole.
    assert db.execute("select to_regclass('cdc.tick') is not null").fetchone() == (True,)
    consumer.unregister()
    queue.drop()
    assert db.execute(
        "select count(*) from cdc.consumer where co_name = %s", (name,)
    ).fetchone() == (0,)


INVALID_NAMES = {
    "empty": ("", "is 0 bytes long; it must be 1 to 63 bytes"),
    "64_ascii_bytes": ("n" * 64, "is 64 bytes long; it must be 1 to 63 bytes"),
    "64_utf8_bytes": ("ü" * 32, "is 64 bytes long; it must be 1 to 63 bytes"),
    "100_chars": ("x" * 100, "is 100 bytes long; it must be 1 to 63 bytes"),
    "control_soh": ("a\x01b", "contains a control character"),
    "newline": ("two\nlines", "contains a control character"),
    "tab": ("tab\there", "contains a control character"),
    "escape": ("red\x1b[31m", "contains a control character"),
    "delete": ("del\x7f", "contains a control character"),
}


@pytest.mark.parametrize("kind", ["queue", "consumer"])
@pytest.mark.parametrize("name,fragment", list(INVALID_NAMES.values()), ids=list(INVALID_NAMES))
def test_invalid_name(db: psycopg.Connection, kind: str, name: str, fragment: str) -> None:
    """An empty, too long (in bytes) or control-character name raises InvalidName saying why."""
    with pytest.raises(errors.InvalidName) as info:
        if kind == "queue":
            Queue(db, name).create()
        else:
            Consumer(db, "q", name).register()
    assert str(info.value).startswith(f"{kind} name ")
    assert fragment in str(info.value)


# ---------------------------------------------------------------------- set_queue_config

BAD_CONFIG = {
    "unknown_param": ("no_such_param", "1", "unknown queue parameter 'no_such_param'"),
    "empty_param": ("", "1", "unknown queue parameter ''"),
    "table_column": ("queue_id", "7", "unknown queue parameter 'queue_id'"),
    "count_abc": ("ticker_max_count", "abc", "invalid value 'abc' for queue parameter"),
    "count_fraction": ("ticker_max_count", "1.5", "invalid value '1.5'"),
    "count_negative": ("ticker_max_count", "-5", "must be a whole number from 0 to 2147483647"),
    "count_overflow": ("ticker_max_count", "2147483648", "from 0 to 2147483647"),
    "count_bigint_overflow": ("ticker_max_count", "99999999999999999999", "invalid value"),
    "per_tx_limit_negative": ("per_tx_limit", "-1", "must be a whole number from 0"),
    "max_retries_negative": ("max_retries", "-1", "must be a whole number from 0"),
    "lag_negative": ("ticker_max_lag", "-1 hour", "must be a finite interval of zero or more"),
    "idle_negative": ("ticker_idle_period", "-1 second", "must be a finite interval of zero"),
    "rotation_text": ("rotation_period", "soon", "invalid value 'soon'"),
    "rotation_negative": ("queue_rotation_period", "-2 hours", "must be a finite interval"),
    # PostgreSQL 17+ parses 'infinity' as an interval; the engine refuses it there too.
    "rotation_infinity": ("rotation_period", "infinity", "invalid value 'infinity'"),
    "paused_maybe": ("ticker_paused", "maybe", "invalid value 'maybe' for queue parameter"),
    "external_empty": ("external_ticker", "", "invalid value ''"),
    "disable_insert_null": ("disable_insert", None, "must be true or false"),
    "lag_null": ("ticker_max_lag", None, "must be a finite interval of zero or more"),
}


@pytest.mark.parametrize("param,value,fragment", list(BAD_CONFIG.values()), ids=list(BAD_CONFIG))
def test_invalid_queue_config(
    db: psycopg.Connection, param: str, value: str | None, fragment: str
) -> None:
    """An unknown parameter or a value of the wrong kind or range raises InvalidArgument."""
    with pytest.raises(errors.InvalidArgument) as info:
        Queue(db, "q").set_config(param, value)
    assert fragment in str(info.value)


def test_invalid_queue_config_on_unknown_queue(db: psycopg.Connection) -> None:
    """set_queue_config on an unknown queue says the queue is missing, whatever the value."""
    with pytest.raises(errors.QueueNotFound, match="queue 'nope' does not exist"):
        Queue(db, "nope").set_config("no_such_param", "abc")


@pytest.mark.parametrize("cursor", ['my "cursor', "it's", "x; drop table cdc.tick; --"])
def test_cursor_name_is_a_name_not_sql(db: psycopg.Connection, world: World, cursor: str) -> None:
    """open_batch_cursor takes any cursor name literally; nothing in it is run as SQL."""
    with db.transaction(force_rollback=True):
        assert call(db, "select cdc.open_batch_cursor(%s, %s)", (world.batch_id, cursor)) == [
            (cursor,)
        ]
        fetch = psycopg.sql.SQL("fetch all from {}").format(psycopg.sql.Identifier(cursor))
        assert [r[0] for r in db.execute(fetch).fetchall()] == [world.ev_id]
