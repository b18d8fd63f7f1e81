"""Roles, EXECUTE grants and search_path hardening of the queue engine, on a real server.

Login roles made here are cluster-wide: each test makes its own (unique names) and drops them
at the end, after ``drop owned by`` in the one database they touch. Tests that only read the
catalog or get refused share one database per module; tests that change data get a clone.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from cdc import __version__, errors
from cdc.pg import privileges
from cdc.pg.queue import Batch, BatchInfo, Consumer, Producer, Queue
from tests.support.databases import TEMPLATE, create_database, drop_database
from tests.support.roles import LoginRoles

ENGINE_ROLES = ("cdc_reader", "cdc_writer", "cdc_admin")
PUBLIC_FUNCS = frozenset(
    {
        "get_queue_info",
        "get_consumer_info",
        "get_batch_info",
        "get_queue_incarnation",
        "version",
        "quote_fqname",
    }
)
WRITER_FUNCS = frozenset(privileges.WRITER_FUNCTIONS)
# the database's grants are checked against the list the pre-flight checks use
READER_FUNCS = frozenset(privileges.READER_FUNCTIONS)

RoleConn = Callable[[str | None], psycopg.Connection]


def call(conn: psycopg.Connection, query: str, params: Any = None) -> list[tuple[Any, ...]]:
    """Run a query; engine errors come back typed (cdc.errors.translate)."""
    try:
        return conn.execute(query, params).fetchall()
    except psycopg.Error as exc:
        raise errors.translate(exc) from exc


@pytest.fixture
def role_conn(admin_dsn: str, dsn: str) -> Iterator[RoleConn]:
    """Connects to the test's fresh database as a new login role, member of a role or none."""
    roles = LoginRoles(admin_dsn, dsn)
    yield roles.connect
    roles.cleanup()


def make_open_batch(conn: psycopg.Connection) -> dict[str, Any]:
    """Queue 'q' with consumer 'c' registered and an open batch holding one event."""
    Queue(conn, "q").create()
    Consumer(conn, "q", "c").register()
    ev_id = Producer(conn, "q").insert("I", "payload")
    Queue(conn, "q").force_tick()
    Queue(conn, "q").tick()
    batch = Consumer(conn, "q", "c").next_batch()
    assert batch is not None
    return {"batch_id": batch.batch_id, "ev_id": ev_id}


@pytest.fixture(scope="module")
def shared_dsn(admin_dsn: str, template_dsn: str) -> Iterator[str]:
    """One database for the tests of this module that change nothing (catalog checks and
    refused calls): queue 'q', consumer 'c' with an open batch. Saves a clone per test."""
    name = f"cdc_test_perm_{uuid.uuid4().hex[:8]}"
    yield create_database(admin_dsn, name, template=TEMPLATE)
    drop_database(admin_dsn, name)


@pytest.fixture(scope="module")
def shared_batch(shared_dsn: str) -> dict[str, Any]:
    with psycopg.connect(shared_dsn, autocommit=True) as c:
        return make_open_batch(c)


@pytest.fixture
def shared(shared_dsn: str, shared_batch: dict[str, Any]) -> Iterator[psycopg.Connection]:
    """A superuser connection to the shared database."""
    with psycopg.connect(shared_dsn, autocommit=True) as c:
        yield c


@pytest.fixture
def shared_role_conn(admin_dsn: str, shared: psycopg.Connection) -> Iterator[RoleConn]:
    """Like role_conn, on the shared database."""
    roles = LoginRoles(admin_dsn, shared.info.dsn)
    yield roles.connect
    roles.cleanup()


def cdc_functions(conn: psycopg.Connection) -> list[tuple[int, str, str, list[str]]]:
    """(oid, name, signature, input argument types) of every function in schema cdc."""
    rows = conn.execute(
        """
        select p.oid::int, p.proname::text, p.oid::regprocedure::text,
               array(select format_type(t, null) from unnest(p.proargtypes::oid[]) t)
          from pg_proc p
         where p.pronamespace = 'cdc'::regnamespace
         order by 3
        """
    ).fetchall()
    assert rows, "no function in schema cdc"
    return rows


