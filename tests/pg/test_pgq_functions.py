"""PgQ's low-level and utility functions, ours against PgQ 3.5's.

Differential tests: two fresh databases on the PgQ cluster (tests/support/pgq.py), one with
PgQ's extension and one with our engine, run the same statements (``{s}`` stands for the
schema, pgq or cdc) and must give the same values, rows, and errors where both fail. Where we
differ from PgQ on purpose, the test says so and checks both sides. Then the safety of the
functions that take names (hostile names, a role without rights on a sequence, roles acting
for others) and the ticker's handling of extra maintenance and vacuum rows, on the run's main
server.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from psycopg import sql

from cdc.pg import install
from cdc.pg.queue import Consumer, Producer, Queue
from cdc.pg.ticker import maintain
from tests.support.databases import create_database, drop_database
from tests.support.roles import LoginRoles

TPL_PGQ = "pgqfn_tpl_pgq"
TPL_CDC = "pgqfn_tpl_cdc"
T0 = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
EVENT_COLS = "ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4"
# Names that break SQL built by pasting: quotes, dots, dollar quotes, comments, semicolons.
HOSTILE_NAMES = [
    "x'; drop table victim; --",
    'x"; drop table victim; --',
    "a$$b.c$$; drop table victim; --",
    "$$",
    "s.t.u",
    '"quoted".name',
    "ünï.cödé",
    "",
    ".",
    "a..b",
]


@dataclass(frozen=True)
class Outcome:
    """What a statement gave: its rows, or the SQLSTATE of its error."""

    rows: list[tuple[Any, ...]] | None = None
    sqlstate: str | None = None

    @property
    def failed(self) -> bool:
        return self.sqlstate is not None


def run(conn: psycopg.Connection, schema: str, stmt: str, params: Any = None) -> Outcome:
    """One statement with ``{s}`` replaced by the schema; an error is caught as its SQLSTATE."""
    query = sql.SQL(stmt).format(s=sql.Identifier(schema))
    try:
        cur = conn.execute(query, params)
        return Outcome(rows=cur.fetchall() if cur.description else [])
    except psycopg.Error as exc:
        return Outcome(sqlstate=exc.sqlstate or "?")


@dataclass
class Pair:
    """PgQ's database and ours, an autocommit connection to each."""

    pgq: psycopg.Connection
    cdc: psycopg.Connection

    def sides(self) -> list[tuple[psycopg.Connection, str]]:
        return [(self.pgq, "pgq"), (self.cdc, "cdc")]

    def both(self, stmt: str, params: Any = None) -> tuple[Outcome, Outcome]:
        """The statement on each side: (PgQ's outcome, ours)."""
        a, b = (run(conn, schema, stmt, params) for conn, schema in self.sides())
        return a, b

    def same(self, stmt: str, params: Any = None) -> list[tuple[Any, ...]]:
        """Runs on both sides, asserts the same rows (or both failed with the same SQLSTATE);
        the rows."""
        a, b = self.both(stmt, params)
        assert a == b, f"{stmt} {params!r}\n  pgq: {a}\n  cdc: {b}"
        return a.rows or []

    def both_fail(self, stmt: str, params: Any = None) -> tuple[str, str]:
        """Runs on both sides and asserts that both raised; their SQLSTATEs."""
        a, b = self.both(stmt, params)
        assert a.failed and b.failed, f"{stmt} {params!r}\n  pgq: {a}\n  cdc: {b}"
        return a.sqlstate or "", b.sqlstate or ""

    def in_transaction(self, stmts: Sequence[str]) -> tuple[list[Outcome], list[Outcome]]:
        """The statements in one transaction per side, up to the first error."""
        result = []
        for conn, schema in self.sides():
            outcomes = []
            conn.execute("begin")
            for stmt in stmts:
                outcomes.append(run(conn, schema, stmt))
                if outcomes[-1].failed:
                    break
            conn.execute("rollback" if outcomes[-1].failed else "commit")
            result.append(outcomes)
        return result[0], result[1]


@pytest.fixture(scope="session")
def fn_templates(pgq_admin_dsn: str) -> Iterator[str]:
    """Template databases on the PgQ cluster: PgQ with queue q, ours with queue q."""
    a = create_database(pgq_admin_dsn, TPL_PGQ)
    with psycopg.connect(a, autocommit=True) as conn:
        conn.execute("create extension pgq")
        conn.execute("select pgq.create_queue('q')")
    b = create_database(pgq_admin_dsn, TPL_CDC)
    install.install(b)
    with psycopg.connect(b, autocommit=True) as conn:
        conn.execute("select cdc.create_queue('q')")
    yield pgq_admin_dsn
    drop_database(pgq_admin_dsn, TPL_PGQ)
    drop_database(pgq_admin_dsn, TPL_CDC)


@pytest.fixture
def pair(fn_templates: str) -> Iterator[Pair]:
    """Fresh clones of both templates."""
    tag = uuid.uuid4().hex[:10]
    names = [f"{TPL_PGQ}_{tag}", f"{TPL_CDC}_{tag}"]
    dsns = [
        create_database(fn_templates, n, template=t)
        for n, t in zip(names, (TPL_PGQ, TPL_CDC), strict=True)
    ]
    conns = [psycopg.connect(d, autocommit=True) for d in dsns]
    yield Pair(*conns)
    for c in conns:
        c.close()
    for n in names:
        drop_database(fn_templates, n)


