"""Installing, upgrading and removing the queue engine: cdc.pg.install and `cdc install`.

The cdc_* roles are cluster-wide and the template database (and every clone of it) holds
grants to them, so they always exist here and uninstall must keep them; the path where
install creates them, or uninstall drops them, cannot run on this shared server.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from cdc import __version__, cli
from cdc.errors import CdcError
from cdc.pg import capture, install, sqlfiles
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Producer, Queue
from tests.support.databases import drop_database
from tests.support.roles import PRECREATE_ROLES

ROLES = ("cdc_admin", "cdc_reader", "cdc_writer")


def catalog_state(dsn: str) -> dict[str, Any]:
    """What an install could touch: schemas, relations, functions, types, ACLs (a default
    ACL shown expanded, as it means the same as the explicit one), roles."""
    queries = {
        "schemas": "select nspname, nspowner::regrole::text,"
        " coalesce(nspacl, acldefault('n', nspowner))::text from pg_namespace"
        " where nspname !~ '^pg_' and nspname <> 'information_schema' order by 1",
        "relations": "select oid::regclass::text, relkind, relowner::regrole::text,"
        " coalesce(relacl, acldefault(case relkind when 'S' then 's'::\"char\" else 'r' end,"
        " relowner))::text"
        " from pg_class"
        " where relnamespace not in ('pg_catalog'::regnamespace,"
        " 'information_schema'::regnamespace, 'pg_toast'::regnamespace) order by 1",
        "functions": "select oid::regprocedure::text, proowner::regrole::text,"
        " coalesce(proacl, acldefault('f', proowner))::text,"
        " md5(prosrc) from pg_proc"
        " where pronamespace not in ('pg_catalog'::regnamespace,"
        " 'information_schema'::regnamespace) order by 1",
        "types": "select oid::regtype::text from pg_type where typnamespace not in"
        " ('pg_catalog'::regnamespace, 'information_schema'::regnamespace) order by 1",
        "roles": "select rolname, rolcanlogin from pg_roles order by 1",
        "memberships": "select roleid::regrole::text, member::regrole::text from pg_auth_members"
        " order by 1, 2",
    }
    with psycopg.connect(dsn, autocommit=True) as c:
        return {k: c.execute(q).fetchall() for k, q in queries.items()}


def has_cdc_schema(dsn: str) -> bool:
    with psycopg.connect(dsn, autocommit=True) as c:
        return c.execute("select to_regnamespace('cdc') is not null").fetchone()[0]


def fill_queue(dsn: str) -> list[int]:
    """Queue 'q', consumer 'c' registered, three events inserted (not yet ticked)."""
    with psycopg.connect(dsn, autocommit=True) as c:
        assert Queue(c, "q").create()
        assert Consumer(c, "q", "c").register()
        return [Producer(c, "q").insert("I", f"row{i}") for i in range(3)]


def read_batch(dsn: str) -> list[tuple[int, str | None]]:
    """Tick 'q' and return (ev_id, ev_data) of consumer 'c''s next batch, finishing it."""
    with psycopg.connect(dsn, autocommit=True) as c:
        Queue(c, "q").force_tick()
        assert Queue(c, "q").tick() is not None
        with Consumer(c, "q", "c").batch() as batch:
            assert batch is not None
            return [(e.ev_id, e.ev_data) for e in batch.events()]


# ---------------------------------------------------------------------- install, reinstall


def test_install_on_fresh_database_returns_version(empty_dsn: str) -> None:
    """install() on a database without cdc installs it and returns the package version."""
    assert install.install(empty_dsn) == __version__
    with psycopg.connect(empty_dsn, autocommit=True) as c:
        assert install.installed_version(c) == __version__
        assert c.execute("select cdc.version()").fetchone() == (__version__,)


def test_installed_version_is_none_without_cdc(empty_dsn: str) -> None:
    """installed_version() is None in a database without the cdc schema."""
    with psycopg.connect(empty_dsn, autocommit=True) as c:
        assert install.installed_version(c) is None