def expected_grant(grantee: str, name: str) -> bool:
    if name.startswith("_"):
        return False
    if name in PUBLIC_FUNCS:
        return True
    return {
        "public": False,
        "cdc_writer": name in WRITER_FUNCS,
        "cdc_reader": name in READER_FUNCS,
        "cdc_admin": True,
    }[grantee]


# ---------------------------------------------------------------------- roles and grants


@pytest.mark.parametrize("role", ENGINE_ROLES)
def test_engine_role_exists_as_nologin_role(shared: psycopg.Connection, role: str) -> None:
    """Install leaves each cdc_* role in place as a NOLOGIN, non-superuser group role."""
    row = shared.execute(
        "select rolcanlogin, rolsuper, rolcreaterole, rolcreatedb from pg_roles where rolname = %s",
        (role,),
    ).fetchone()
    assert row == (False, False, False, False)


@pytest.mark.parametrize("member", ["cdc_reader", "cdc_writer"])
def test_admin_is_member_of_reader_and_writer(shared: psycopg.Connection, member: str) -> None:
    """cdc_admin is a member of cdc_reader and cdc_writer."""
    assert shared.execute("select pg_has_role('cdc_admin', %s, 'member')", (member,)).fetchone()[0]


@pytest.mark.parametrize("grantee", ["public", *ENGINE_ROLES])
def test_execute_privileges_match_the_role_model(shared: psycopg.Connection, grantee: str) -> None:
    """Each role may execute exactly the functions of its part (plus PUBLIC's info functions)."""
    wrong = []
    for oid, name, sig, _ in cdc_functions(shared):
        has = shared.execute(
            "select has_function_privilege(%s, %s::oid, 'EXECUTE')", (grantee, oid)
        ).fetchone()[0]
        if has != expected_grant(grantee, name):
            wrong.append(f"{sig}: {'granted' if has else 'not granted'}")
    assert wrong == []


def test_public_may_execute_only_the_info_functions(shared: psycopg.Connection) -> None:
    """PUBLIC can execute get_queue_info/get_consumer_info/get_batch_info/version and
    quote_fqname, nothing else."""
    names = {
        name
        for oid, name, _, _ in cdc_functions(shared)
        if shared.execute(
            "select has_function_privilege('public', %s::oid, 'EXECUTE')", (oid,)
        ).fetchone()[0]
    }
    assert names == PUBLIC_FUNCS
    assert not any(n.startswith("_") for n in names)


def test_plain_login_role_can_call_the_info_functions(
    shared_role_conn: RoleConn, shared_batch: dict[str, Any]
) -> None:
    """A login role with PUBLIC rights only can call every info function and version()."""
    plain = shared_role_conn(None)
    b = shared_batch["batch_id"]
    assert call(plain, "select cdc.version()") == [(__version__,)]
    assert [r[0] for r in call(plain, "select queue_name from cdc.get_queue_info()")] == ["q"]
    assert len(call(plain, "select * from cdc.get_queue_info('q')")) == 1
    assert len(call(plain, "select * from cdc.get_consumer_info()")) == 1
    assert len(call(plain, "select * from cdc.get_consumer_info('q')")) == 1
    assert len(call(plain, "select * from cdc.get_consumer_info('q', 'c')")) == 1
    rows = call(plain, "select queue_name, consumer_name from cdc.get_batch_info(%s)", (b,))
    assert rows == [("q", "c")]


