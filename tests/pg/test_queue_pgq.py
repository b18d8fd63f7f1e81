"""Differential test: our queue engine against PgQ 3.5, function by function.

Each test runs the same statements on a database with PgQ's extension (``pgq``) and on one
with our engine (``cdc``), both on the throwaway PostgreSQL 15 cluster that has PgQ
(tests/support/pgq.py), and compares what comes back: results, warnings, rows. Where the two
differ on purpose (README, "How it differs from PgQ"), the test says so and checks ours.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pytest

from cdc.pg import install
from tests.support.databases import create_database, drop_database

TPL_PGQ = "pgq_queue_tpl_pgq"
TPL_CDC = "pgq_queue_tpl_cdc"
SCHEMAS = ("pgq", "cdc")

# PgQ functions we do not provide under PgQ's name, each for a reason the README gives:
# the C triggers (ours are generated per table by cdc attach), get_batch_cursor (it runs a
# caller's SQL fragment; ours is open_batch_cursor) and PgQ's internal grant helper.
NOT_PROVIDED = {"jsontriga", "logutriga", "sqltriga", "get_batch_cursor", "_grant_perms_from"}


@dataclass
class Side:
    """One database: its connection, its schema (pgq or cdc), the warnings it sent."""

    conn: psycopg.Connection
    schema: str
    warnings: list[str] = field(default_factory=list)

    def one(self, query: str, params: Any = None) -> Any:
        """The first column of the first row of a query; {s} is the side's schema."""
        row = self.conn.execute(query.replace("{s}", self.schema), params).fetchone()
        return None if row is None else row[0]

    def all(self, query: str, params: Any = None) -> list[tuple[Any, ...]]:
        return self.conn.execute(query.replace("{s}", self.schema), params).fetchall()

    def batch(self, queue: str, consumer: str) -> int:
        """Events are ticked into a batch, which the consumer takes."""
        self.one("select {s}.force_tick(%s)", (queue,))
        self.one("select {s}.ticker(%s)", (queue,))
        batch = self.one("select {s}.next_batch(%s, %s)", (queue, consumer))
        assert batch is not None
        return batch


@pytest.fixture(scope="session")
def queue_templates(pgq_admin_dsn: str) -> str:
    """Template databases: one with PgQ's extension, one with our engine."""
    with psycopg.connect(create_database(pgq_admin_dsn, TPL_PGQ), autocommit=True) as conn:
        conn.execute("create extension pgq")
    install.install(create_database(pgq_admin_dsn, TPL_CDC))
    return pgq_admin_dsn


@pytest.fixture
def both(queue_templates: str) -> Iterator[tuple[Side, Side]]:
    """Fresh clones of both templates: (PgQ's side, ours)."""
    tag = uuid.uuid4().hex[:10]
    names = [f"{tpl}_{tag}" for tpl in (TPL_PGQ, TPL_CDC)]
    sides = []
    for name, tpl, schema in zip(names, (TPL_PGQ, TPL_CDC), SCHEMAS, strict=True):
        conn = psycopg.connect(create_database(queue_templates, name, tpl), autocommit=True)
        side = Side(conn, schema)
        conn.add_notice_handler(
            lambda d, side=side: (
                side.warnings.append(f"{d.severity}: {d.message_primary}")
                if d.severity == "WARNING"
                else None
            )
        )
        sides.append(side)
    yield sides[0], sides[1]
    for side in sides:
        side.conn.close()
    for name in names:
        drop_database(queue_templates, name)


def each(both: tuple[Side, Side], query: str, params: Any = None) -> list[Any]:
    """The same query on both sides; the two first values."""
    return [side.one(query, params) for side in both]


def same(both: tuple[Side, Side], query: str, params: Any = None) -> Any:
    """The same query on both sides, which must return the same; that value."""
    pgq, ours = each(both, query, params)
    assert pgq == ours, f"{query}: pgq {pgq!r}, ours {ours!r}"
    return pgq


def queue_with_events(both: tuple[Side, Side], queue: str, n: int) -> list[int]:
    """A queue with a consumer c and n events, in a batch the consumer holds; its id, per side."""
    same(both, "select {s}.create_queue(%s)", (queue,))
    same(both, "select {s}.register_consumer(%s, 'c')", (queue,))
    for i in range(n):
        each(both, "select {s}.insert_event(%s, 't', %s)", (queue, str(i)))
    return [side.batch(queue, "c") for side in both]


