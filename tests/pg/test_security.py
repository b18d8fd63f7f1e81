"""The capture side under attack: hostile identifiers, hostile option expressions and forged
events against every SECURITY DEFINER function and event trigger of capture; and hostile,
unknown and unauthorised callers of the functions the reader side reads the queue through.

Roles made here are cluster-wide login roles with unique names, dropped at the end (see
tests/support/roles.py). An "attacker" is a plain login role that owns a table, or
a cdc_admin member; the cdc owner is the superuser of the test server unless the test
installs as a non-superuser database owner (the guard-trigger path). Every test runs with
``check_function_bodies`` on and off where the attacker's session could choose it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote_plus

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from cdc import errors
from cdc.pg import capture, install
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Queue
from tests.support.databases import drop_database
from tests.support.roles import PRECREATE_ROLES, LoginRoles

BODIES = pytest.mark.parametrize("bodies", ["on", "off"], ids=["bodies-on", "bodies-off"])

# Names that need every kind of quoting, or close a quote the generator once used.
HOSTILE_NAMES = [
    'dq"uote',
    "sq'uote",
    "dollar$sign",
    "$cdc$",
    "$$",
    "x$cdc$;select 1;$cdc$",
    "back\\slash",
    "semi;colon",
    "dash--comment",
    "slash/*comment",
    "new\nline",
    "Ünïcødé ✓",
    "N" * 63,
]
NAME_IDS = [
    "dquote",
    "squote",
    "dollar",
    "cdc-tag",
    "dollar-dollar",
    "cdc-tag-statements",
    "backslash",
    "semicolon",
    "dash-comment",
    "block-comment",
    "newline",
    "non-ascii",
    "63-bytes",
]


@pytest.fixture
def roles(admin_dsn: str, dsn: str) -> Iterator[LoginRoles]:
    """Login roles on the test's database, dropped afterwards."""
    made = LoginRoles(admin_dsn, dsn)
    yield made
    made.cleanup()


def attacker(
    roles: LoginRoles, conn: psycopg.Connection, member_of: str | None
) -> psycopg.Connection:
    """A login role (member of a cdc role or none) that may create tables in public."""
    c = roles.connect(member_of)
    conn.execute(sql.SQL("grant create on schema public to {}").format(sql.Identifier(user(c))))
    return c


def user(c: psycopg.Connection) -> str:
    return c.info.user


def is_superuser(conn: psycopg.Connection, role: str) -> bool:
    return conn.execute("select rolsuper from pg_roles where rolname = %s", (role,)).fetchone()[0]


def has_cdc_role(conn: psycopg.Connection, role: str, cdc_role: str) -> bool:
    return conn.execute("select pg_has_role(%s, %s, 'member')", (role, cdc_role)).fetchone()[0]


def hostname() -> str:
    return Path("/etc/hostname").read_text().strip()


def events(conn: psycopg.Connection) -> list[tuple[str, str, str | None]]:
    return conn.execute(
        "select ev_type, ev_data, ev_extra1 from cdc.event order by ev_id"
    ).fetchall()


def attach_raw(c: psycopg.Connection, table: str, options: dict[str, object]) -> None:
    """cdc.attach called directly (not through the CLI's checks)."""
    try:
        c.execute("select cdc.attach(%s::regclass, 'q', %s::jsonb)", (table, json.dumps(options)))
    except psycopg.Error as exc:
        raise errors.translate(exc) from exc


# ---------------------------------------------------------------------- A1: event trigger path


@BODIES
def test_column_name_closing_the_dollar_quote_runs_nothing(conn, roles, bodies):
    """A1: a table owner adding a column named to close `$cdc$` gets no superuser; the column
    is captured under its name."""
    Queue(conn, "q").create()
    evil = attacker(roles, conn, None)
    me = user(evil)
    evil.execute("create table t (id int primary key)")
    capture.attach(conn, "public.t", CaptureOptions(queue="q"))
    evil.execute(f"set check_function_bodies = {bodies}")
    column = f"$cdc$;alter role {me} superuser;select $cdc$"
    evil.execute(sql.SQL("alter table t add column {} int").format(sql.Identifier(column)))
    assert not is_superuser(conn, me)
    evil.execute("insert into t values (1, 2)")
    assert json.loads(events(conn)[-1][1]) == {"id": 1, column: 2}