def test_plain_login_role_cannot_call_any_other_function(
    shared_role_conn: RoleConn, shared: psycopg.Connection
) -> None:
    """Every other cdc function, internal helpers included, refuses a PUBLIC-only role."""
    plain = shared_role_conn(None)
    allowed = []
    checked = 0
    for _, name, sig, argtypes in cdc_functions(shared):
        if name in PUBLIC_FUNCS:
            continue
        checked += 1
        args = sql.SQL(", ").join(
            sql.SQL("null::{}").format(sql.SQL("integer" if t == "anyelement" else t))
            for t in argtypes
        )
        query = sql.SQL("select cdc.{}({})").format(sql.Identifier(name), args)
        try:
            plain.execute(query)
        except psycopg.errors.InsufficientPrivilege:
            continue
        except psycopg.Error as exc:
            allowed.append(f"{sig}: ran and failed with {exc.sqlstate}")
        else:
            allowed.append(f"{sig}: ran")
    assert allowed == []
    assert checked > 30


def test_writer_can_insert_events(role_conn: RoleConn, conn: psycopg.Connection) -> None:
    """A member of cdc_writer can insert events (both insert_event forms)."""
    Queue(conn, "q").create()
    writer = role_conn("cdc_writer")
    ids = [Producer(writer, "q").insert("I", "one"), Producer(writer, "q").insert("U", "two", "x")]
    ids.append(call(writer, "select cdc.insert_event('q', 'D', 'three')")[0][0])
    assert call(writer, "select cdc.current_event_table('q')")[0][0].startswith("cdc.event_")
    rows = conn.execute("select ev_id, ev_type, ev_data from cdc.event order by ev_id").fetchall()
    assert rows == [(ids[0], "I", "one"), (ids[1], "U", "two"), (ids[2], "D", "three")]


WRITER_DENIED: dict[str, str] = {
    "register_consumer": "select cdc.register_consumer('q', 'w')",
    "next_batch": "select cdc.next_batch('q', 'c')",
    "next_batch_custom": "select * from cdc.next_batch_custom('q', 'c', null, null, null)",
    "get_batch_events": "select * from cdc.get_batch_events(%(b)s)",
    "finish_batch": "select cdc.finish_batch(%(b)s)",
    "create_queue": "select cdc.create_queue('w')",
    "ticker": "select cdc.ticker()",
}


@pytest.mark.parametrize("op", list(WRITER_DENIED))
def test_writer_cannot_consume_or_administer(
    shared_role_conn: RoleConn, shared_batch: dict[str, Any], op: str
) -> None:
    """A member of cdc_writer gets InsufficientPrivilege for consumer and admin functions."""
    writer = shared_role_conn("cdc_writer")
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
        call(writer, WRITER_DENIED[op], {"b": shared_batch["batch_id"]})


def test_reader_can_consume_a_queue(role_conn: RoleConn, conn: psycopg.Connection) -> None:
    """A member of cdc_reader can register, tick, take a batch, read its events and finish it."""
    Queue(conn, "q").create()
    reader = role_conn("cdc_reader")
    consumer = Consumer(reader, "q", "r")
    assert consumer.register()
    ids = [Producer(conn, "q").insert("I", f"row{i}") for i in range(3)]
    Queue(reader, "q").force_tick()
    assert Queue(reader, "q").tick() is not None
    batch = consumer.next_batch()
    assert batch is not None
    rows = call(reader, "select ev_id from cdc.get_batch_events(%s)", (batch.batch_id,))
    assert [r[0] for r in rows] == ids
    assert [e.ev_id for e in batch.events()] == ids  # through open_batch_cursor
    batch.finish()
    assert consumer.next_batch() is None


READER_DENIED: dict[str, str] = {
    "insert_event": "select cdc.insert_event('q', 'I', 'x')",
    "insert_event_7": "select cdc.insert_event('q', 'I', 'x', null, null, null, null)",
    "current_event_table": "select cdc.current_event_table('q')",
    "create_queue": "select cdc.create_queue('r')",
    "drop_queue": "select cdc.drop_queue('q', true)",
    "set_queue_config": "select cdc.set_queue_config('q', 'ticker_max_count', '10')",
    "maint_retry_events": "select cdc.maint_retry_events()",
    "maint_rotate_tables_step1": "select cdc.maint_rotate_tables_step1('q')",
}