# --------------------------------------------------------------------- signatures


def _functions(side: Side) -> dict[str, str]:
    """Every function of the schema: 'name(types)' -> its input arguments with their names
    (PgQ returns some results as OUT arguments, ours as a composite type of the same
    columns: the results are compared by the tests that call them)."""
    rows = side.all(
        """select p.proname || '(' || oidvectortypes(p.proargtypes) || ')',
                  pg_get_function_identity_arguments(p.oid)
             from pg_proc p where p.pronamespace = %s::regnamespace""",
        (side.schema,),
    )
    return {
        f: ", ".join(a for a in args.split(", ") if a and not a.startswith("OUT "))
        for f, args in rows
    }


def test_shared_functions_have_pgqs_argument_names(both: tuple[Side, Side]) -> None:
    """Every PgQ function that ours has under the same name and argument types has PgQ's
    argument names too, so a call in named notation works on both; and every PgQ function
    is ours too, but for those the README says we leave out on purpose."""
    pgq, ours = (_functions(side) for side in both)
    shared = pgq.keys() & ours.keys()
    assert len(shared) >= 32
    differ = {f: (pgq[f], ours[f]) for f in shared if pgq[f] != ours[f]}
    assert differ == {}
    missing = {f.split("(")[0] for f in pgq.keys() - ours.keys()}
    assert missing <= NOT_PROVIDED, missing - NOT_PROVIDED


NAMED_CALLS = [
    "select {s}.create_queue(i_queue_name => 'nq')",
    "select {s}.set_queue_config(x_queue_name => 'nq', x_param_name => 'ticker_max_count',"
    " x_param_value => '10')",
    "select {s}.insert_event(queue_name => 'nq', ev_type => 't', ev_data => 'd') > 0",
    "select {s}.insert_event(queue_name => 'nq', ev_type => 't', ev_data => 'd',"
    " ev_extra1 => '1', ev_extra2 => '2', ev_extra3 => '3', ev_extra4 => '4') > 0",
    "select {s}.current_event_table(x_queue_name => 'nq') is not null",
    "select {s}.register_consumer(x_queue_name => 'nq', x_consumer_id => 'c1')",
    "select {s}.register_consumer_at(x_queue_name => 'nq', x_consumer_name => 'c2',"
    " x_tick_pos => 1)",
    "select {s}.unregister_consumer(x_queue_name => 'nq', x_consumer_name => 'c2')",
    "select {s}.finish_batch(x_batch_id => -1)",
]


def test_named_calls_work_like_pgq(both: tuple[Side, Side]) -> None:
    """Calls in named notation, with PgQ's argument names, give PgQ's results."""
    for query in NAMED_CALLS:
        same(both, query)
    for side in both:
        b = side.batch("nq", "c1")
        assert side.one("select count(*) from {s}.get_batch_events(x_batch_id => %s)", (b,)) == 2
        assert (
            side.one("select consumer_name from {s}.get_batch_info(x_batch_id => %s)", (b,)) == "c1"
        )
        ev = side.one("select min(ev_id) from {s}.get_batch_events(%s)", (b,))
        assert (
            side.one(
                "select {s}.event_retry(x_batch_id => %s, x_event_id => %s, x_retry_seconds => 60)",
                (b, ev),
            )
            == 1
        )
        assert side.one("select {s}.finish_batch(x_batch_id => %s)", (b,)) == 1
    same(both, "select {s}.drop_queue(x_queue_name => 'nq', x_force => true)")


# --------------------------------------------------------------------- finish_batch


def test_finish_batch_of_finished_unknown_or_null_batch_warns_like_pgq(
    both: tuple[Side, Side],
) -> None:
    """A batch finished twice, one that never existed, and NULL: a WARNING naming the batch
    and 0, so a script that finishes twice goes on (the Python API still raises)."""
    batches = queue_with_events(both, "q", 2)
    for side, b in zip(both, batches, strict=True):
        assert side.one("select {s}.finish_batch(%s)", (b,)) == 1
        assert side.one("select {s}.finish_batch(%s)", (b,)) == 0
        assert side.one("select {s}.finish_batch(987654)") == 0
        assert side.one("select {s}.finish_batch(null)") == 0
    for side, b in zip(both, batches, strict=True):
        assert side.warnings == [
            f"WARNING: finish_batch: batch {b} not found",
            "WARNING: finish_batch: batch 987654 not found",
            "WARNING: finish_batch: batch <NULL> not found",
        ]