def events(pair: Pair) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Every event of queue q on each side: ev_id, ev_time, ev_owner, ev_retry, then
    EVENT_COLS, in ev_id order."""
    cols = f"ev_id, ev_time, ev_owner, ev_retry, {EVENT_COLS}"
    qid = pair.pgq.execute("select queue_id from pgq.queue where queue_name = 'q'").fetchone()[0]
    a = pair.pgq.execute(
        sql.SQL("select {} from {} order by ev_id, ev_type").format(
            sql.SQL(cols), sql.Identifier("pgq", f"event_{qid}")
        )
    ).fetchall()
    b = pair.cdc.execute(
        f"select {cols} from cdc.event e join cdc.queue q on e.ev_part / 1000 = q.queue_id"
        " where q.queue_name = 'q' order by ev_id, ev_type"
    ).fetchall()
    return a, b


# ---------------------------------------------------------------------- names and sequences


def test_quote_fqname_matches_pgq_for_every_kind_of_name(pair: Pair) -> None:
    """quote_fqname splits at the first dot, defaults to public and quotes each part as PgQ's
    does, hostile names included; NULL gives NULL."""
    names = ["a", "s.t", "My S.Odd Tab", "a.b.c", '"x".y', "select.from", None, *HOSTILE_NAMES]
    got = [pair.same("select {s}.quote_fqname(%s)", (n,))[0][0] for n in names]
    assert got[:7] == [
        "public.a",
        "s.t",
        '"My S"."Odd Tab"',
        'a."b.c"',
        '"""x""".y',
        '"select"."from"',
        None,
    ]
    assert got[names.index("")] == 'public.""'


def test_seq_getval_and_setval_match_pgq(pair: Pair) -> None:
    """seq_getval reads last_value, seq_setval only moves forward; names split at the first
    dot, odd characters included; unknown names and quoted names fail on both."""
    for conn, _ in pair.sides():
        conn.execute(
            'create schema "My S"; create sequence "My S"."Odd.seq";'
            " create sequence public.myseq; create sequence public.other;"
            ' create schema "s""q";'
            ' create sequence "s""q"."a.b$$c\'d"'
        )
    for name in ["myseq", "public.other", "My S.Odd.seq", "s\"q.a.b$$c'd"]:
        assert pair.same("select {s}.seq_getval(%s)", (name,)) == [(1,)]
        assert pair.same("select {s}.seq_setval(%s, 10)", (name,)) == [(10,)]
        assert pair.same("select {s}.seq_setval(%s, 5)", (name,)) == [(10,)]
        assert pair.same("select {s}.seq_getval(%s)", (name,)) == [(10,)]
    assert pair.same("select nextval('myseq')") == [(11,)]
    assert pair.same("select {s}.seq_getval(null), {s}.seq_setval(null, 1)") == [(None, None)]
    assert pair.same("select {s}.seq_setval('myseq', null)") == [(None,)]
    for name in ["nosuch_seq", '"My S"."Odd.seq"', *HOSTILE_NAMES]:
        a, b = pair.both_fail("select {s}.seq_getval(%s)", (name,))
        assert a == b
        a, b = pair.both_fail("select {s}.seq_setval(%s, 100)", (name,))
        assert a == b
    assert pair.same("select count(*) from pg_class where relname = 'victim'") == [(0,)]


# ---------------------------------------------------------------------- producing, retrying


def test_insert_event_raw_matches_pgq(pair: Pair) -> None:
    """insert_event_raw: ids from the sequence or given (duplicates accepted), time given or
    now, owner and retry stored; unknown and NULL queues fail on both."""
    t = dt.datetime(2001, 1, 1, tzinfo=dt.UTC)
    calls: list[tuple[Any, ...]] = [
        (None, None, None, None, "rawt", "rawd", None, None, None, None),
        (1000, t, 5, 3, "t2", "d2", "x1", "x2", "x3", "x4"),
        (1000, t, None, None, "dup", None, None, None, None, None),
        (None, t, None, 0, None, "nulltype", None, None, None, None),
    ]
    stmt = "select {s}.insert_event_raw('q', %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
    # every call advances the sequence, an explicit ev_id too (as PgQ's C function does)
    assert [pair.same(stmt, c)[0][0] for c in calls] == [1, 1000, 1000, 4]
    a, b = events(pair)
    assert [r[:1] + r[2:] for r in a] == [r[:1] + r[2:] for r in b]
    assert [r[1] for r in a][1:] == [r[1] for r in b][1:] == [t, t, t]
    # ev_time NULL: now()
    assert all(abs(r[0][1] - dt.datetime.now(dt.UTC)) < dt.timedelta(minutes=5) for r in (a, b))
    pair.both_fail(
        "select {s}.insert_event_raw('nosuch', null, null, null, null, 'a', 'b', null, null,"
        " null, null)"
    )
    pair.both_fail(
        "select {s}.insert_event_raw(null, null, null, null, null, 'a', 'b', null, null,"
        " null, null)"
    )


RAW = "select {s}.insert_event_raw('q', null, null, null, null, 't', 'd', null, null, null, null)"


def test_insert_event_raw_obeys_disable_insert_but_in_replica_mode(pair: Pair) -> None:
    """With disable_insert both refuse insert_event_raw; with session_replication_role =
    replica both accept it."""
    pair.same("update {s}.queue set queue_disable_insert = true where queue_name = 'q'")
    assert pair.both_fail(RAW)[1] == "QC008"
    pair.same("set session_replication_role = replica")
    assert pair.same(RAW) == [(2,)]  # the refused call took an id too
    pair.same("set session_replication_role = origin")
    pair.both_fail(RAW)
    a_ev, b_ev = events(pair)
    assert [r[0] for r in a_ev] == [r[0] for r in b_ev] == [2]


def test_insert_event_raw_counts_against_per_tx_limit(pair: Pair) -> None:
    """per_tx_limit 2: the third event of a transaction fails on both, whether it comes from
    insert_event_raw or insert_event; a new transaction starts again."""
    pair.same("update {s}.queue set queue_per_tx_limit = 2 where queue_name = 'q'")
    a, b = pair.in_transaction([RAW, RAW, RAW])
    assert [o.failed for o in a] == [o.failed for o in b] == [False, False, True]
    assert b[-1].sqlstate == "QC007"
    ins = "select {s}.insert_event('q', 'a', 'b')"
    a, b = pair.in_transaction([ins, RAW, RAW])
    assert [o.failed for o in a] == [o.failed for o in b] == [False, False, True]
    a, b = pair.in_transaction([RAW, ins])
    assert [o.failed for o in a] == [o.failed for o in b] == [False, False]
    a_ev, b_ev = events(pair)
    assert [r[4:] for r in a_ev] == [r[4:] for r in b_ev] and len(b_ev) == 2


def test_event_retry_raw_matches_pgq(pair: Pair) -> None:
    """event_retry_raw puts the event into the consumer's retry queue as given (NULL id: the
    next sequence value; NULL retry count kept); a duplicate id or an unknown consumer fails."""
    pair.same("select {s}.register_consumer('q', 'c')")
    stmt = (
        "select {s}.event_retry_raw('q', 'c', %s, %s, %s, %s, 'rt', 'rd', 'x1', null, null, null)"
    )
    after, t = T0, dt.datetime(2020, 5, 5, tzinfo=dt.UTC)
    assert pair.same(stmt, (after, None, t, 0)) == [(1,)]
    assert pair.same(stmt, (after, 555, t, None)) == [(555,)]
    a, b = pair.both_fail(stmt, (after, 555, t, 1))
    assert a == b == "23505"
    a, b = pair.both_fail(stmt, (after, 8, None, 1))  # ev_time is required on both
    assert a == b == "23502"
    a, b = pair.both_fail(stmt, (None, 9, t, 1))  # and so is retry_after
    assert a == b == "23502"
    pair.both_fail(stmt.replace("'c'", "'nosuch'"), (after, 7, t, 1))
    pair.both_fail(stmt.replace("'q'", "'nosuch'"), (after, 7, t, 1))
    rows = pair.same(
        "select ev_retry_after, ev_id, ev_time, ev_txid, ev_retry, " + EVENT_COLS + ","
        " ev_owner = (select sub_id from {s}.subscription) from {s}.retry_queue order by ev_id"
    )
    assert [(r[1], r[4], r[-1]) for r in rows] == [(1, 0, True), (555, None, True)]
    assert pair.same("select {s}.seq_getval(queue_event_seq) from {s}.queue") == [(1,)]


# ---------------------------------------------------------------------- reading a batch


def open_batch(pair: Pair) -> tuple[int, int]:
    """Consumer c on queue q with an open batch of two events on each side; the batch ids."""
    pair.same("select {s}.register_consumer('q', 'c')")
    pair.same("select {s}.insert_event('q', 'a', '1'), {s}.insert_event('q', 'b', '2')")
    for conn, schema in pair.sides():  # a tick now, however young the queue is
        run(conn, schema, "select {s}.force_tick('q')")
        run(conn, schema, "select {s}.ticker('q')")
    a = pair.pgq.execute("select pgq.next_batch('q', 'c')").fetchone()[0]
    b = pair.cdc.execute("select cdc.next_batch('q', 'c')").fetchone()[0]
    assert a is not None and b is not None
    return a, b


def test_batch_event_sql_reads_the_batch_like_pgq(pair: Pair) -> None:
    """The text batch_event_sql returns, run by the owner, gives the batch's events in the
    order and columns of get_batch_events, on both."""
    batches = open_batch(pair)
    got = []
    for (conn, schema), batch in zip(pair.sides(), batches, strict=True):
        text = conn.execute(
            sql.SQL("select {}.batch_event_sql(%s)").format(sql.Identifier(schema)), (batch,)
        ).fetchone()[0]
        rows = conn.execute(text).fetchall()
        same_as = conn.execute(
            sql.SQL("select * from {}.get_batch_events(%s)").format(sql.Identifier(schema)),
            (batch,),
        ).fetchall()
        assert rows == same_as
        got.append([(r[0], r[3], *r[4:]) for r in rows])
    assert (
        got[0]
        == got[1]
        == [(1, None, "a", "1", None, None, None, None), (2, None, "b", "2") + (None,) * 4]
    )
    pair.both_fail("select {s}.batch_event_sql(999999)")


def test_batch_event_tables_names_every_table_ending_with_the_current(pair: Pair) -> None:
    """PgQ names the previous and the current table; ours names every table of the queue,
    oldest first, since our readers read them all (a deliberate difference): PgQ's are
    among ours, in the same order, and both end with the current table."""
    a_batch, b_batch = open_batch(pair)
    a = [r[0] for r in pair.pgq.execute("select pgq.batch_event_tables(%s)", (a_batch,))]
    b = [r[0] for r in pair.cdc.execute("select cdc.batch_event_tables(%s)", (b_batch,))]
    strip = [t.split(".", 1)[1] for t in a]
    assert [t.split(".", 1)[1] for t in b][-len(a) :] == strip
    assert b == ["cdc.event_1_1", "cdc.event_1_2", "cdc.event_1_0"]
    assert pair.same("select queue_cur_table from {s}.queue") == [(0,)]
    pair.both_fail("select {s}.batch_event_tables(999999)")


# ---------------------------------------------------------------------- ticks


EXTERNAL_TICKS = [(2, 1, 10), (3, 2, 50), (4, 3, 120), (10, 10, 400)]


def external_ticks(pair: Pair) -> None:
    """Queue q on an external ticker with ticks 2, 3, 4, 10 at T0 + 1, 2, 3, 10 s."""
    pair.same("select {s}.set_queue_config('q', 'external_ticker', 'true')")
    for tick_id, secs, seq in EXTERNAL_TICKS:
        when = T0 + dt.timedelta(seconds=secs)
        assert pair.same("select {s}.ticker('q', %s, %s, %s)", (tick_id, when, seq)) == [(tick_id,)]


def test_external_ticker_inserts_exactly_that_tick(pair: Pair) -> None:
    """ticker(q, id, time, seq) inserts that tick and raises both sequences, never lowering
    them; a duplicate id, a queue without external_ticker and a paused queue fail on both."""
    pair.same("select {s}.create_queue('q2')")
    pair.both_fail("select {s}.ticker('q', 2, %s, 10)", (T0,))  # not external yet
    external_ticks(pair)
    rows = pair.same(
        "select tick_id, tick_time, tick_event_seq from {s}.tick t join {s}.queue q"
        " on q.queue_id = t.tick_queue where q.queue_name = 'q' and tick_id > 1 order by 1"
    )
    assert [(r[0], r[2]) for r in rows] == [(i, s) for i, _, s in EXTERNAL_TICKS]
    seqs = "select {s}.seq_getval(queue_tick_seq), {s}.seq_getval(queue_event_seq) from {s}.queue"
    assert pair.same(seqs + " where queue_name = 'q'") == [(10, 400)]
    a, b = pair.both_fail("select {s}.ticker('q', 10, %s, 500)", (T0,))
    assert a == "23505" and b == "QC006"
    pair.both_fail("select {s}.ticker('q2', 5, %s, 1)", (T0,))
    pair.both_fail("select {s}.ticker('nosuch', 5, %s, 1)", (T0,))
    pair.same("select {s}.set_queue_config('q', 'ticker_paused', 'true')")
    pair.both_fail("select {s}.ticker('q', 20, %s, 1)", (T0,))
    pair.same("select {s}.set_queue_config('q', 'ticker_paused', 'false')")
    assert pair.same("select {s}.ticker('q', 20, %s, 5)", (T0,)) == [(20,)]
    assert pair.same(seqs + " where queue_name = 'q'") == [(20, 400)]  # event seq kept


def test_external_ticker_refuses_a_lower_tick_id_that_pgq_accepts(pair: Pair) -> None:
    """A tick id below the last one would put a newer snapshot before older ones: PgQ accepts
    it, ours refuses it (QC006) and inserts nothing (a deliberate difference)."""
    external_ticks(pair)
    a, b = pair.both("select {s}.ticker('q', 7, %s, 1)", (T0,))
    assert a.rows == [(7,)] and b.sqlstate == "QC006"
    assert pair.cdc.execute("select count(*) from cdc.tick where tick_id = 7").fetchone() == (0,)


@pytest.mark.parametrize(
    "args",
    [
        (1, T0, 0, 1, None),  # last tick passes min_count twice over: first fitting tick
        (1, T0, 0, 300, None),  # last tick fits, not twice over: the last tick
        (1, T0, 0, 100, None),
        (1, T0, 0, None, dt.timedelta(seconds=6)),
        (1, T0, 0, None, dt.timedelta(seconds=2)),
        (1, T0, 0, 100, dt.timedelta(seconds=20)),
        (1, T0, 0, 1000, None),  # nothing fits
        (10, T0, 400, 1, None),  # no later tick
        (1, T0, 0, None, None),  # no criterion
        (1, T0, None, 100, None),  # unknown start position
        (3, T0 + dt.timedelta(seconds=2), 50, 60, None),
    ],
)
def test_find_tick_helper_matches_pgq(pair: Pair, args: tuple[Any, ...]) -> None:
    """find_tick_helper picks the same end tick as PgQ's, or none, over the same ticks."""
    external_ticks(pair)
    stmt = (
        "select * from {s}.find_tick_helper((select queue_id from {s}.queue"
        " where queue_name = 'q'), %s, %s, %s, %s, %s)"
    )
    rows = pair.same(stmt, args)
    assert len(rows) == 1
    assert pair.same(stmt.replace("where queue_name = 'q'", "where false"), args) == [
        (None, None, None)
    ]