@pytest.mark.parametrize("op", list(READER_DENIED))
def test_reader_cannot_produce_or_administer(
    shared_role_conn: RoleConn, shared_batch: dict[str, Any], op: str
) -> None:
    """A member of cdc_reader gets InsufficientPrivilege for producer and admin functions."""
    reader = shared_role_conn("cdc_reader")
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
        call(reader, READER_DENIED[op])


def test_admin_can_do_everything(role_conn: RoleConn, conn: psycopg.Connection) -> None:
    """A member of cdc_admin can create, configure, produce, consume, maintain and drop."""
    admin = role_conn("cdc_admin")
    queue = Queue(admin, "q")
    assert queue.create()
    queue.set_config("max_retries", 0)
    consumer = Consumer(admin, "q", "a")
    assert consumer.register()
    ids = [Producer(admin, "q").insert("I", f"row{i}") for i in range(2)]
    queue.force_tick()
    assert queue.tick() is not None
    with consumer.batch() as batch:
        assert batch is not None
        assert [e.ev_id for e in batch.events()] == ids
        batch.dead(ids[0], "bad row")
        batch.retry(ids[1], 0)  # max_retries 0: goes to the dead letters too
    assert call(admin, "select cdc.maint_retry_events()") == [(0,)]
    for func, arg in call(admin, "select func_name, func_arg from cdc.maint_operations()"):
        query = f"select {func}(%s)" if arg is not None else f"select {func}()"
        call(admin, query, (arg,) if arg is not None else None)
    assert queue.info()["queue_name"] == "q"
    assert conn.execute("select count(*) from cdc.dead_letter").fetchone()[0] == 2
    consumer.unregister()
    queue.drop()
    assert conn.execute("select count(*) from cdc.dead_letter").fetchone()[0] == 0  # cascaded
    assert conn.execute("select count(*) from cdc.queue").fetchone()[0] == 0


def test_no_role_has_privileges_on_tables_or_sequences(
    shared: psycopg.Connection, shared_batch: dict[str, Any]
) -> None:
    """No role but the owner has any privilege on a table, partition or sequence of cdc."""
    grants = shared.execute(
        """
        select c.oid::regclass::text, a.grantee::regrole::text, a.privilege_type
          from pg_class c, aclexplode(c.relacl) a
         where c.relnamespace = 'cdc'::regnamespace and a.grantee <> c.relowner
        """
    ).fetchall()
    assert grants == []
    relations = shared.execute(
        "select oid, relkind from pg_class where relnamespace = 'cdc'::regnamespace"
        " and relkind in ('r', 'p', 'S', 'v', 'm', 'f')"
    ).fetchall()
    assert any(kind == "S" for _, kind in relations)
    leaks = []
    for role in ("public", *ENGINE_ROLES):
        for oid, kind in relations:
            if kind == "S":
                q = "select has_sequence_privilege(%s, %s::oid, 'USAGE, SELECT, UPDATE')"
            else:
                q = (
                    "select has_table_privilege(%s, %s::oid,"
                    " 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')"
                )
            if shared.execute(q, (role, oid)).fetchone()[0]:
                leaks.append((role, oid))
    assert leaks == []


@pytest.mark.parametrize("grantee", ["public", *ENGINE_ROLES])
def test_schema_cdc_grants_usage_but_not_create(shared: psycopg.Connection, grantee: str) -> None:
    """Everyone may look functions up in schema cdc; nobody but its owner may create there."""
    row = shared.execute(
        "select has_schema_privilege(%(g)s, 'cdc', 'USAGE'),"
        " has_schema_privilege(%(g)s, 'cdc', 'CREATE')",
        {"g": grantee},
    ).fetchone()
    assert row == (True, False)