# --------------------------------------------------------------------- replica mode


def test_replica_mode_inserts_into_a_disabled_queue_like_pgq(both: tuple[Side, Side]) -> None:
    """With inserts disabled, insert_event and current_event_table are refused, except
    under session_replication_role = replica (a replication replay)."""
    same(both, "select {s}.create_queue('q')")
    for side in both:  # PgQ's set_queue_config cannot set it: an UPDATE, on both
        side.conn.execute(f"update {side.schema}.queue set queue_disable_insert = true")
    for side in both:
        for query in (
            "select {s}.insert_event('q', 't', 'd')",
            "select {s}.current_event_table('q')",
        ):
            with pytest.raises(psycopg.Error):
                side.one(query)
        side.conn.execute("set session_replication_role = replica")
        assert side.one("select {s}.insert_event('q', 't', 'replica')") > 0
        assert side.one("select {s}.current_event_table('q')") is not None
        side.conn.execute("set session_replication_role = local")
        with pytest.raises(psycopg.Error):
            side.one("select {s}.insert_event('q', 't', 'local')")
    pgq, ours = both
    qid = pgq.one("select queue_id from pgq.queue where queue_name = 'q'")
    assert pgq.all(f"select ev_data from pgq.event_{qid}") == ours.all(
        "select ev_data from cdc.event"
    )


# --------------------------------------------------------------------- retries


def test_batch_retry_keeps_an_event_retry_like_pgq(both: tuple[Side, Side]) -> None:
    """event_retry(ev, 1 hour) then batch_retry(0): the event keeps its hour, the others come
    back at once; a second event_retry of the same event and a second batch_retry move
    nothing."""
    batches = queue_with_events(both, "q", 3)
    counts = []
    for side, b in zip(both, batches, strict=True):
        first = side.one("select min(ev_id) from {s}.get_batch_events(%s)", (b,))
        counts.append(
            [
                side.one("select {s}.event_retry(%s, %s, 3600)", (b, first)),
                side.one("select {s}.event_retry(%s, %s, 3600)", (b, first)),
                side.one("select {s}.batch_retry(%s, 0)", (b,)),
                side.one("select {s}.batch_retry(%s, 0)", (b,)),
            ]
        )
    assert counts[0] == counts[1] == [1, 0, 2, 0]
    due = (
        "select ev_data, ev_retry, ev_retry_after > now() + interval '50 minutes'"
        "  from {s}.retry_queue order by ev_id"
    )
    for side, b in zip(both, batches, strict=True):
        assert side.all(due) == [("0", 1, True), ("1", 1, False), ("2", 1, False)]
        side.one("select {s}.finish_batch(%s)", (b,))
        assert side.one("select {s}.maint_retry_events()") == 2


# --------------------------------------------------------------------- settings


@pytest.mark.parametrize("param", ["rotation_period", "ticker_max_lag", "ticker_idle_period"])
def test_zero_intervals_are_accepted_like_pgq(both: tuple[Side, Side], param: str) -> None:
    """An interval of zero is a setting (as soon as allowed), not an error."""
    same(both, "select {s}.create_queue('q')")
    assert same(both, "select {s}.set_queue_config('q', %s, '0')", (param,)) == 1
    pgq, ours = (side.one(f"select queue_{param}::text from {{s}}.queue") for side in both)
    assert pgq == ours == "00:00:00"


def test_ticker_with_zero_lag_and_idle_ticks_every_call_like_pgq(both: tuple[Side, Side]) -> None:
    """With ticker_max_lag and ticker_idle_period 0, every ticker call ticks, with or
    without new events."""
    same(both, "select {s}.create_queue('q')")
    for param in ("ticker_max_lag", "ticker_idle_period"):
        same(both, "select {s}.set_queue_config('q', %s, '0')", (param,))
    for side in both:
        ticks = [side.one("select {s}.ticker('q')") for _ in range(3)]
        side.one("select {s}.insert_event('q', 't', 'd')")
        ticks.append(side.one("select {s}.ticker('q')"))
        assert None not in ticks and ticks == sorted(set(ticks)), ticks