@BODIES
@pytest.mark.parametrize("name", HOSTILE_NAMES, ids=NAME_IDS)
def test_queue_setting_regenerates_hostile_captures_safely(conn, roles, bodies, name):
    """A1b: a cdc_admin member owning a table whose schema, table and column names are hostile
    (and a magic column) turns the queue restricted with check_function_bodies as it chose:
    the owner-run regeneration pastes none of the names as SQL, gives the member no rights,
    and the regenerated trigger obeys the queue (QC007) and writes the names as names, the
    TRUNCATE event naming the hostile primary key."""
    Queue(conn, "q").create()
    evil = attacker(roles, conn, "cdc_admin")
    me = user(evil)
    conn.execute(sql.SQL("create schema {} authorization {}").format(
        sql.Identifier(name), sql.Identifier(me)))  # fmt: skip
    table = sql.Identifier(name, name)
    evil.execute(
        sql.SQL("create table {} ({} int primary key, _pgq_ev_extra3 text)").format(
            table, sql.Identifier(name)
        )
    )
    attach_raw(evil, table.as_string(evil), {"format": "json"})
    evil.execute(f"set check_function_bodies = {bodies}")
    evil.execute("select cdc.set_queue_config('q', 'per_tx_limit', '1')")
    assert not is_superuser(conn, me)
    evil.execute(sql.SQL("insert into {} values (1, 'x3')").format(table))
    with pytest.raises(psycopg.Error) as info:
        evil.execute(sql.SQL("insert into {} values (2), (3)").format(table))
    assert info.value.sqlstate == "QC007"
    evil.execute(sql.SQL("truncate {}").format(table))
    evil.execute("select cdc.set_queue_config('q', 'per_tx_limit', null)")
    assert not is_superuser(conn, me)
    rows = conn.execute(
        "select ev_type, ev_data, ev_extra1, ev_extra3 from cdc.event order by ev_id"
    ).fetchall()
    assert [json.loads(r[0])["pkey"] for r in rows] == [[name], [name]]
    assert json.loads(rows[0][1]) == {name: 1}
    assert rows[0][2] == f"{name}.{name}" and rows[0][3] == "x3"
    assert json.loads(rows[1][0])["op"] == "TRUNCATE"


# ---------------------------------------------------------------------- A2: cdc.attach options


@BODIES
def test_expression_is_not_evaluated_with_the_owners_rights(conn, roles, bodies):
    """A2a: a `when` calling pg_read_file is refused, and no file content reaches the error."""
    Queue(conn, "q").create()
    evil = attacker(roles, conn, "cdc_admin")
    evil.execute("create table t (id int primary key, a int)")
    evil.execute(f"set check_function_bodies = {bodies}")
    with pytest.raises(errors.ExpressionRefused) as info:
        attach_raw(evil, "t", {"format": "json", "when": "pg_read_file('/etc/hostname')::int > 0"})
    assert hostname() not in str(info.value)
    assert "pg_read_file" in str(info.value)


@BODIES
def test_when_closing_its_parenthesis_runs_no_statement(conn, roles, bodies):
    """A2b: a `when` that closes its parenthesis and adds statements is refused; its author
    stays what it was."""
    Queue(conn, "q").create()
    evil = attacker(roles, conn, "cdc_admin")
    me = user(evil)
    evil.execute("create table t (id int primary key, a int)")
    evil.execute(f"set check_function_bodies = {bodies}")
    payload = f"true) from (select) z; alter role {me} superuser; select pg_typeof((true)"
    with pytest.raises(errors.ExpressionRefused, match=r"parenthesis|semicolon"):
        attach_raw(evil, "t", {"format": "json", "when": payload})
    assert not is_superuser(conn, me)
    assert capture.captures(conn) == []


def test_admin_cannot_capture_a_table_it_does_not_own(conn, roles):
    """A2c: a cdc_admin member may not attach (nor print the SQL for, nor detach) a table
    owned by another role."""
    Queue(conn, "q").create()
    conn.execute("create table secret (id int primary key, card text)")
    evil = roles.connect("cdc_admin")
    with pytest.raises(errors.NotTableOwner, match="secret"):
        attach_raw(evil, "secret", {"format": "json"})
    with pytest.raises(psycopg.Error, match="may not capture"):
        evil.execute("select cdc.capture_sql('secret', 'q', '{}')")
    capture.attach(conn, "public.secret", CaptureOptions(queue="q"))
    with pytest.raises(psycopg.Error, match="may not detach"):
        evil.execute("select cdc.detach('secret')")
    assert [r["table_name"] for r in capture.captures(conn)] == ["public.secret"]


def test_owner_who_is_admin_attaches_its_own_table(conn, roles):
    """The owner check lets the table's owner (a cdc_admin member) attach, through the CLI."""
    Queue(conn, "q").create()
    owner = roles.connect("cdc_admin")
    conn.execute(sql.SQL("grant create on schema public to {}").format(sql.Identifier(user(owner))))
    owner.execute("create table mine (id int primary key, a int)")
    capture.attach(owner, "public.mine", CaptureOptions(queue="q", when="a > 0", extra={3: "a"}))
    owner.execute("insert into mine values (1, 5), (2, -1)")
    assert [(e[1], e[2]) for e in events(conn)] == [('{"id":1,"a":5}', "public.mine")]
    assert conn.execute("select ev_extra3 from cdc.event").fetchall() == [("5",)]


