"""The capture side under attack: hostile identifiers, hostile option expressions and forged
events against every SECURITY DEFINER function and event trigger of capture.

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