def test_security_definer_functions_pin_search_path(shared: psycopg.Connection) -> None:
    """Every SECURITY DEFINER function in cdc pins search_path to pg_catalog, then pg_temp last."""
    rows = shared.execute(
        """
        select p.oid::regprocedure::text,
               (select substr(c, length('search_path=') + 1) from unnest(p.proconfig) c
                 where c like 'search_path=%%')
          from pg_proc p
         where p.pronamespace = 'cdc'::regnamespace and p.prosecdef
        """
    ).fetchall()
    assert len(rows) > 20
    bad = [sig for sig, path in rows if (path or "").replace(" ", "") != "pg_catalog,pg_temp"]
    assert bad == []


# The 3-argument insert_event is a plain SQL wrapper so that the planner can inline it; it
# only calls the 7-argument form, which runs as the owner.
INLINED_WRAPPERS = {"cdc.insert_event(text,text,text)": "cdc.insert_event("}
# Functions that run with the caller's rights on purpose: the sequence's privileges decide
# what seq_getval and seq_setval may do, and quote_fqname reads nothing. They pin
# search_path all the same.
CALLER_RIGHTS = {
    "cdc.quote_fqname(text)",
    "cdc.seq_getval(text)",
    "cdc.seq_setval(text,bigint)",
}


def test_every_granted_function_is_security_definer(shared: psycopg.Connection) -> None:
    """Every function some role may execute runs as the owner, but for inlined wrappers and
    the few that run with the caller's rights on purpose."""
    rows = shared.execute(
        "select p.oid::regprocedure::text, l.lanname, p.prosrc, p.proconfig from pg_proc p"
        " join pg_language l on l.oid = p.prolang"
        " where p.pronamespace = 'cdc'::regnamespace and p.proname !~ '^_' and not p.prosecdef"
    ).fetchall()
    assert {sig for sig, _, _, _ in rows} == set(INLINED_WRAPPERS) | CALLER_RIGHTS
    for sig, lang, src, config in rows:
        if sig in CALLER_RIGHTS:
            assert config == ["search_path=pg_catalog, pg_temp"]
        else:
            assert lang == "sql" and INLINED_WRAPPERS[sig] in src


# ---------------------------------------------------------------------- hostile search_path