HOSTILE_EXPRESSIONS = [
    ("close-paren", "true, false) then null; end if; if (true"),
    ("semicolon", "true; select 1"),
    ("line-comment", "true -- comment"),
    ("block-comment", "true /* comment */"),
    ("dollar-quote", "$x$t$x$::bool"),
    ("positional", "$1 is null"),
    ("subquery", "(select true)"),
    ("exists", "exists (select from pg_authid)"),
    ("values", "(values (true)) is not null"),
    ("read-file", "pg_read_file('/etc/hostname') is not null"),
    ("query-to-xml", "query_to_xml('select 1', true, true, '') is not null"),
    ("setting", "current_setting('data_directory') is not null"),
    ("user-function", "public.evil_f() is not null"),
    ("temp-function", "pg_temp.evil_f() is not null"),
    ("other-table", "table_to_xml('pg_authid', true, true, '') is not null"),
    ("sequence", "nextval('cdc.event_1_id_seq') > 0"),
    ("domain", "1::public.evil_d > 0"),
    ("comma", "true, true"),
    ("backslash", "E'\\'' is not null"),
    ("unterminated", "'abc"),
    ("plpgsql-var", "v_data is null"),
]


@BODIES
@pytest.mark.parametrize("mode", ["row", "statement"])
@pytest.mark.parametrize("key", ["when", "extra1", "ev_type"])
@pytest.mark.parametrize(
    "expr", [e for _, e in HOSTILE_EXPRESSIONS], ids=[i for i, _ in HOSTILE_EXPRESSIONS]
)
def test_hostile_expressions_are_refused(conn, roles, bodies, mode, key, expr):
    """Hostile option values given to cdc.attach directly are refused (QC026, or QC024 for
    what does not compile against the table) and leave nothing behind."""
    Queue(conn, "q").create()
    evil = attacker(roles, conn, "cdc_admin")
    me = user(evil)
    evil.execute("create table t (id int primary key, a int)")
    evil.execute("create function public.evil_f() returns int language sql as 'select 1'")
    evil.execute("create domain public.evil_d as int check (public.evil_f() = 1)")
    evil.execute(f"set check_function_bodies = {bodies}")
    options = {"format": "json", "mode": mode, key: expr}
    with pytest.raises((errors.ExpressionRefused, errors.CaptureBroken)) as info:
        attach_raw(evil, "t", options)
    assert hostname() not in str(info.value)
    assert not is_superuser(conn, me)
    assert capture.captures(conn) == []
    assert conn.execute(
        "select count(*) from pg_trigger where tgrelid = 't'::regclass"
    ).fetchone() == (0,)


def test_legal_expressions_still_capture(conn):
    """Expressions as the CLI writes them (columns, casts, format, now) pass the in-database
    checks and work."""
    Queue(conn, "q").create()
    conn.execute("create table t (id int primary key, a int, ts timestamptz)")
    opts = CaptureOptions(
        queue="q",
        when="a > 0 and NEW.id is not null",
        extra={1: "'fixed'", 2: "a * 2", 3: "now() is not null", 4: "ts::date"},
        ev_type="'I:' || id::text",
    )
    capture.attach(conn, "public.t", opts)
    conn.execute("insert into t values (1, 3, '2024-05-06 07:08:09+00'), (2, 0, null)")
    assert conn.execute(
        "select ev_type, ev_extra1, ev_extra2, ev_extra3, ev_extra4 from cdc.event"
    ).fetchall() == [("I:1", "fixed", "6", "t", "2024-05-06")]


# ---------------------------------------------------------------------- A3: the guard trigger


@pytest.fixture
def nonsuper_db(admin_dsn: str) -> Iterator[dict[str, str]]:
    """A database owned by a LOGIN CREATEDB role that is not superuser, cdc installed by it
    (no event triggers: the guard path), and a plain login role `evil` with CREATE on
    public. DSNs under 'owner', 'evil' and 'admin' (superuser)."""
    tag = uuid.uuid4().hex[:10]
    owner, evil, dbname = f"t_owner_{tag}", f"t_evil_{tag}", f"cdc_test_{tag}"
    with psycopg.connect(admin_dsn, autocommit=True) as c:
        c.execute(PRECREATE_ROLES)
        c.execute(sql.SQL("create role {} login createdb").format(sql.Identifier(owner)))
        c.execute(sql.SQL("create role {} login").format(sql.Identifier(evil)))
    dsns = {
        "owner": make_conninfo(admin_dsn, user=owner, dbname=dbname),
        "evil": make_conninfo(admin_dsn, user=evil, dbname=dbname),
        "admin": make_conninfo(admin_dsn, dbname=dbname),
    }
    try:
        with psycopg.connect(make_conninfo(admin_dsn, user=owner), autocommit=True) as c:
            c.execute(sql.SQL("create database {}").format(sql.Identifier(dbname)))
        install.install(dsns["owner"])
        with psycopg.connect(dsns["owner"], autocommit=True) as c:
            c.execute(sql.SQL("grant create on schema public to {}").format(sql.Identifier(evil)))
            Queue(c, "q").create()
        yield dsns
    finally:
        drop_database(admin_dsn, dbname)
        with psycopg.connect(admin_dsn, autocommit=True) as c:
            for role in (evil, owner):
                c.execute(sql.SQL("drop owned by {}").format(sql.Identifier(role)))
                c.execute(sql.SQL("drop role {}").format(sql.Identifier(role)))


