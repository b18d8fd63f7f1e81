"""The whole pipeline, each step run from the command line as the least-privileged role the
docs name (docs/operations.md, "Roles and privileges"): install and attach as the database's
owner, not a superuser and not the creator of the cluster's cdc_* roles; snapshot, drain and
status as a login role given `cdc grant --as drain`; verify as one given `cdc grant --as
verify` and membership of the drain's role (whose consumer it drains up to its point)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from cdc import cli
from cdc import spark as spark_module
from cdc.cli import exitcodes
from cdc.pg import pgtypes
from cdc.pipeline import compare
from tests.support.databases import drop_database

pytestmark = pytest.mark.spark


@pytest.fixture
def owned(admin_dsn: str) -> Iterator[tuple[str, str]]:
    """(owner DSN, superuser DSN) of a fresh database owned by a LOGIN CREATEDB CREATEROLE
    role that is not a superuser; its roles dropped at the end."""
    owner = f"t_owner_{uuid.uuid4().hex[:10]}"
    dbname = f"cdc_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_dsn, autocommit=True) as c:
        c.execute(sql.SQL("create role {} login createdb createrole").format(sql.Identifier(owner)))
    with psycopg.connect(make_conninfo(admin_dsn, user=owner), autocommit=True) as c:
        c.execute(sql.SQL("create database {}").format(sql.Identifier(dbname)))
    try:
        yield (
            make_conninfo(admin_dsn, user=owner, dbname=dbname),
            make_conninfo(admin_dsn, dbname=dbname),
        )
    finally:
        drop_database(admin_dsn, dbname)
        with psycopg.connect(admin_dsn, autocommit=True) as c:
            made = c.execute(
                "select rolname from pg_roles where rolname like %s", (f"{owner}\\_%",)
            ).fetchall()
            for (name,) in [*made, (owner,)]:
                c.execute(sql.SQL("drop owned by {}").format(sql.Identifier(name)))
                c.execute(sql.SQL("drop role {}").format(sql.Identifier(name)))


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code = cli.main(argv)
    out, err = capsys.readouterr()
    assert code == exitcodes.OK, f"cdc {' '.join(argv[:2])}: {err[-2000:]}"
    return out


def config(path: Path, dsn: str, role: str, root: Path) -> Path:
    path.write_text(
        "[source]\n"
        f"dsn = {make_conninfo(dsn, user=role)!r}\n"
        'queue = "q"\nconsumer = "delta"\n'
        f"[target]\npath = {str(root)!r}\n"
        '[[tables]]\nsource = "app.orders"\ntarget = "orders"\n'
    )
    return path


def test_each_step_runs_as_its_least_privileged_role(
    owned: tuple[str, str],
    spark,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """install, queue, attach (owner); snapshot, drain, status (--as drain); verify (--as
    verify): every command exits 0, Delta equals the source, and neither pipeline role may
    write the table or administer the engine."""
    monkeypatch.setattr(spark_module, "pipeline_session", lambda *a, **k: spark)
    owner_dsn, super_dsn = owned
    owner = conninfo_to_dict(owner_dsn)["user"]
    drainer, verifier = f"{owner}_drain", f"{owner}_verify"
    with psycopg.connect(owner_dsn, autocommit=True) as c:
        assert not c.execute(
            "select rolsuper from pg_roles where rolname = current_user"
        ).fetchone()[0]

    run(["install", "--dsn", owner_dsn], capsys)
    run(["queue", "create", "q", "--dsn", owner_dsn], capsys)
    with psycopg.connect(owner_dsn, autocommit=True) as c:
        c.execute("create schema app")
        c.execute("create table app.orders (id int primary key, v text, n numeric)")
        c.execute(
            "insert into app.orders select g, 'v' || g, g / 3.0 from generate_series(1, 500) g"
        )
        for role in (drainer, verifier):
            c.execute(sql.SQL("create role {} login").format(sql.Identifier(role)))
    run(["attach", "app.orders", "--queue", "q", "--dsn", owner_dsn], capsys)
    run(["grant", drainer, "--as", "drain", "--dsn", owner_dsn], capsys)
    run(["grant", verifier, "--as", "verify", "--dsn", owner_dsn], capsys)
    with psycopg.connect(owner_dsn, autocommit=True) as c:
        c.execute(
            sql.SQL("grant {} to {}").format(sql.Identifier(drainer), sql.Identifier(verifier))
        )

    root = tmp_path / "delta"
    drain_conf = str(config(tmp_path / "drain.toml", owner_dsn, drainer, root))
    verify_conf = str(config(tmp_path / "verify.toml", owner_dsn, verifier, root))

    run(["snapshot", "app.orders", "--config", drain_conf, "--no-progress"], capsys)
    with psycopg.connect(owner_dsn, autocommit=True) as c:
        c.execute("update app.orders set v = 'changed' where id % 5 = 0")
        c.execute("delete from app.orders where id % 7 = 0")
        c.execute("insert into app.orders values (501, 'new', 1.5)")
    run(["drain", "--config", drain_conf], capsys)
    status = json.loads(run(["status", "--config", drain_conf, "--json"], capsys))
    assert '"dead_letters": 0' in json.dumps(status)
    with psycopg.connect(owner_dsn, autocommit=True) as c:
        c.execute("update app.orders set v = 'again' where id % 11 = 0")
    verdicts = json.loads(run(["verify", "--config", verify_conf, "--json"], capsys))
    assert [(v["target"], v["ok"]) for v in verdicts] == [("orders", True)]

    with psycopg.connect(super_dsn, autocommit=True) as c:
        for role in (drainer, verifier):
            assert c.execute(
                "select has_table_privilege(%s, 'app.orders', 'update'),"
                " has_table_privilege(%s, 'app.orders', 'insert'),"
                " pg_has_role(%s, 'cdc_admin', 'member'),"
                " has_function_privilege(%s, 'cdc.create_queue(text)', 'execute')",
                (role, role, role, role),
            ).fetchone() == (False, False, False, False)
        cols = pgtypes.keyed_columns(c, "app", "orders", "q")
        expected = compare.source_rows(c, "app", "orders", cols)
    assert len(expected) == 501 - 71
    assert compare.delta_rows(spark, str(root / "orders"), cols) == expected