EVIL_SCHEMA = """
create schema evil;
grant usage on schema evil to public;
create sequence evil.hits;
grant usage, select on sequence evil.hits to public;
create function evil.hit(what pg_catalog.text) returns pg_catalog.bool
language plpgsql as $$
begin
    perform pg_catalog.nextval('evil.hits'::pg_catalog.regclass);
    raise exception 'hijacked: %', what;
end;
$$;
create function evil.now() returns pg_catalog.timestamptz
    language sql as $$ select null::pg_catalog.timestamptz where evil.hit('now()') $$;
create function evil.txid_current() returns pg_catalog.int8
    language sql as $$ select null::pg_catalog.int8 where evil.hit('txid_current()') $$;
create function evil.txid_current_snapshot() returns pg_catalog.txid_snapshot
    language sql as $$
        select null::pg_catalog.txid_snapshot where evil.hit('txid_current_snapshot()') $$;
create function evil.txid_visible_in_snapshot(pg_catalog.int8, pg_catalog.txid_snapshot)
    returns pg_catalog.bool
    language sql as $$ select evil.hit('txid_visible_in_snapshot()') $$;
create function evil.nextval(pg_catalog.regclass) returns pg_catalog.int8
    language sql as $$ select null::pg_catalog.int8 where evil.hit('nextval()') $$;
create function evil.pg_sequence_last_value(pg_catalog.regclass) returns pg_catalog.int8
    language sql as $$ select null::pg_catalog.int8 where evil.hit('pg_sequence_last_value()') $$;
create function evil.format(pg_catalog.text) returns pg_catalog.text
    language sql as $$ select null::pg_catalog.text where evil.hit('format(text)') $$;
create function evil.format(pg_catalog.text, pg_catalog.text) returns pg_catalog.text
    language sql as $$ select null::pg_catalog.text where evil.hit('format(text, text)') $$;
create function evil.format(pg_catalog.text, pg_catalog.int4) returns pg_catalog.text
    language sql as $$ select null::pg_catalog.text where evil.hit('format(text, int)') $$;
create function evil.pg_notify(pg_catalog.text, pg_catalog.text) returns pg_catalog.void
    language sql as $$ select where evil.hit('pg_notify()') $$;
create function evil.current_setting(pg_catalog.text) returns pg_catalog.text
    language sql as $$ select null::pg_catalog.text where evil.hit('current_setting()') $$;
create function evil.set_config(pg_catalog.text, pg_catalog.text, pg_catalog.bool)
    returns pg_catalog.text
    language sql as $$ select null::pg_catalog.text where evil.hit('set_config()') $$;
create function evil.octet_length(pg_catalog.text) returns pg_catalog.int4
    language sql as $$ select null::pg_catalog.int4 where evil.hit('octet_length()') $$;
create function evil.text_eq(pg_catalog.text, pg_catalog.text) returns pg_catalog.bool
    language sql as $$ select evil.hit('text = text') $$;
create operator evil.= (leftarg = pg_catalog.text, rightarg = pg_catalog.text,
                        function = evil.text_eq);
create function evil.int4_eq(pg_catalog.int4, pg_catalog.int4) returns pg_catalog.bool
    language sql as $$ select evil.hit('int = int') $$;
create operator evil.= (leftarg = pg_catalog.int4, rightarg = pg_catalog.int4,
                        function = evil.int4_eq);
create function evil.int8_eq(pg_catalog.int8, pg_catalog.int8) returns pg_catalog.bool
    language sql as $$ select evil.hit('bigint = bigint') $$;
create operator evil.= (leftarg = pg_catalog.int8, rightarg = pg_catalog.int8,
                        function = evil.int8_eq);
create function evil.int8_ge(pg_catalog.int8, pg_catalog.int8) returns pg_catalog.bool
    language sql as $$ select evil.hit('bigint >= bigint') $$;
create operator evil.>= (leftarg = pg_catalog.int8, rightarg = pg_catalog.int8,
                         function = evil.int8_ge);
create function evil.int8_lt(pg_catalog.int8, pg_catalog.int8) returns pg_catalog.bool
    language sql as $$ select evil.hit('bigint < bigint') $$;
create operator evil.< (leftarg = pg_catalog.int8, rightarg = pg_catalog.int8,
                        function = evil.int8_lt);
create function evil.text_cat(pg_catalog.text, pg_catalog.text) returns pg_catalog.text
    language sql as $$ select null::pg_catalog.text where evil.hit('text || text') $$;
create operator evil.|| (leftarg = pg_catalog.text, rightarg = pg_catalog.text,
                         function = evil.text_cat);
create table evil.queue (hijacked pg_catalog.text);
create table evil.event (hijacked pg_catalog.text);
create table evil.tick (hijacked pg_catalog.text);
create table evil.subscription (hijacked pg_catalog.text);
create table evil.consumer (hijacked pg_catalog.text);
create domain evil.text as pg_catalog.varchar check (evil.hit('::text'));
create domain evil.timestamptz as pg_catalog.timestamptz check (evil.hit('::timestamptz'));
create domain evil.txid_snapshot as pg_catalog.text check (evil.hit('::txid_snapshot'));
create domain evil.regclass as pg_catalog.text check (evil.hit('::regclass'));
"""

HOSTILE_PATH = "set search_path = evil, pg_catalog, public"
# Temp look-alikes: pg_temp comes first for relations unless a path lists it explicitly.
TEMP_LOOKALIKES = ";".join(
    f"create temp table {t} (hijacked pg_catalog.text)"
    for t in ("queue", "event", "tick", "subscription", "consumer", "installed")
)


def evil_hits(conn: psycopg.Connection) -> int:
    last_value, is_called = conn.execute("select last_value, is_called from evil.hits").fetchone()
    return last_value if is_called else 0