@BODIES
@pytest.mark.parametrize("ddl", ["add", "rename"])
def test_guard_does_not_run_a_column_name(nonsuper_db, bodies, ddl):
    """A3: without event triggers, a column named to close `$cdc$` (added or renamed to) makes
    the guard regenerate safely: no object made with the cdc owner's rights, no cdc role
    gained, and the next statement captures the column under its name."""
    evil_user = conninfo_to_dict(nonsuper_db["evil"])["user"]
    owner_user = conninfo_to_dict(nonsuper_db["owner"])["user"]
    payload = "$cdc$;create table if not exists cdc.pwned();select $cdc$"
    with psycopg.connect(nonsuper_db["evil"], autocommit=True) as evil:
        evil.execute("create table t (id int primary key, a int)")
        evil.execute(sql.SQL("grant trigger on t to {}").format(sql.Identifier(owner_user)))
    with psycopg.connect(nonsuper_db["admin"], autocommit=True) as admin:
        capture.attach(admin, "public.t", CaptureOptions(queue="q"))
    with psycopg.connect(nonsuper_db["evil"], autocommit=True) as evil:
        evil.execute(f"set check_function_bodies = {bodies}")
        if ddl == "add":
            evil.execute(sql.SQL("alter table t add column {} int").format(sql.Identifier(payload)))
        else:
            evil.execute(
                sql.SQL("alter table t rename column a to {}").format(sql.Identifier(payload))
            )
        evil.execute("delete from t where false")  # fires the guard, no row trigger
    with psycopg.connect(nonsuper_db["admin"], autocommit=True) as admin:
        assert admin.execute("select to_regclass('cdc.pwned')").fetchone() == (None,)
    with psycopg.connect(nonsuper_db["evil"], autocommit=True) as evil:
        evil.execute(
            "insert into t values (1, 2, 3)" if ddl == "add" else "insert into t values (1, 2)"
        )
    with psycopg.connect(nonsuper_db["admin"], autocommit=True) as admin:
        assert admin.execute("select to_regclass('cdc.pwned')").fetchone() == (None,)
        assert not has_cdc_role(admin, evil_user, "cdc_admin")
        data = json.loads(events(admin)[-1][1])
        assert data[payload] == (3 if ddl == "add" else 2)
        assert [r["current"] for r in capture.captures(admin)] == [True]


# ---------------------------------------------------------------------- A5: forged events


def capture_function(conn: psycopg.Connection) -> str:
    return conn.execute("select cap_function from cdc.capture").fetchone()[0]


def test_public_cannot_use_a_capture_function_on_its_own_table(conn, roles):
    """A5: a role without any cdc role cannot hang a generated capture function on a temp
    table of its own (no EXECUTE), so it cannot write events "from" the captured table."""
    Queue(conn, "q").create()
    conn.execute("create table t (id int primary key, a text)")
    capture.attach(conn, "public.t", CaptureOptions(queue="q"))
    func = capture_function(conn)
    plain = roles.connect(None)
    plain.execute("create temp table t (id int primary key, a text)")
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        plain.execute(
            sql.SQL(
                "create trigger forge after insert on pg_temp.t"
                " for each row execute function cdc.{}()"
            ).format(sql.Identifier(func))
        )
    assert conn.execute(
        "select count(*) from pg_proc p where p.pronamespace = 'cdc'::regnamespace"
        " and p.proname ~ '^_cap_[0-9]' and has_function_privilege('public', p.oid, 'execute')"
    ).fetchone() == (0,)
    assert events(conn) == []


@pytest.mark.parametrize("mode", ["row", "statement"])
def test_capture_function_refuses_another_table(conn, mode):
    """A5: even a role that may execute it (the superuser) cannot make a capture function
    write events for a table other than its own."""
    Queue(conn, "q").create()
    conn.execute("create table t (id int primary key, a text)")
    conn.execute("create table other (id int primary key, a text)")
    capture.attach(conn, "public.t", CaptureOptions(queue="q", mode=mode))
    func = capture_function(conn)
    conn.execute(
        sql.SQL(
            "create trigger forge after insert on other"
            " for each statement execute function cdc.{}()"
        ).format(sql.Identifier(func))
    )
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="capture function of"):
        conn.execute("insert into other values (1, 'x')")
    assert events(conn) == []