def test_find_tick_helper_finds_the_expected_ticks(pair: Pair) -> None:
    """The tick search's rule, checked on ours: first fitting tick when the last passes a
    criterion twice over, else the last tick when it fits."""
    external_ticks(pair)
    stmt = "select next_tick_id from cdc.find_tick_helper(1, 1, %s, 0, %s, %s)"
    got = [
        pair.cdc.execute(stmt, (T0, n, i)).fetchone()[0]
        for n, i in [(1, None), (300, None), (100, None), (None, dt.timedelta(seconds=2))]
    ]
    assert got == [2, 10, 4, 3]


# ---------------------------------------------------------------------- administration


def reloptions(conn: psycopg.Connection, schema: str) -> list[tuple[Any, ...]]:
    """Sorted reloptions of each event table of the schema and of its TOAST table."""
    return conn.execute(
        "select c.relname::text,"
        " (select array_agg(o order by o) from unnest(c.reloptions) o),"
        " (select array_agg(o order by o) from unnest(t.reloptions) o)"
        " from pg_class c left join pg_class t on t.oid = c.reltoastrelid"
        " where c.relnamespace = %s::regnamespace and c.relname ~ '^event_[0-9]+_[0-9]+$'"
        " order by 1",
        (schema,),
    ).fetchall()