def build_hostile(admin_dsn: str, roles: RoleConn) -> dict[str, psycopg.Connection]:
    """A writer that owns schema evil full of look-alikes, a reader and an admin; all with
    search_path = evil, pg_catalog, public and temp look-alike tables."""
    writer = roles("cdc_writer")
    reader = roles("cdc_reader")
    admin = roles("cdc_admin")
    with psycopg.connect(admin_dsn, autocommit=True) as c:
        c.execute(
            sql.SQL("grant create, temporary on database {} to {}").format(
                sql.Identifier(writer.info.dbname), sql.Identifier(writer.info.user)
            )
        )
    writer.execute(EVIL_SCHEMA)
    owner = writer.execute(
        "select nspowner::regrole::text from pg_namespace where nspname = 'evil'"
    )
    assert owner.fetchone() == (writer.info.user,)
    for c in (writer, reader, admin):
        c.execute(TEMP_LOOKALIKES)
        c.execute(HOSTILE_PATH)
    return {"writer": writer, "reader": reader, "admin": admin}


@pytest.fixture
def hostile(admin_dsn: str, role_conn: RoleConn) -> dict[str, psycopg.Connection]:
    """Hostile writer and reader on the test's fresh database."""
    return build_hostile(admin_dsn, role_conn)


@pytest.fixture
def shared_hostile(admin_dsn: str, shared_role_conn: RoleConn) -> dict[str, psycopg.Connection]:
    """Hostile writer and reader on the shared database (schema evil dropped at the end)."""
    return build_hostile(admin_dsn, shared_role_conn)


@pytest.mark.parametrize(
    "probe",
    [
        "select now()",
        "select txid_current()",
        "select nextval('evil.hits')",
        "select pg_notify('x', 'y')",
        "select format('%s', 'a'::pg_catalog.text)",
        "select 'a'::pg_catalog.text = 'b'::pg_catalog.text",
        "select 1::pg_catalog.int8 >= 2::pg_catalog.int8",
        "select 'a'::text",
    ],
)
def test_lookalikes_do_shadow_pg_catalog_for_unpinned_code(
    shared_hostile: dict[str, psycopg.Connection], probe: str
) -> None:
    """Control: with the hostile path, unqualified SQL really resolves to the look-alikes."""
    writer = shared_hostile["writer"]
    before = evil_hits(writer)
    with pytest.raises(psycopg.errors.RaiseException, match="hijacked"):
        writer.execute(probe)
    assert evil_hits(writer) == before + 1


def test_insert_event_ignores_a_hostile_search_path(
    hostile: dict[str, psycopg.Connection], conn: psycopg.Connection
) -> None:
    """insert_event under a hostile search_path stores the right rows and uses no look-alike."""
    Queue(conn, "q").create()
    conn.execute("select cdc.set_queue_config('q', 'per_tx_limit', '100')")  # set_config path
    writer = hostile["writer"]
    ids = [Producer(writer, "q").insert("I", f"row{i}", "x1") for i in range(3)]
    ids.append(call(writer, "select cdc.insert_event('q', 'D', 'gone')")[0][0])
    assert call(writer, "select cdc.current_event_table('q')") == [("cdc.event_1_0",)]
    assert call(writer, "select cdc.version(), count(*) from cdc.get_queue_info()") == [
        (__version__, 1)
    ]
    assert evil_hits(writer) == 0
    rows = conn.execute(
        "select ev_id, ev_type, ev_data, ev_extra1, ev_txid > 0,"
        " ev_time between now() - interval '1 minute' and now()"
        " from cdc.event order by ev_id"
    ).fetchall()
    assert rows == [
        (ids[0], "I", "row0", "x1", True, True),
        (ids[1], "I", "row1", "x1", True, True),
        (ids[2], "I", "row2", "x1", True, True),
        (ids[3], "D", "gone", None, True, True),
    ]
    assert ids == [1, 2, 3, 4]