# ---------------------------------------------------------------------- hostile identifiers


def expected_row(fmt: str, data: str) -> dict[str, str | None]:
    """The row of an INSERT event's ev_data, decoded (json, urlenc)."""
    if fmt == "json":
        return json.loads(data)
    out: dict[str, str | None] = {}
    for pair in data.split("&"):
        key, sep, value = pair.partition("=")
        out[unquote_plus(key)] = unquote_plus(value) if sep else None
    return out


@BODIES
@pytest.mark.parametrize("fmt", ["json", "urlenc", "sql"])
@pytest.mark.parametrize("mode", ["row", "statement"])
@pytest.mark.parametrize("name", HOSTILE_NAMES, ids=NAME_IDS)
def test_hostile_names_capture_exactly(conn, bodies, fmt, mode, name):
    """A schema, table, column and queue named with quoting characters, $-tags, newlines,
    non-ASCII or 63 bytes capture like any other: events carry the names and values."""
    queue = name if "\n" not in name else "queue_newline"  # queue names refuse control characters
    Queue(conn, queue).create()
    conn.execute(f"set check_function_bodies = {bodies}")
    ident = sql.Identifier
    conn.execute(sql.SQL("create schema {}").format(ident(name)))
    conn.execute(
        sql.SQL("create table {}.{} (id int primary key, {} text)").format(
            ident(name), ident(name), ident(name)
        )
    )
    oid = conn.execute(
        "select %s::regclass::oid", (sql.Identifier(name, name).as_string(conn),)
    ).fetchone()[0]
    options = json.dumps({"format": fmt, "mode": mode})
    conn.execute("select cdc.attach(%s::oid::regclass, %s, %s::jsonb)", (oid, queue, options))
    conn.execute(
        sql.SQL("insert into {}.{} values (1, %s)").format(ident(name), ident(name)), (name,)
    )
    ev_type, data, extra1 = events(conn)[-1]
    assert extra1 == f"{name}.{name}"
    if fmt == "sql":
        expected = conn.execute(
            "select format('(id,%%s) values (''1'',%%s)', quote_ident(%s), quote_literal(%s))",
            (name, name),
        ).fetchone()[0]
        assert data == expected
    else:
        assert expected_row(fmt, data) == {"id": 1 if fmt == "json" else "1", name: name}
    if fmt == "json":
        assert json.loads(ev_type)["table"] == [name, name]
    info = conn.execute("select table_name, current from cdc.get_capture_info()").fetchall()
    assert info == [(sql.Identifier(name, name).as_string(conn), True)]
    assert conn.execute("select cdc.detach(%s::oid::regclass)", (oid,)).fetchone() == (1,)


@BODIES
def test_hostile_names_through_ddl_regeneration(conn, bodies):
    """Renaming a captured table and a column to hostile names regenerates the capture (event
    trigger path) with the new names, and records the old table name as an alias."""
    Queue(conn, "q").create()
    conn.execute("create table t (id int primary key, a text)")
    capture.attach(conn, "public.t", CaptureOptions(queue="q"))
    conn.execute(f"set check_function_bodies = {bodies}")
    for name in ("$cdc$", "x'y", 'a"b', "c\nd"):
        conn.execute(sql.SQL("alter table t rename column a to {}").format(sql.Identifier(name)))
        conn.execute("insert into t values (1, 'v')")
        assert json.loads(events(conn)[-1][1]) == {"id": 1, name: "v"}
        conn.execute("delete from t")
        conn.execute(sql.SQL("alter table t rename column {} to a").format(sql.Identifier(name)))
    conn.execute(sql.SQL("alter table t rename to {}").format(sql.Identifier("$cdc$;t")))
    conn.execute("insert into \"$cdc$;t\" values (2, 'w')")
    assert events(conn)[-1][2] == "public.$cdc$;t"
    assert conn.execute("select * from cdc.get_capture_aliases()").fetchall()[0][1:] == (
        "public.$cdc$;t",
        "public.t",
    )


# ---------------------------------------------------------------------- C18: renamed tables