def test_tune_storage_matches_pgq(pair: Pair) -> None:
    """tune_storage sets fillfactor 100 and autovacuum off on every event table and its TOAST
    table; 0 for an unknown queue (hostile names too), NULL for NULL."""
    for conn, schema in pair.sides():
        conn.execute(
            sql.SQL("alter table {} reset (fillfactor, autovacuum_enabled)").format(
                sql.Identifier(schema, "event_1_0")
            )
        )
    assert pair.same("select {s}.tune_storage('q')") == [(1,)]
    a, b = (reloptions(conn, schema) for conn, schema in pair.sides())
    assert a == b and len(b) == 3
    assert b[0][1:] == (
        ["autovacuum_enabled=off", "fillfactor=100"],
        ["autovacuum_enabled=off"],
    )
    assert pair.same("select {s}.tune_storage(null)") == [(None,)]
    for name in ["nosuch", *HOSTILE_NAMES]:
        assert pair.same("select {s}.tune_storage(%s)", (name,)) == [(0,)]


def test_grant_perms_and_hostile_queue_names_match_pgq(pair: Pair) -> None:
    """grant_perms returns 1 for a queue, fails for an unknown or NULL one; a queue with a
    hostile name is tuned and granted like any other on both."""
    assert pair.same("select {s}.grant_perms('q')") == [(1,)]
    pair.both_fail("select {s}.grant_perms(null)")
    for name in HOSTILE_NAMES:
        pair.both_fail("select {s}.grant_perms(%s)", (name,))
    name = "q'x\"$$.y; --"
    assert pair.same("select {s}.create_queue(%s)", (name,)) == [(1,)]
    assert pair.same("select {s}.grant_perms(%s), {s}.tune_storage(%s)", (name, name)) == [(1, 1)]
    assert pair.same("select count(*) from pg_class where relname = 'victim'") == [(0,)]


def test_upgrade_schema_returns_0_and_adds_queue_extra_maint(pair: Pair) -> None:
    """upgrade_schema returns 0 every time, and puts back a missing queue_extra_maint with
    PgQ's type."""
    assert pair.same("select {s}.upgrade_schema()") == [(0,)]
    pair.same("alter table {s}.queue drop column queue_extra_maint")
    assert pair.same("select {s}.upgrade_schema(), {s}.upgrade_schema()") == [(0, 0)]
    assert pair.same(
        "select format_type(atttypid, atttypmod), attnotnull from pg_attribute"
        " where attrelid = '{s}.queue'::regclass and attname = 'queue_extra_maint'"
        " and not attisdropped"
    ) == [("text[]", False)]