def test_install_twice_keeps_data(dsn: str) -> None:
    """Installing over an install (twice) raises nothing and keeps queues, consumers, events."""
    ids = fill_queue(dsn)
    assert install.install(dsn) == __version__
    assert install.install(dsn) == __version__
    assert read_batch(dsn) == [(i, f"row{n}") for n, i in enumerate(ids)]


def test_reinstall_changes_no_catalog_object(dsn: str) -> None:
    """A reinstall over the current version leaves every object, owner and ACL as it was."""
    fill_queue(dsn)
    before = catalog_state(dsn)
    install.install(dsn)
    assert catalog_state(dsn) == before


@pytest.mark.parametrize(
    "path",
    [
        "queue/tables.sql",
        "queue/functions/cdc._retry_events.sql",
        "queue/functions/cdc.info.sql",
        "queue/roles.sql",
        "queue/grants.sql",
    ],
)
def test_failed_install_changes_nothing(
    empty_dsn: str, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """An install that fails midway (after any part of the script) leaves the database as before."""
    original = sqlfiles.read

    def read(p: str) -> str:
        text = original(p)
        if p == path:
            text += "\ndo $$ begin raise exception 'injected failure'; end $$;\n"
        return text

    monkeypatch.setattr(sqlfiles, "read", read)
    before = catalog_state(empty_dsn)
    with pytest.raises(CdcError, match="install failed, nothing was changed: injected failure"):
        install.install(empty_dsn)
    assert not has_cdc_schema(empty_dsn)
    assert catalog_state(empty_dsn) == before


# ---------------------------------------------------------------------- non-superuser owners


@pytest.fixture(params=[False, True], ids=["createdb", "createdb+createrole"])
def owned_db(request: pytest.FixtureRequest, admin_dsn: str) -> Iterator[str]:
    """DSN, as its owner, of a fresh database owned by a LOGIN CREATEDB role that is not
    superuser (with or without CREATEROLE). The cdc_* roles exist already, as an
    administrator of a managed service would have made them."""
    owner = f"t_owner_{uuid.uuid4().hex[:10]}"
    dbname = f"cdc_test_{uuid.uuid4().hex[:12]}"
    attrs = "login createdb nosuperuser" + (" createrole" if request.param else "")
    with psycopg.connect(admin_dsn, autocommit=True) as c:
        c.execute(PRECREATE_ROLES)
        c.execute(sql.SQL("create role {} " + attrs).format(sql.Identifier(owner)))
    try:
        owner_admin = make_conninfo(admin_dsn, user=owner)
        with psycopg.connect(owner_admin, autocommit=True) as c:
            c.execute(sql.SQL("create database {}").format(sql.Identifier(dbname)))
        yield make_conninfo(admin_dsn, user=owner, dbname=dbname)
    finally:
        drop_database(admin_dsn, dbname)
        with psycopg.connect(admin_dsn, autocommit=True) as c:
            c.execute(sql.SQL("drop owned by {}").format(sql.Identifier(owner)))
            c.execute(sql.SQL("drop role {}").format(sql.Identifier(owner)))


def test_non_superuser_owner_can_install_and_run_a_queue(owned_db: str) -> None:
    """The database's owner, not superuser, installs cdc and runs a queue end to end."""
    with psycopg.connect(owned_db) as c:
        assert not c.execute(
            "select rolsuper from pg_roles where rolname = current_user"
        ).fetchone()[0]
    assert install.install(owned_db) == __version__
    ids = fill_queue(owned_db)
    assert read_batch(owned_db) == [(i, f"row{n}") for n, i in enumerate(ids)]
    with psycopg.connect(owned_db) as c:
        assert c.execute(
            "select proowner::regrole::text = current_user from pg_proc"
            " where oid = 'cdc.insert_event(text,text,text)'::regprocedure"
        ).fetchone() == (True,)


def test_non_superuser_owner_captures_through_column_changes(owned_db: str) -> None:
    """Installed without a superuser (no event triggers), capture survives DROP and RENAME
    COLUMN: the application's next statement regenerates the capture function."""
    install.install(owned_db)
    with psycopg.connect(owned_db, autocommit=True) as c:
        assert c.execute("select count(*) from pg_event_trigger").fetchone()[0] == 0
        Queue(c, "q").create()
        c.execute("create table t (id int primary key, a text, b int, d text)")
        capture.attach(c, "public.t", CaptureOptions(queue="q"))
        c.execute("alter table t drop column a")
        c.execute("alter table t rename column b to bb")
        c.execute("insert into t values (1, 2, 'x')")
        c.execute("update t set d = 'y'")
        data = [r[0] for r in c.execute("select ev_data from cdc.event order by ev_id")]
        assert data == ['{"id":1,"bb":2,"d":"x"}', '{"id":1,"bb":2,"d":"y"}']
        assert [r["current"] for r in capture.captures(c)] == [True]


def test_non_superuser_install_grants_the_roles(owned_db: str) -> None:
    """Installed by a non-superuser owner, the roles still get EXECUTE on their functions."""
    install.install(owned_db)
    checks = {
        ("cdc_writer", "cdc.insert_event(text,text,text)"): True,
        ("cdc_reader", "cdc.next_batch(text,text)"): True,
        ("cdc_admin", "cdc.create_queue(text)"): True,
        ("public", "cdc.create_queue(text)"): False,
        ("public", "cdc.version()"): True,
    }
    with psycopg.connect(owned_db) as c:
        got = {
            key: c.execute(
                "select has_function_privilege(%s, %s::regprocedure, 'EXECUTE')", key
            ).fetchone()[0]
            for key in checks
        }
    assert got == checks


def test_non_superuser_owner_can_reinstall_and_uninstall(owned_db: str, template_dsn: str) -> None:
    """The owner reinstalls, then uninstalls: schema gone, roles kept (the template database
    still uses them), no error."""
    install.install(owned_db)
    fill_queue(owned_db)
    install.install(owned_db)
    assert install.uninstall(owned_db) == []
    assert not has_cdc_schema(owned_db)
    with psycopg.connect(owned_db) as c:
        kept = c.execute("select count(*) from pg_roles where rolname like 'cdc\\_%'").fetchone()
    assert kept == (3,)


def test_install_fails_cleanly_on_a_function_owned_by_someone_else(
    owned_db: str, admin_dsn: str
) -> None:
    """A conflicting cdc function owned by another role makes the owner's install fail with
    nothing changed."""
    dbname = psycopg.conninfo.conninfo_to_dict(owned_db)["dbname"]
    with psycopg.connect(owned_db, autocommit=True) as c:
        c.execute("create schema cdc")
    with psycopg.connect(make_conninfo(admin_dsn, dbname=dbname), autocommit=True) as c:
        c.execute("create function cdc.version() returns text language sql as $$ select 'x' $$")
    before = catalog_state(owned_db)
    with pytest.raises(CdcError, match="install failed, nothing was changed: must be owner"):
        install.install(owned_db)
    assert catalog_state(owned_db) == before


# ---------------------------------------------------------------------- upgrade in place

OLD_STUB = """
create or replace function cdc.set_queue_config(
    x_queue_name text, x_param_name text, x_param_value text)
returns integer language plpgsql security definer set search_path = pg_catalog, pg_temp
as $$ begin return 0; end $$
"""

OLD_VERSION = """
create or replace function cdc.version() returns text
language sql immutable security definer set search_path = pg_catalog, pg_temp
as $$ select '0.0.1'::text $$
"""


def make_old(dsn: str, *statements: str) -> None:
    with psycopg.connect(dsn) as c:
        for stmt in statements:
            c.execute(stmt)
        c.execute("update cdc.installed set inst_version = '0.0.1'")


def test_upgrade_replaces_old_function_bodies(dsn: str) -> None:
    """Install over an older install replaces old function bodies with the current ones."""
    with psycopg.connect(dsn, autocommit=True) as c:
        Queue(c, "q").create()
    make_old(dsn, OLD_STUB)
    install.install(dsn)
    with psycopg.connect(dsn, autocommit=True) as c:
        assert c.execute(
            "select cdc.set_queue_config('q', 'ticker_max_count', '7')"
        ).fetchone() == (1,)
        assert Queue(c, "q").info()["queue_ticker_max_count"] == 7


def test_upgrade_records_the_new_version(dsn: str) -> None:
    """Install over version 0.0.1 returns, records and reports the current version."""
    make_old(dsn, OLD_VERSION)
    with psycopg.connect(dsn) as c:
        assert install.installed_version(c) == "0.0.1"
    assert install.install(dsn) == __version__
    with psycopg.connect(dsn) as c:
        assert install.installed_version(c) == __version__
        assert c.execute("select cdc.version(), count(*) from cdc.installed").fetchone() == (
            __version__,
            1,
        )


COLUMN_DEF = (
    "select format_type(atttypid, atttypmod), attnotnull, pg_get_expr(adbin, adrelid)"
    "  from pg_attribute left join pg_attrdef on adrelid = attrelid and adnum = attnum"
    " where attrelid = %s::regclass and attname = %s and not attisdropped"
)


@pytest.mark.parametrize(
    "column",
    ["queue_max_retries", "queue_force_tick", "queue_per_tx_limit", "queue_ticker_max_lag"],
)
def test_upgrade_adds_missing_columns(dsn: str, template_dsn: str, column: str) -> None:
    """Install over an older install that lacks a newer queue column adds it, defined as in a
    fresh install, and keeps the queue working."""
    ids = fill_queue(dsn)
    make_old(
        dsn,
        # cascade: an older install had no trigger on the column either
        sql.SQL("alter table cdc.queue drop column {} cascade")
        .format(sql.Identifier(column))
        .as_string(),
    )
    install.install(dsn)
    with psycopg.connect(template_dsn) as c:
        fresh = c.execute(COLUMN_DEF, ("cdc.queue", column)).fetchall()
    with psycopg.connect(dsn, autocommit=True) as c:
        assert c.execute(COLUMN_DEF, ("cdc.queue", column)).fetchall() == fresh
        Queue(c, "q").set_config("max_retries", 0)
        Queue(c, "q").set_config("per_tx_limit", 100)
    assert read_batch(dsn) == [(i, f"row{n}") for n, i in enumerate(ids)]


# Functions as an install before PgQ's argument names had them.
OLD_NAMES = """
drop function cdc.finish_batch(bigint);
create function cdc.finish_batch(i_batch_id bigint) returns integer
language sql security definer set search_path = pg_catalog, pg_temp as $$ select 0 $$;
drop function cdc.insert_event(text, text, text);
create function cdc.insert_event(i_queue_name text, i_ev_type text, i_ev_data text)
returns bigint language sql as $$ select 0::bigint $$;
"""


def test_upgrade_gives_functions_pgqs_argument_names(dsn: str) -> None:
    """Install over an install whose functions have other argument names gives them PgQ's
    (create or replace cannot rename an argument), with their grants, and keeps the queue."""
    ids = fill_queue(dsn)
    make_old(dsn, OLD_NAMES)
    install.install(dsn)
    with psycopg.connect(dsn, autocommit=True) as c:
        names = c.execute(
            "select proargnames from pg_proc where oid = any(array["
            "'cdc.finish_batch(bigint)'::regprocedure,"
            " 'cdc.insert_event(text, text, text)'::regprocedure]) order by proname"
        ).fetchall()
        assert names == [(["x_batch_id"],), (["queue_name", "ev_type", "ev_data"],)]
        granted = c.execute(
            "select has_function_privilege('cdc_reader', 'cdc.finish_batch(bigint)', 'EXECUTE'),"
            " has_function_privilege('cdc_writer', 'cdc.insert_event(text, text, text)',"
            " 'EXECUTE')"
        ).fetchone()
        assert granted == (True, True)
        assert c.execute(
            "select cdc.insert_event(queue_name => 'q', ev_type => 't', ev_data => 'd') > 0"
        ).fetchone() == (True,)
    assert read_batch(dsn)[: len(ids)] == [(i, f"row{n}") for n, i in enumerate(ids)]


def test_upgrade_keeps_queue_data(dsn: str) -> None:
    """Install over an older install keeps queues, subscriptions and unread events."""
    ids = fill_queue(dsn)
    make_old(dsn, OLD_STUB, OLD_VERSION)
    install.install(dsn)
    assert read_batch(dsn) == [(i, f"row{n}") for n, i in enumerate(ids)]


def test_upgrade_revokes_stale_public_grants(dsn: str) -> None:
    """Install over an install that let PUBLIC run an admin function takes that right back."""
    make_old(dsn, "grant execute on function cdc.create_queue(text) to public")
    install.install(dsn)
    with psycopg.connect(dsn) as c:
        row = c.execute(
            "select has_function_privilege('public', 'cdc.create_queue(text)', 'EXECUTE')"
        ).fetchone()
    assert row == (False,)


# ---------------------------------------------------------------------- uninstall


def test_uninstall_removes_the_schema(dsn: str, template_dsn: str) -> None:
    """uninstall() drops schema cdc with its data, and no other database's install."""
    fill_queue(dsn)
    install.uninstall(dsn)
    assert not has_cdc_schema(dsn)
    assert has_cdc_schema(template_dsn)


def test_uninstall_keeps_roles_still_in_use(dsn: str) -> None:
    """Roles other databases still hold grants for are kept, without error; none reported."""
    assert install.uninstall(dsn) == []
    with psycopg.connect(dsn) as c:
        rows = c.execute(
            "select rolname from pg_roles where rolname = any(%s) order by 1", (list(ROLES),)
        ).fetchall()
    assert [r[0] for r in rows] == sorted(ROLES)


def test_uninstall_without_install_is_harmless(empty_dsn: str) -> None:
    """uninstall() on a database without cdc raises nothing and changes nothing."""
    before = catalog_state(empty_dsn)
    assert install.uninstall(empty_dsn, drop_roles=False) == []
    assert catalog_state(empty_dsn) == before


def test_reinstall_after_uninstall(dsn: str) -> None:
    """After uninstall, install works again and starts with no queues."""
    fill_queue(dsn)
    install.uninstall(dsn)
    assert install.install(dsn) == __version__
    with psycopg.connect(dsn) as c:
        assert c.execute("select count(*) from cdc.get_queue_info()").fetchone() == (0,)


# ---------------------------------------------------------------------- CLI

Capsys = pytest.CaptureFixture[str]


def run_cli(capsys: Capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_install_prints_the_version(empty_dsn: str, capsys: Capsys) -> None:
    """`cdc install --dsn DSN` exits 0 and prints the installed version."""
    code, out, _ = run_cli(capsys, "install", "--dsn", empty_dsn)
    assert (code, out) == (0, f"cdc {__version__} installed\n")
    assert has_cdc_schema(empty_dsn)


def test_cli_install_reads_cdc_dsn(
    empty_dsn: str, capsys: Capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`cdc install` without --dsn installs into $CDC_DSN."""
    monkeypatch.setenv("CDC_DSN", empty_dsn)
    code, out, _ = run_cli(capsys, "install")
    assert (code, out) == (0, f"cdc {__version__} installed\n")
    assert has_cdc_schema(empty_dsn)


def test_cli_install_without_dsn_fails(capsys: Capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    """`cdc install` with neither --dsn nor $CDC_DSN exits 1 naming both."""
    monkeypatch.delenv("CDC_DSN", raising=False)
    code, out, err = run_cli(capsys, "install")
    assert code == 1
    assert out == ""
    assert "--dsn" in err and "CDC_DSN" in err


def test_cli_install_into_missing_database_fails(admin_dsn: str, capsys: Capsys) -> None:
    """`cdc install` into a database that does not exist exits 1 with the server's message."""
    dsn = make_conninfo(admin_dsn, dbname=f"cdc_missing_{uuid.uuid4().hex[:8]}")
    code, out, err = run_cli(capsys, "install", "--dsn", dsn)
    assert (code, out) == (1, "")
    assert err.startswith("cdc: error: ") and "does not exist" in err


def test_cli_uninstall(dsn: str, capsys: Capsys) -> None:
    """`cdc uninstall --dsn DSN` exits 0, says so, and the schema is gone."""
    code, out, _ = run_cli(capsys, "uninstall", "--dsn", dsn)
    assert (code, out) == (0, "cdc removed\n")
    assert not has_cdc_schema(dsn)