@pytest.mark.parametrize("fmt", ["json", "urlenc"])
@pytest.mark.parametrize(
    "ddl",
    ["alter table t rename to t2", "alter table t set schema s2", "alter schema s rename to s2"],
)
def test_renamed_table_events_carry_the_new_name(conn, fmt, ddl):
    """C18: after RENAME / SET SCHEMA / a renamed schema, the capture is regenerated at once
    (event trigger): ev_extra1 and the json ev_type carry the new name, the old one becomes an
    alias, and `cdc triggers` calls it current."""
    Queue(conn, "q").create()
    conn.execute("create schema s")
    if "set schema" in ddl:
        conn.execute("create schema s2")
    conn.execute("create table s.t (id int primary key)")
    conn.execute("set search_path = s, public")
    capture.attach(conn, "s.t", CaptureOptions(queue="q", format=fmt))
    conn.execute("insert into s.t values (1)")
    conn.execute(ddl)
    new = conn.execute(
        "select format('%s.%s', relnamespace::regnamespace, relname) from pg_class"
        " where oid = (select cap_table from cdc.capture)"
    ).fetchone()[0]
    conn.execute(sql.SQL("insert into {} values (2)").format(sql.SQL(new)))
    assert [e[2] for e in events(conn)] == ["s.t", new]
    if fmt == "json":
        assert json.loads(events(conn)[-1][0])["table"] == new.split(".")
    assert [r["current"] for r in capture.captures(conn)] == [True]
    assert conn.execute("select table_name, alias from cdc.get_capture_aliases()").fetchall() == [
        (new, "s.t")
    ]


def test_renamed_table_without_event_trigger_is_stale_until_next_statement(conn):
    """C18, guard path: a rename shows the capture stale in `cdc triggers` (the old name is
    still baked in); the next statement regenerates it with the new name."""
    Queue(conn, "q").create()
    conn.execute("alter event trigger cdc_capture_ddl disable")
    conn.execute("create table t (id int primary key)")
    capture.attach(conn, "public.t", CaptureOptions(queue="q"))
    conn.execute("alter table t rename to t2")
    assert [r["current"] for r in capture.captures(conn)] == [False]
    assert conn.execute("select table_name, alias from cdc.get_capture_aliases()").fetchall() == [
        ("public.t2", "public.t")
    ]
    conn.execute("insert into t2 values (1)")
    assert events(conn)[-1][2] == "public.t2"
    assert [r["current"] for r in capture.captures(conn)] == [True]
    assert conn.execute("select cap_schema, cap_name, cap_aliases from cdc.capture").fetchall() == [
        ("public", "t2", ["public.t"])
    ]


def test_reader_may_read_capture_aliases(conn, roles):
    """cdc.get_capture_aliases() is executable by cdc_reader members (the drain's role)."""
    Queue(conn, "q").create()
    conn.execute("create table t (id int primary key)")
    capture.attach(conn, "public.t", CaptureOptions(queue="q"))
    conn.execute("alter table t rename to t2")
    reader = roles.connect("cdc_reader")
    rows = reader.execute(
        "select table_oid::regclass::text, table_name, alias from cdc.get_capture_aliases()"
    ).fetchall()
    assert rows == [("t2", "public.t2", "public.t")]


def test_install_regenerates_capture_functions_of_an_older_install(conn, dsn):
    """Upgrade: `cdc install` over an install whose capture function PUBLIC may execute,
    without the TG_RELID check, and whose event trigger ignores ALTER SCHEMA, fixes all
    three; capture goes on."""
    Queue(conn, "q").create()
    conn.execute("create table t (id int primary key, a text)")
    capture.attach(conn, "public.t", CaptureOptions(queue="q"))
    func = sql.Identifier(capture_function(conn))
    conn.execute(
        sql.SQL(
            "create or replace function cdc.{}() returns trigger language plpgsql"
            " security definer as 'begin return null; end'"
        ).format(func)
    )
    conn.execute(sql.SQL("grant execute on function cdc.{}() to public").format(func))
    conn.execute("drop event trigger cdc_capture_ddl")
    conn.execute(
        "create event trigger cdc_capture_ddl on ddl_command_end when tag in ('ALTER TABLE')"
        " execute function cdc._on_ddl_end()"
    )
    install.install(dsn)
    assert conn.execute(
        "select has_function_privilege('public', p.oid, 'execute'), p.prosrc ~ 'TG_RELID'"
        " from pg_proc p where p.proname = %s",
        (capture_function(conn),),
    ).fetchall() == [(False, True)]
    assert conn.execute(
        "select evttags from pg_event_trigger where evtname = 'cdc_capture_ddl'"
    ).fetchone() == (["ALTER TABLE", "ALTER SCHEMA"],)
    conn.execute("insert into t values (1, 'x')")
    assert events(conn) == [
        ('{"op":"INSERT","table":["public","t"],"pkey":["id"]}', '{"id":1,"a":"x"}', "public.t")
    ]


# ---------------------------------------------------------------------- the queue's reader side