# ---------------------------------------------------------------------- maintenance


def extra_rows(pair: Pair) -> tuple[Outcome, Outcome]:
    """maint_operations without the rotation rows (PgQ lists only queues due, ours all)."""
    return pair.both(
        "select func_name, func_arg from {s}.maint_operations()"
        " where func_name is null or func_name !~ '^(pgq|cdc)\\.maint_rotate_tables_step'"
    )


def test_maint_operations_lists_extra_maint_like_pgq(pair: Pair) -> None:
    """queue_extra_maint gives one row per element, func_arg the queue, queues in name order,
    elements in array order, NULL elements kept; our rotation rows come first."""
    for name in ("q5", "q4", "q5b", "q6"):
        pair.same("select {s}.create_queue(%s)", (name,))
    pair.same(
        "update {s}.queue set queue_extra_maint = case queue_name"
        " when 'q4' then '{{x.step}}'::text[] when 'q5' then '{{public.my_maint,other.fn}}'"
        " when 'q5b' then '{{NULL}}' end where queue_name in ('q4', 'q5', 'q5b')"
    )
    a, b = extra_rows(pair)
    assert a == b
    assert b.rows == [
        ("x.step", "q4"),
        ("public.my_maint", "q5"),
        ("other.fn", "q5"),
        (None, "q5b"),
    ]
    ours = pair.cdc.execute("select func_name from cdc.maint_operations()").fetchall()
    assert ours[:6] == [("cdc.maint_rotate_tables_step1",)] * 5 + [
        ("cdc.maint_rotate_tables_step2",)
    ]


def test_maint_operations_survives_an_empty_extra_maint(pair: Pair) -> None:
    """An empty queue_extra_maint breaks PgQ's maint_operations (22004); ours gives no row
    for that queue and lists the others (a deliberate difference)."""
    pair.same("select {s}.create_queue('q6')")
    pair.same("update {s}.queue set queue_extra_maint = '{{}}' where queue_name = 'q6'")
    pair.same("update {s}.queue set queue_extra_maint = '{{a.b}}' where queue_name = 'q'")
    a, b = extra_rows(pair)
    assert a.sqlstate == "22004"
    assert b.rows == [("a.b", "q")]


@pytest.fixture
def autovacuum_off(fn_templates: str) -> Iterator[None]:
    """Autovacuum off on the PgQ cluster for one test (ALTER SYSTEM, reloaded)."""

    def _set(value: str | None) -> None:
        with psycopg.connect(fn_templates, autocommit=True) as c:
            if value is None:
                c.execute("alter system reset autovacuum")
            else:
                c.execute(sql.SQL("alter system set autovacuum = {}").format(sql.Literal(value)))
            c.execute("select pg_reload_conf()")
        want = value or "on"
        for _ in range(100):
            with psycopg.connect(fn_templates, autocommit=True) as c:
                if c.execute("show autovacuum").fetchone()[0] == want:
                    return
            time.sleep(0.05)
        raise AssertionError(f"autovacuum did not become {want}")

    _set("off")
    try:
        yield
    finally:
        _set(None)


def test_tables_to_vacuum_with_autovacuum_on_is_empty(pair: Pair) -> None:
    """While autovacuum is on, neither lists a table to vacuum."""
    assert pair.same("show autovacuum") == [("on",)]
    assert pair.same("select * from {s}.maint_tables_to_vacuum()") == []
    a, b = extra_rows(pair)
    assert a.rows == b.rows == []


def vacuum_count(conn: psycopg.Connection) -> int:
    return conn.execute(
        "select vacuum_count from pg_stat_all_tables where relid = 'cdc.queue'::regclass"
    ).fetchone()[0]


def test_vacuum_rows_match_pgq_and_the_ticker_runs_them(
    pair: Pair, autovacuum_off: None, fn_templates: str
) -> None:
    """With autovacuum off both list the same queue tables to vacuum (each in its schema),
    as 'vacuum' rows after the others; the ticker's maintain() runs VACUUM on each."""
    tag = "select regexp_replace(t, '^(pgq|cdc)\\.', '') from {s}.maint_tables_to_vacuum() t"
    dsns = [conn.info.dsn for conn, _ in pair.sides()]
    for conn, _ in pair.sides():  # a new session sees the reloaded setting
        conn.close()
    pair.pgq, pair.cdc = (psycopg.connect(d, autocommit=True) for d in dsns)
    try:
        rows = pair.same(tag)
        assert rows == [("subscription",), ("consumer",), ("queue",), ("tick",), ("retry_queue",)]
        a, b = extra_rows(pair)
        assert a.rows is not None and b.rows is not None
        assert [(f, t.split(".")[1]) for f, t in a.rows] == [
            (f, t.split(".")[1]) for f, t in b.rows
        ]
        assert b.rows[0] == ("vacuum", "cdc.subscription")
        before = vacuum_count(pair.cdc)
        assert maintain(pair.cdc) >= 5
        for _ in range(100):
            pair.cdc.execute("select pg_stat_clear_snapshot()")
            if vacuum_count(pair.cdc) > before:
                break
            time.sleep(0.1)
        assert vacuum_count(pair.cdc) > before
    finally:
        pair.pgq.close()
        pair.cdc.close()


# ---------------------------------------------------------------------- the ticker's maintain()


MAINT_FUNCTIONS = """
create table public.maint_log (queue text, at timestamptz default now());
create function public.my_maint(q text) returns integer language sql
    as $$ insert into public.maint_log (queue) values (q) returning 1 $$;
create function public.failing(q text) returns integer language plpgsql
    as $$ begin raise exception 'failing for %', q; end $$;
"""


def test_maintain_runs_extra_maint_and_survives_unknown_names(
    conn: psycopg.Connection, caplog: pytest.LogCaptureFixture
) -> None:
    """maintain() calls a queue's extra maintenance function with the queue name; an unknown
    name, a NULL element, a name that tries to inject SQL and a failing function are each
    logged as an error, and the operations after them still run."""
    Queue(conn, "q").create()
    conn.execute(MAINT_FUNCTIONS)
    conn.execute(
        "update cdc.queue set queue_extra_maint = array["
        "'nosuch.fn', null, 'public.my_maint(text); drop table public.maint_log; --',"
        " 'bad name (', 'public.failing', 'public.my_maint']"
    )
    with caplog.at_level(logging.INFO, logger="cdc"):
        assert maintain(conn) == 1
    assert conn.execute("select queue from public.maint_log").fetchall() == [("q",)]
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 5
    assert "no function nosuch.fn(text) for queue q" in errors[0]
    assert "NULL element" in errors[1]
    assert "failing for q" in errors[4]