def test_consuming_ignores_a_hostile_search_path(
    hostile: dict[str, psycopg.Connection], conn: psycopg.Connection
) -> None:
    """register/tick/next_batch/get_batch_events/finish under a hostile search_path are correct
    and use no look-alike."""
    Queue(conn, "q").create()
    reader = hostile["reader"]
    consumer = Consumer(reader, "q", "r")
    assert consumer.register()
    ids = [Producer(hostile["writer"], "q").insert("I", f"row{i}") for i in range(3)]
    Queue(reader, "q").force_tick()
    assert Queue(reader, "q").tick() is not None
    batch_id = call(reader, "select cdc.next_batch('q', 'r')")[0][0]
    assert batch_id is not None
    rows = call(reader, "select ev_id, ev_type, ev_data from cdc.get_batch_events(%s)", (batch_id,))
    assert rows == [(i, "I", f"row{n}") for n, i in enumerate(ids)]
    batch = consumer.next_batch()
    assert batch is not None and batch.batch_id == batch_id
    assert [e.ev_data for e in batch.events()] == ["row0", "row1", "row2"]
    info = call(reader, "select queue_name, consumer_name from cdc.get_batch_info(%s)", (batch_id,))
    assert info == [("q", "r")]
    batch.retry(ids[0], 0)
    batch.finish()
    assert call(reader, "select cdc.next_batch('q', 'r')") == [(None,)]
    assert evil_hits(hostile["writer"]) == 0


def test_administration_ignores_a_hostile_search_path(
    hostile: dict[str, psycopg.Connection], conn: psycopg.Connection
) -> None:
    """create_queue/set_queue_config/ticker/maintenance/drop_queue under a hostile search_path
    do their job and use no look-alike."""
    admin = hostile["admin"]
    queue = Queue(admin, "q")
    assert queue.create()
    for param, value in [
        ("ticker_max_count", 10),
        ("ticker_max_lag", "5 seconds"),
        ("rotation_period", "1 second"),
        ("ticker_paused", False),
        ("max_retries", 3),
    ]:
        queue.set_config(param, value)
    assert Consumer(admin, "q", "a").register()
    Producer(admin, "q").insert("I", "x")
    queue.force_tick()
    assert call(admin, "select cdc.ticker()") == [(1,)]
    conn.execute("update cdc.queue set queue_switch_time = now() - interval '1 hour'")
    for func, arg in call(admin, "select func_name, func_arg from cdc.maint_operations()"):
        call(admin, f"select {func}(%s)" if arg else f"select {func}()", (arg,) if arg else None)
    row = conn.execute(
        "select queue_ticker_max_count, queue_ticker_max_lag, queue_rotation_period,"
        " queue_max_retries, queue_cur_table from cdc.queue"
    ).fetchone()
    assert row == (10, dt.timedelta(seconds=5), dt.timedelta(seconds=1), 3, 1)  # rotated
    queue.drop(force=True)
    assert conn.execute("select count(*) from pg_class where relname ~ '^event_'").fetchone() == (
        0,
    )
    assert evil_hits(hostile["writer"]) == 0


def test_batch_of_unknown_id_still_typed_under_hostile_search_path(
    shared_hostile: dict[str, psycopg.Connection],
) -> None:
    """Errors raised under a hostile search_path keep their SQLSTATE and typed exception."""
    with pytest.raises(errors.BatchNotFound, match="batch 424242 is not open"):
        Batch(
            shared_hostile["reader"],
            info=_fake_batch_info(424242),
            chunk_size=10,
        ).finish()
    with pytest.raises(errors.QueueNotFound, match="queue 'nope' does not exist"):
        Producer(shared_hostile["writer"], "nope").insert("I", "x")
    assert evil_hits(shared_hostile["writer"]) == 0


def _fake_batch_info(batch_id: int) -> BatchInfo:
    now = dt.datetime.now(dt.UTC)
    return BatchInfo(batch_id, 2, 1, now, now, 0, 0)