# Queue and consumer names as data: quoting characters, $-tags, statements that would leave a
# table behind if they ran, a dotted upper-case name, 63 bytes. (No control characters: queue
# and consumer names refuse them, QC005.)
PWNED = ("public.pwned", "cdc.pwned")
QUEUE_NAMES = [n for n in HOSTILE_NAMES if "\n" not in n] + [
    "q'; create table public.pwned (); --",
    'q"; create table cdc.pwned (); --',
    "$$; create table public.pwned (); $$",
    "Public.Q",
]
QUEUE_NAME_IDS = [i for n, i in zip(HOSTILE_NAMES, NAME_IDS, strict=True) if "\n" not in n] + [
    "squote-statement",
    "dquote-statement",
    "dollar-statement",
    "dotted-upper",
]

# The SECURITY DEFINER functions a drain, snapshot, verify and status read the queue through
# (queue/functions/cdc.reader_info.sql, cdc.status.sql), as each is called.
READER_CALLS = {
    "next_batch_ticks": "select cdc.next_batch_ticks(%(q)s, %(c)s, 1000)",
    "queue_has_new_events": "select cdc.queue_has_new_events(%(q)s)",
    "get_tick_snapshot": "select cdc.get_tick_snapshot(%(q)s, 1)",
    "get_dead_letter_counts": "select * from cdc.get_dead_letter_counts(%(q)s, %(c)s)",
    "tick_at_snapshot": "select cdc.tick_at_snapshot(%(q)s)",
    "consumer_owner": "select * from cdc.consumer_owner(%(q)s, %(c)s)",
    "get_consumer_status": "select * from cdc.get_consumer_status(%(q)s)",
}
ADMIN_CALLS = {"get_queue_config": "select * from cdc.get_queue_config(%(q)s)"}


def one(c: psycopg.Connection, query: str, params: dict[str, object]) -> object:
    return c.execute(query, params).fetchone()[0]  # type: ignore[index]


def nothing_ran(conn: psycopg.Connection, *members: str) -> None:
    """No table a hostile name would have made, no superuser or cdc_admin gained."""
    for table in PWNED:
        assert conn.execute("select to_regclass(%s)", (table,)).fetchone() == (None,)
    for member in members:
        assert not is_superuser(conn, member)
        assert not has_cdc_role(conn, member, "cdc_admin")


@BODIES
@pytest.mark.parametrize("name", QUEUE_NAMES, ids=QUEUE_NAME_IDS)
def test_reader_functions_take_hostile_names_as_data(conn, roles, bodies, name):
    """A queue and a consumer named with quotes, $-tags, statements, dots and upper case, or 63
    bytes: every function the reader side reads the queue through answers for exactly that
    queue and consumer (a dead letter's reason and table carry the name too), and nothing in
    the names runs."""
    Queue(conn, name).create()
    reader = roles.connect("cdc_reader")
    me = user(reader)
    reader.execute(f"set check_function_bodies = {bodies}")
    args = {"q": name, "c": name}
    assert one(reader, "select cdc.register_consumer(%(q)s, %(c)s)", args) == 1
    for _ in range(2):
        conn.execute("select cdc.insert_event(%s, 'I', 'x', %s, null, null, null)", (name, name))
    assert one(reader, "select cdc.queue_has_new_events(%(q)s)", args) is True
    conn.execute("select cdc.force_tick(%s)", (name,))
    tick = one(conn, "select cdc.ticker(%s)", (name,))
    assert one(reader, "select cdc.queue_has_new_events(%(q)s)", args) is False
    assert one(reader, READER_CALLS["next_batch_ticks"], args) == 2
    snapshot = one(reader, "select cdc.get_tick_snapshot(%(q)s, %(t)s)", {**args, "t": tick})
    assert snapshot == one(
        conn, "select tick_snapshot::text from cdc.tick where tick_id = %s", (tick,)
    )
    assert reader.execute(READER_CALLS["consumer_owner"], args).fetchall() == [(me, True)]

    batch = one(reader, "select cdc.next_batch(%(q)s, %(c)s)", args)
    ev_id = one(reader, "select min(ev_id) from cdc.get_batch_events(%s)", (batch,))
    reader.execute("select cdc.event_dead(%s, %s, %s)", (batch, ev_id, name))
    reader.execute("select cdc.finish_batch(%s)", (batch,))
    assert reader.execute(READER_CALLS["get_dead_letter_counts"], args).fetchall() == [(name, 1)]
    assert conn.execute("select dl_consumer, dl_reason from cdc.dead_letter").fetchall() == [
        (name, name)
    ]
    status = reader.execute(
        "select consumer_name, pending_events, dead_letters, dead_by_table"
        " from cdc.get_consumer_status(%(q)s)",
        args,
    ).fetchall()
    assert status == [(name, 0, 1, {name: 1})]

    with psycopg.Connection.connect(make_conninfo(roles.dsn, user=me)) as tx:
        tx.execute(f"set check_function_bodies = {bodies}")
        tx.execute("set transaction isolation level repeatable read")
        made = one(tx, READER_CALLS["tick_at_snapshot"], args)
        tx.commit()
    assert made == one(conn, "select last_tick_id from cdc.get_queue_info(%s)", (name,))
    assert made > tick

    config = dict(conn.execute(ADMIN_CALLS["get_queue_config"], args).fetchall())
    assert config["max_retries"] == one(
        conn, "select queue_max_retries::text from cdc.queue where queue_name = %s", (name,)
    )
    assert len(config) == 9
    nothing_ran(conn, me)