def test_maintain_needs_an_autocommit_connection(dsn: str) -> None:
    """maintain() refuses a connection that is not in autocommit mode, before any call."""
    with psycopg.connect(dsn) as c, pytest.raises(ValueError, match="autocommit"):
        maintain(c)


def test_maintain_still_raises_when_the_engine_rotation_fails(conn: psycopg.Connection) -> None:
    """Errors of the engine's own rotation steps are not swallowed (the daemon reconnects)."""
    Queue(conn, "q").create()
    conn.execute("alter table cdc.queue rename column queue_switch_step2 to x_step2")
    try:
        with pytest.raises(psycopg.Error):
            maintain(conn)
    finally:
        conn.execute("alter table cdc.queue rename column x_step2 to queue_switch_step2")


# ---------------------------------------------------------------------- rights


def test_seq_setval_cannot_move_a_sequence_without_rights(
    conn: psycopg.Connection, login_roles: LoginRoles
) -> None:
    """A cdc_admin member without privileges on a sequence can neither read it nor move it
    with seq_getval / seq_setval, our engine's sequences included; SELECT lets it read,
    UPDATE lets it move (the functions run with the caller's rights)."""
    Queue(conn, "q").create()
    conn.execute("create sequence public.owned_seq")
    admin = login_roles.connect("cdc_admin")
    for stmt in [
        "select cdc.seq_setval('public.owned_seq', 100)",
        "select cdc.seq_getval('public.owned_seq')",
        "select cdc.seq_setval('cdc.event_1_id_seq', 1000000)",
        "select cdc.seq_setval('cdc.event_1_tick_seq', 1000000)",
    ]:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            admin.execute(stmt)
    assert conn.execute("select last_value, is_called from public.owned_seq").fetchone() == (
        1,
        False,
    )
    assert conn.execute("select last_value from cdc.event_1_id_seq").fetchone() == (1,)
    conn.execute(
        sql.SQL("grant select on public.owned_seq to {}").format(sql.Identifier(admin.info.user))
    )
    assert admin.execute("select cdc.seq_getval('public.owned_seq')").fetchone() == (1,)
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        admin.execute("select cdc.seq_setval('public.owned_seq', 100)")
    conn.execute(
        sql.SQL("grant update on public.owned_seq to {}").format(sql.Identifier(admin.info.user))
    )
    assert admin.execute("select cdc.seq_setval('public.owned_seq', 100)").fetchone() == (100,)
    assert conn.execute("select last_value from public.owned_seq").fetchone() == (100,)


def test_seq_functions_treat_hostile_names_as_names(conn: psycopg.Connection) -> None:
    """A name that carries SQL is quoted as one identifier: nothing runs but the lookup."""
    conn.execute("create table public.victim (x int)")
    for name in HOSTILE_NAMES:
        for stmt in ["select cdc.seq_getval(%s)", "select cdc.seq_setval(%s, 5)"]:
            with pytest.raises(psycopg.Error) as caught:
                conn.execute(stmt, (name,))
            # no such relation, or a zero-length identifier for '' and '.'
            assert caught.value.sqlstate in ("42P01", "42601")
    assert conn.execute("select to_regclass('public.victim') is not null").fetchone() == (True,)
    got = conn.execute(
        "select cdc.quote_fqname(n) from unnest(%s::text[]) n", (HOSTILE_NAMES,)
    ).fetchall()
    assert got[0] == ('public."x\'; drop table victim; --"',)
    assert got[2] == ('"a$$b"."c$$; drop table victim; --"',)


def test_grant_perms_takes_back_public_privileges(
    conn: psycopg.Connection, login_roles: LoginRoles
) -> None:
    """grant_perms revokes what PUBLIC was given on the queue's tables and sequences, and
    refuses unknown (hostile) names with QC001; only cdc_admin may run it."""
    Queue(conn, "q").create()
    conn.execute(
        "grant select on cdc.event_1_0 to public; grant usage on cdc.event_1_id_seq to public"
    )
    public = "select has_table_privilege('public', %s, 'select')"
    assert conn.execute(public, ("cdc.event_1_0",)).fetchone() == (True,)
    assert conn.execute("select cdc.grant_perms('q')").fetchone() == (1,)
    assert conn.execute(public, ("cdc.event_1_0",)).fetchone() == (False,)
    assert conn.execute(
        "select has_sequence_privilege('public', 'cdc.event_1_id_seq', 'usage')"
    ).fetchone() == (False,)
    for name in HOSTILE_NAMES:
        with pytest.raises(psycopg.Error) as caught:
            conn.execute("select cdc.grant_perms(%s)", (name,))
        assert caught.value.sqlstate == "QC001"
    reader = login_roles.connect("cdc_reader")
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        reader.execute("select cdc.grant_perms('q')")
    assert conn.execute("select cdc.tune_storage(%s)", (HOSTILE_NAMES[0],)).fetchone() == (0,)


def test_external_ticker_is_for_cdc_admin_only(
    conn: psycopg.Connection, login_roles: LoginRoles
) -> None:
    """A cdc_reader member may execute every ticker overload, but the external one refuses it
    (QC015) and inserts nothing; a cdc_admin member may."""
    Queue(conn, "q").create()
    Queue(conn, "q").set_config("external_ticker", True)
    reader = login_roles.connect("cdc_reader")
    with pytest.raises(psycopg.Error) as caught:
        reader.execute("select cdc.ticker('q', 100, now(), 5)")
    assert caught.value.sqlstate == "QC015"
    assert conn.execute("select max(tick_id) from cdc.tick").fetchone() == (1,)
    admin = login_roles.connect("cdc_admin")
    assert admin.execute("select cdc.ticker('q', 100, now(), 5)").fetchone() == (100,)


def test_batch_readers_act_only_for_their_own_consumer(
    conn: psycopg.Connection, login_roles: LoginRoles
) -> None:
    """batch_event_tables, batch_event_sql and event_retry_raw refuse (QC014) a reader acting
    for a consumer another role registered, and serve the one that registered it."""
    Queue(conn, "q").create()
    owner = login_roles.connect("cdc_reader")
    other = login_roles.connect("cdc_reader")
    Consumer(owner, "q", "c").register()
    Producer(conn, "q").insert("I", "x")
    Queue(conn, "q").force_tick()
    Queue(conn, "q").tick()
    batch = Consumer(owner, "q", "c").next_batch()
    assert batch is not None
    retry = (
        "select cdc.event_retry_raw('q', 'c', now(), 77, now(), 0, 't', 'd',"
        " null, null, null, null)"
    )
    for stmt in [
        "select cdc.batch_event_tables(%(b)s)",
        "select cdc.batch_event_sql(%(b)s)",
        retry,
    ]:
        with pytest.raises(psycopg.Error) as caught:
            other.execute(stmt, {"b": batch.batch_id})
        assert caught.value.sqlstate == "QC014"
    assert (
        len(owner.execute("select cdc.batch_event_tables(%s)", (batch.batch_id,)).fetchall()) == 3
    )
    text = owner.execute("select cdc.batch_event_sql(%s)", (batch.batch_id,)).fetchone()[0]
    assert conn.execute(text).fetchall()[0][4:6] == ("I", "x")
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        owner.execute(text)  # the event tables are the owner's only
    assert owner.execute(retry).fetchone() == (77,)


def test_insert_event_raw_is_for_writers(conn: psycopg.Connection, login_roles: LoginRoles) -> None:
    """A cdc_writer member may call insert_event_raw; a reader may not; quote_fqname is open
    to any role."""
    Queue(conn, "q").create()
    writer = login_roles.connect("cdc_writer")
    raw = (
        "select cdc.insert_event_raw('q', null, null, null, null, 't', 'd', null, null, null, null)"
    )
    assert writer.execute(raw).fetchone() == (1,)
    reader = login_roles.connect("cdc_reader")
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        reader.execute(raw)
    plain = login_roles.connect(None)
    assert plain.execute("select cdc.quote_fqname('a.b')").fetchone() == ("a.b",)


def test_upgrade_schema_and_install_repair_an_older_schema(
    conn: psycopg.Connection, dsn: str
) -> None:
    """upgrade_schema (and a new install over the old one) put back what an older install
    lacks: queue_extra_maint, sub_owner, a nullable retry_queue.ev_retry, the current-table
    sequence; the data stays."""
    Queue(conn, "q").create()
    old_schema = (
        "alter table cdc.queue drop column queue_extra_maint;"
        " alter table cdc.subscription drop column sub_owner;"
        " alter table cdc.retry_queue alter column ev_retry set not null;"
        " drop sequence cdc.event_1_cur"
    )
    check = (
        "select (select count(*) from pg_attribute where attrelid = 'cdc.queue'::regclass"
        "        and attname = 'queue_extra_maint' and not attisdropped),"
        " (select count(*) from pg_attribute where attrelid = 'cdc.subscription'::regclass"
        "        and attname = 'sub_owner' and not attisdropped),"
        " (select attnotnull from pg_attribute where attrelid = 'cdc.retry_queue'::regclass"
        "        and attname = 'ev_retry'),"
        " to_regclass('cdc.event_1_cur') is not null,"
        " (select count(*) from cdc.queue)"
    )
    conn.execute(old_schema)
    assert conn.execute(check).fetchone() == (0, 0, True, False, 1)
    assert conn.execute("select cdc.upgrade_schema()").fetchone() == (0,)
    assert conn.execute(check).fetchone() == (1, 1, False, True, 1)
    conn.execute(old_schema)
    install.install(dsn)
    assert conn.execute(check).fetchone() == (1, 1, False, True, 1)


# ---------------------------------------------------------------------- signatures


# PgQ functions we do not provide under PgQ's name, each for a reason the README gives: the
# C triggers (ours are generated per table by cdc attach), get_batch_cursor (it runs a
# caller's SQL fragment; ours is open_batch_cursor) and PgQ's internal grant helper.
NOT_PROVIDED = {"jsontriga", "logutriga", "sqltriga", "get_batch_cursor", "_grant_perms_from"}


def input_arguments(conn: psycopg.Connection, schema: str) -> dict[str, str]:
    """Every function of the schema: 'name(types)' -> its input arguments with their names.
    PgQ returns some results as OUT arguments, ours as a composite type of the same columns:
    results are compared by the tests that call the functions."""
    rows = conn.execute(
        """select p.proname || '(' || oidvectortypes(p.proargtypes) || ')',
                  pg_get_function_identity_arguments(p.oid)
             from pg_proc p where p.pronamespace = %s::regnamespace""",
        (schema,),
    ).fetchall()
    return {
        f: ", ".join(a for a in args.split(", ") if a and not a.startswith("OUT "))
        for f, args in rows
    }


def test_every_pgq_function_is_ours_with_pgqs_argument_names(pair: Pair) -> None:
    """Every PgQ function is ours too, with the same argument types and names, so a call in
    named notation works on both; but for those the README says we leave out on purpose."""
    pgq, ours = (input_arguments(conn, schema) for conn, schema in pair.sides())
    shared = pgq.keys() & ours.keys()
    assert len(shared) >= 45
    assert {f: (pgq[f], ours[f]) for f in shared if pgq[f] != ours[f]} == {}
    missing = {f.split("(")[0] for f in pgq.keys() - ours.keys()}
    assert missing == NOT_PROVIDED


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