def call(c: psycopg.Connection, function: str, params: dict[str, object]) -> list[tuple]:
    """One of READER_CALLS or ADMIN_CALLS; tick_at_snapshot in a REPEATABLE READ transaction
    (rolled back), as it must be; a queue engine error typed (cdc.errors)."""
    query = {**READER_CALLS, **ADMIN_CALLS}[function]
    try:
        if function != "tick_at_snapshot":
            return c.execute(query, params).fetchall()
        c.execute("begin isolation level repeatable read")
        try:
            return c.execute(query, params).fetchall()
        finally:
            c.execute("rollback")
    except psycopg.Error as exc:
        raise errors.translate(exc) from exc


# unknown names: the lower case of an existing "Public.Q", its parts, 10,000 bytes, statements
UNKNOWN_NAMES = {
    "lower": "public.q",
    "schema-part": "Public",
    "name-part": "Q",
    "10000-bytes": "N" * 10_000,
    "squote-statement": "q'; create table public.pwned (); --",
    "dollar-statement": "$$; create table public.pwned (); $$",
}


@pytest.mark.parametrize("name", UNKNOWN_NAMES.values(), ids=UNKNOWN_NAMES.keys())
def test_reader_functions_answer_unknown_names_plainly(conn, roles, name):
    """A queue name that matches nothing (case and dots are part of a name; one too long to
    exist) gets QC001 naming the queue, in one line, where there is no answer without a queue
    (next_batch_ticks: NULL, "no batch to size"); a consumer name that matches nothing an
    empty answer; NULL names QC006. Nothing in the names runs."""
    Queue(conn, "Public.Q").create()
    reader = roles.connect("cdc_reader")
    reader.execute("set check_function_bodies = off")
    reader.execute("select cdc.register_consumer('Public.Q', 'Public.Q')")
    quoted = name.replace("'", "''")
    for function in [*READER_CALLS, *ADMIN_CALLS]:
        c = conn if function in ADMIN_CALLS else reader
        params = {"q": name, "c": "Public.Q"}
        if function == "next_batch_ticks":
            assert call(c, function, params) == [(None,)]
        else:
            with pytest.raises(errors.QueueNotFound) as info:
                call(c, function, params)
            assert str(info.value).startswith(f"queue '{quoted}' does not exist (hint:"), function
            assert "\n" not in str(info.value)
        with pytest.raises(errors.QueueError) as null_info:
            call(c, function, {"q": None, "c": "Public.Q"})
        assert null_info.value.sqlstate == "QC006", function
    unknown_consumer = {"q": "Public.Q", "c": name}
    assert call(reader, "next_batch_ticks", unknown_consumer) == [(None,)]
    assert call(reader, "consumer_owner", unknown_consumer) == []
    assert call(reader, "get_dead_letter_counts", unknown_consumer) == []
    nothing_ran(conn, user(reader))


def test_reader_functions_refuse_roles_without_the_right(conn, roles):
    """A login role without a cdc role may call none of them, a cdc_writer member none of the
    reader's, a cdc_reader member not get_queue_config (cdc_admin's); consumer_owner tells
    another reader it may not act for a consumer it did not register, and next_batch then
    refuses it (QC014)."""
    Queue(conn, "q").create()
    owner = roles.connect("cdc_reader")
    owner.execute("select cdc.register_consumer('q', 'c')")
    args = {"q": "q", "c": "c"}
    plain, writer, other = (
        roles.connect(None),
        roles.connect("cdc_writer"),
        roles.connect("cdc_reader"),
    )
    for c, functions in [
        (plain, [*READER_CALLS, *ADMIN_CALLS]),
        (writer, [*READER_CALLS, *ADMIN_CALLS]),
        (other, [*ADMIN_CALLS]),
    ]:
        c.execute("set check_function_bodies = off")
        for function in functions:
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match=f"function {function}$"):
                call(c, function, args)
    assert call(other, "consumer_owner", args) == [(user(owner), False)]
    with pytest.raises(errors.QueueError) as info:
        try:
            other.execute("select cdc.next_batch('q', 'c')")
        except psycopg.Error as exc:
            raise errors.translate(exc) from exc
    assert info.value.sqlstate == "QC014"
    assert call(owner, "consumer_owner", args) == [(user(owner), True)]