def test_named_calls_work_like_pgq(pair: Pair) -> None:
    """Calls in named notation, with PgQ's argument names, give PgQ's results."""
    for stmt in NAMED_CALLS:
        assert pair.same(stmt)
    for conn, schema in pair.sides():
        conn.execute(sql.SQL("select {}.force_tick('nq')").format(sql.Identifier(schema)))
        conn.execute(sql.SQL("select {}.ticker('nq')").format(sql.Identifier(schema)))
    batches = [
        conn.execute(sql.SQL("select {}.next_batch('nq', 'c1')").format(sql.Identifier(s)))
        for conn, s in pair.sides()
    ]
    for (conn, schema), b in zip(pair.sides(), (c.fetchone()[0] for c in batches), strict=True):
        first = run(conn, schema, "select min(ev_id) from {s}.get_batch_events(%s)", (b,)).rows
        checks = [
            ("select count(*) from {s}.get_batch_events(x_batch_id => %s)", (b,), 2),
            ("select consumer_name from {s}.get_batch_info(x_batch_id => %s)", (b,), "c1"),
            (
                "select {s}.event_retry(x_batch_id => %s, x_event_id => %s, x_retry_seconds => 1)",
                (b, first[0][0]),
                1,
            ),
            ("select {s}.finish_batch(x_batch_id => %s)", (b,), 1),
            ("select {s}.drop_queue(x_queue_name => 'nq', x_force => true)", None, 1),
        ]
        for stmt, params, want in checks:
            assert run(conn, schema, stmt, params).rows == [(want,)], (schema, stmt)


# ---------------------------------------------------------------------- finishing, retrying


def test_finish_batch_of_finished_unknown_or_null_batch_warns_like_pgq(pair: Pair) -> None:
    """A batch finished twice, one that never existed, and NULL: a WARNING naming the batch
    and 0, so a script that finishes twice goes on (the Python API still raises)."""
    batches = open_batch(pair)
    for (conn, schema), b in zip(pair.sides(), batches, strict=True):
        warnings: list[str] = []
        conn.add_notice_handler(
            lambda d, w=warnings: w.append(f"{d.severity}: {d.message_primary}")
        )
        for batch, want in ((b, 1), (b, 0), (987654, 0), (None, 0)):
            assert run(conn, schema, "select {s}.finish_batch(%s)", (batch,)).rows == [(want,)]
        assert warnings == [
            f"WARNING: finish_batch: batch {b} not found",
            "WARNING: finish_batch: batch 987654 not found",
            "WARNING: finish_batch: batch <NULL> not found",
        ], schema


def test_batch_retry_keeps_an_event_retry_like_pgq(pair: Pair) -> None:
    """event_retry(ev, 1 hour) then batch_retry(0): the event keeps its hour, the other comes
    back at once; a second event_retry of the same event and a second batch_retry move
    nothing."""
    due = (
        "select ev_data, ev_retry, ev_retry_after > now() + interval '50 minutes'"
        "  from {s}.retry_queue order by ev_id"
    )
    for (conn, schema), b in zip(pair.sides(), open_batch(pair), strict=True):
        first = run(conn, schema, "select min(ev_id) from {s}.get_batch_events(%s)", (b,)).rows
        steps = [
            ("select {s}.event_retry(%s, %s, 3600)", (b, first[0][0])),
            ("select {s}.event_retry(%s, %s, 3600)", (b, first[0][0])),
            ("select {s}.batch_retry(%s, 0)", (b,)),
            ("select {s}.batch_retry(%s, 0)", (b,)),
        ]
        counts = [run(conn, schema, stmt, params).rows for stmt, params in steps]
        assert counts == [[(1,)], [(0,)], [(1,)], [(0,)]], schema
        assert run(conn, schema, due).rows == [("1", 1, True), ("2", 1, False)], schema
        run(conn, schema, "select {s}.finish_batch(%s)", (b,))
        assert run(conn, schema, "select {s}.maint_retry_events()").rows == [(1,)], schema


# ---------------------------------------------------------------------- producing


def test_replica_mode_inserts_into_a_disabled_queue_like_pgq(pair: Pair) -> None:
    """With inserts disabled, insert_event and current_event_table are refused, except
    under session_replication_role = replica (a replication replay)."""
    for conn, schema in pair.sides():  # PgQ's set_queue_config cannot set it: an UPDATE
        conn.execute(
            sql.SQL("update {}.queue set queue_disable_insert = true").format(
                sql.Identifier(schema)
            )
        )
    for stmt in ("select {s}.insert_event('q', 't', 'd')", "select {s}.current_event_table('q')"):
        pair.both_fail(stmt)
    for role, stmt in (
        ("replica", "select {s}.insert_event('q', 't', 'replica') > 0"),
        ("replica", "select {s}.current_event_table('q') is not null"),
    ):
        for conn, _ in pair.sides():
            conn.execute(sql.SQL("set session_replication_role = {}").format(sql.SQL(role)))
        assert pair.same(stmt) == [(True,)]
    for conn, _ in pair.sides():
        conn.execute("set session_replication_role = local")
    pair.both_fail("select {s}.insert_event('q', 't', 'local')")
    pgq, ours = events(pair)
    assert [e[-6:] for e in pgq] == [e[-6:] for e in ours] == [("t", "replica", *[None] * 4)]


# ---------------------------------------------------------------------- settings


@pytest.mark.parametrize("param", ["rotation_period", "ticker_max_lag", "ticker_idle_period"])
def test_zero_intervals_are_accepted_like_pgq(pair: Pair, param: str) -> None:
    """An interval of zero is a setting (as soon as allowed), not an error."""
    assert pair.same("select {s}.set_queue_config('q', %s, '0')", (param,)) == [(1,)]
    column = sql.Identifier(f"queue_{param}")
    values = [
        conn.execute(
            sql.SQL("select {}::text from {}.queue").format(column, sql.Identifier(s))
        ).fetchone()
        for conn, s in pair.sides()
    ]
    assert values == [("00:00:00",), ("00:00:00",)]


def test_ticker_with_zero_lag_and_idle_ticks_every_call_like_pgq(pair: Pair) -> None:
    """With ticker_max_lag and ticker_idle_period 0, every ticker call ticks, with or
    without new events."""
    for param in ("ticker_max_lag", "ticker_idle_period"):
        pair.same("select {s}.set_queue_config('q', %s, '0')", (param,))
    for conn, schema in pair.sides():
        ticks = [run(conn, schema, "select {s}.ticker('q')").rows[0][0] for _ in range(3)]
        run(conn, schema, "select {s}.insert_event('q', 't', 'd')")
        ticks.append(run(conn, schema, "select {s}.ticker('q')").rows[0][0])
        assert None not in ticks and ticks == sorted(set(ticks)), (schema, ticks)
