"""The privilege set of each role (``cdc grant --as ...``), the functions a cdc_reader member
reads the engine through, verify's consistent point without table locks, the install into a
second database by another owner, and the checks commands run before they start."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from cdc import cli, errors
from cdc.cli import exitcodes, roles
from cdc.pg import capture, install, privileges
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Queue
from tests.support import drainkit
from tests.support.databases import drop_database
from tests.support.roles import LoginRoles


@pytest.fixture
def logins(admin_dsn: str, dsn: str) -> Iterator[LoginRoles]:
    roles_ = LoginRoles(admin_dsn, dsn)
    yield roles_
    roles_.cleanup()


@pytest.fixture
def captured(conn: psycopg.Connection) -> psycopg.Connection:
    """Queue q, table app.orders captured into it (in a schema of its own), 3 rows."""
    Queue(conn, "q").create()
    conn.execute("create schema app")
    conn.execute("create table app.orders (id int primary key, v text)")
    conn.execute("insert into app.orders select g, 'v' || g from generate_series(1, 3) g")
    capture.attach(conn, "app.orders", CaptureOptions(queue="q"))
    return conn


def granted(conn: psycopg.Connection, logins: LoginRoles, kind: str, **kw: object) -> str:
    """A new login role given ``kind`` by ``cdc grant`` (run by conn's role); its name."""
    member = logins.connect(None)
    statements, _ = roles.grant_statements(conn, member.info.user, kind, **kw)  # type: ignore[arg-type]
    roles.run(conn, statements)
    return member.info.user


def as_role(dsn: str, role: str) -> psycopg.Connection:
    return psycopg.connect(make_conninfo(dsn, user=role), autocommit=True)


# ---------------------------------------------------------------------- the sets


def test_reader_functions_are_what_grants_sql_gives_cdc_reader(conn: psycopg.Connection) -> None:
    """privileges.READER_FUNCTIONS lists exactly the functions cdc_reader may execute that
    PUBLIC may not (grants.sql and the check cannot drift apart)."""
    rows = conn.execute(
        "select distinct proname::text from pg_proc where pronamespace = 'cdc'::regnamespace"
        " and has_function_privilege('cdc_reader', oid, 'execute')"
        " and not has_function_privilege('public', oid, 'execute')"
    ).fetchall()
    assert {r[0] for r in rows} == set(privileges.READER_FUNCTIONS)


@pytest.mark.parametrize("kind", list(privileges.KINDS))
def test_cdc_grant_gives_each_kind_all_it_needs(
    captured: psycopg.Connection, logins: LoginRoles, dsn: str, kind: str
) -> None:
    """A plain login role lacks what the kind needs; after `cdc grant --as kind` it lacks
    nothing (functions, schema USAGE, SELECT on the captured table)."""
    tables = [("app", "orders")]
    plain = logins.connect(None)
    absent, refused, unreadable = privileges.missing(plain, kind, tables)
    assert absent == [] and refused != []
    assert unreadable == (["app.orders"] if privileges.KINDS[kind].reads_tables else [])
    role = granted(captured, logins, kind)
    with as_role(dsn, role) as c:
        assert privileges.missing(c, kind, tables) == ([], [], [])
        privileges.check(c, kind, tables)


def test_drain_set_is_membership_and_select(captured: psycopg.Connection) -> None:
    """As a superuser: cdc_reader membership, USAGE on the schema, SELECT on the table."""
    statements, notes = roles.grant_statements(captured, "cdc_writer", "drain")
    assert [s.as_string(captured) for s in statements] == [
        'grant "cdc_reader" to "cdc_writer"',
        'grant usage on schema "app" to "cdc_writer"',
        'grant select on table "app"."orders" to "cdc_writer"',
    ]
    assert notes == []


def test_grant_refuses_an_unknown_role(captured: psycopg.Connection) -> None:
    """A role that does not exist: one line saying to create it first."""
    with pytest.raises(errors.ConfigError, match="role nobody_here does not exist"):
        roles.grant_statements(captured, "nobody_here", "drain")


def test_cli_grant_print_runs_nothing(
    captured: psycopg.Connection, logins: LoginRoles, dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """--print shows the statements and grants nothing."""
    member = logins.connect(None).info.user
    code = cli.main(["grant", member, "--as", "verify", "--print", "--dsn", dsn])
    out = capsys.readouterr().out
    assert code == exitcodes.OK
    assert f'grant "cdc_reader" to "{member}";' in out
    assert (
        captured.execute("select pg_has_role(%s, 'cdc_reader', 'member')", (member,)).fetchone()[0]
        is False
    )
    code = cli.main(["grant", member, "--as", "verify", "--dsn", dsn])
    assert code == exitcodes.OK
    assert (
        captured.execute("select pg_has_role(%s, 'cdc_reader', 'member')", (member,)).fetchone()[0]
        is True
    )


# ---------------------------------------------------------------------- what the reader reads


def test_reader_sizes_batches_by_ticks_not_one_tick_each(
    captured: psycopg.Connection, logins: LoginRoles, dsn: str
) -> None:
    """A `--as drain` role reads through next_batch_ticks: several ticks join one batch
    (the drain no longer falls back to one tick per batch), and the tick snapshot, new
    events and dead letters are readable too."""
    role = granted(captured, logins, "drain")
    with as_role(dsn, role) as c:
        consumer = Consumer(c, "q", "delta")
        consumer.register()
        for i in range(3):
            captured.execute("insert into app.orders values (%s, 'x')", (100 + i,))
            assert consumer.tick() is not None
        assert consumer.ticks_within(1000) == 3
        assert consumer.ticks_within(1) == 1
        assert consumer.tick(only_if_new=True) is None
        captured.execute("insert into app.orders values (200, 'y')")
        assert consumer.tick(only_if_new=True) is not None
        batch = consumer.next_batch(min_count=consumer.ticks_within(1000))
        assert batch is not None
        assert len(list(batch.events())) == 4
        batch.dead(next(iter(batch.events())).ev_id, "test")
        batch.finish()
        assert consumer.position() == batch.tick_id
        assert c.execute(
            "select cdc.get_tick_snapshot('q', %s) is not null", (batch.tick_id,)
        ).fetchone()[0]
        assert c.execute("select * from cdc.get_dead_letter_counts('q', 'delta')").fetchall() == [
            ("app.orders", 1)
        ]


# ---------------------------------------------------------------------- verify's point


def _point(dsn: str, role: str) -> tuple[int, psycopg.Connection]:
    """What verify does: A (REPEATABLE READ) exports its snapshot and ticks with it; B
    imports it; A commits."""
    a = psycopg.connect(make_conninfo(dsn, user=role))
    a.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    b = psycopg.connect(make_conninfo(dsn, user=role))
    b.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    exported = a.execute("select pg_export_snapshot()").fetchone()[0]
    tick_id = a.execute("select cdc.tick_at_snapshot('q')").fetchone()[0]
    b.execute(sql.SQL("set transaction snapshot {}").format(sql.Literal(exported)))
    a.commit()
    a.close()
    return tick_id, b


def test_tick_at_snapshot_sees_what_the_snapshot_sees(
    captured: psycopg.Connection, logins: LoginRoles, dsn: str, connect
) -> None:
    """With a transaction open across the point (committed after it), the rows the imported
    snapshot sees are exactly those whose events are in the batches up to the tick; no lock
    on the table, no privilege but `--as verify`."""
    role = granted(captured, logins, "verify")
    with as_role(dsn, role) as c:
        Consumer(c, "q", "delta").register()
    writer = connect(autocommit=False)
    writer.execute("insert into app.orders values (10, 'late')")  # open across the point
    captured.execute("insert into app.orders values (11, 'early')")
    tick_id, snap = _point(dsn, role)
    writer.commit()
    captured.execute("insert into app.orders values (12, 'after')")
    seen = {r[0] for r in snap.execute("select id from app.orders")}
    snap.close()
    with as_role(dsn, role) as c:
        consumer = Consumer(c, "q", "delta")
        batch = consumer.next_batch()
        assert batch is not None and batch.tick_id == tick_id
        in_batch = {e.ev_data for e in batch.events()}
        batch.finish()
        consumer.tick()
        later = consumer.next_batch()
        assert later is not None
        after = {e.ev_data for e in later.events()}
    assert seen == {1, 2, 3, 11}
    assert len(in_batch) == 1 and '"id":11' in next(iter(in_batch))
    assert sorted('"id":10' in d or '"id":12' in d for d in after) == [True, True]


def test_tick_at_snapshot_refuses_a_snapshot_older_than_the_last_tick(
    captured: psycopg.Connection, logins: LoginRoles, dsn: str
) -> None:
    """A tick committed after the snapshot was taken: serialization_failure, and the tick
    order stays intact; outside REPEATABLE READ: WrongIsolation."""
    role = granted(captured, logins, "verify")
    a = as_role(dsn, role)
    a.autocommit = False
    a.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    a.execute("select pg_export_snapshot()")
    Queue(captured, "q").force_tick()
    assert Queue(captured, "q").tick() is not None
    with pytest.raises(psycopg.errors.SerializationFailure):
        a.execute("select cdc.tick_at_snapshot('q')")
    a.rollback()
    a.autocommit = True
    a.isolation_level = None
    with pytest.raises(errors.WrongIsolation):
        try:
            a.execute("select cdc.tick_at_snapshot('q')")
        except psycopg.Error as exc:
            raise errors.translate(exc) from exc
    a.close()


# ---------------------------------------------------------------------- a second database


@pytest.fixture
def second_owner_db(admin_dsn: str, template_dsn: str) -> Iterator[str]:
    """A database owned by a LOGIN CREATEDB CREATEROLE role, not superuser, that did not
    create the cdc_* roles (the template's install by the superuser did): a managed
    server's second database with another owner."""
    owner = f"t_owner2_{uuid.uuid4().hex[:10]}"
    dbname = f"cdc_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_dsn, autocommit=True) as c:
        c.execute(sql.SQL("create role {} login createdb createrole").format(sql.Identifier(owner)))
    try:
        with psycopg.connect(make_conninfo(admin_dsn, user=owner), autocommit=True) as c:
            c.execute(sql.SQL("create database {}").format(sql.Identifier(dbname)))
        yield make_conninfo(admin_dsn, user=owner, dbname=dbname)
    finally:
        drop_database(admin_dsn, dbname)
        with psycopg.connect(admin_dsn, autocommit=True) as c:
            c.execute(sql.SQL("drop owned by {}").format(sql.Identifier(owner)))
            c.execute(sql.SQL("drop role {}").format(sql.Identifier(owner)))


def test_second_database_owner_installs_and_grants_a_drain_role(
    second_owner_db: str, admin_dsn: str, server_version: int, caplog: pytest.LogCaptureFixture
) -> None:
    """The install succeeds (with a notice when this owner may not grant the cluster's roles:
    PostgreSQL 16 and later); `cdc grant --as drain` then gives the drain role the reader's
    functions directly, and the role lacks nothing."""
    with caplog.at_level(logging.INFO, logger="cdc.pg.install"):
        install.install(second_owner_db)
    notices = [r.getMessage() for r in caplog.records if "may not grant it" in r.getMessage()]
    assert len(notices) == (3 if server_version >= 160000 else 0)
    drain_role = f"t_drain_{uuid.uuid4().hex[:10]}"
    as_admin = make_conninfo(
        admin_dsn, dbname=psycopg.conninfo.conninfo_to_dict(second_owner_db)["dbname"]
    )
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("create role {} login").format(sql.Identifier(drain_role)))
    try:
        with psycopg.connect(second_owner_db, autocommit=True) as owner:
            Queue(owner, "q").create()
            owner.execute("create table t (id int primary key)")
            capture.attach(owner, "public.t", CaptureOptions(queue="q"))
            statements, notes = roles.grant_statements(owner, drain_role, "drain")
            texts = [s.as_string(owner) for s in statements]
            if server_version >= 160000:
                assert 'grant "cdc_reader" to' not in " ".join(texts)
                assert any("may not grant role cdc_reader" in n for n in notes)
                assert any(
                    t.startswith("grant execute on function cdc.next_batch_ticks(") for t in texts
                )
            roles.run(owner, statements)
        with as_role(second_owner_db, drain_role) as c:
            assert privileges.missing(c, "drain", [("public", "t")]) == ([], [], [])
            assert Consumer(c, "q", "delta").register()
    finally:
        with psycopg.connect(as_admin, autocommit=True) as admin:
            admin.execute(sql.SQL("drop owned by {}").format(sql.Identifier(drain_role)))
            admin.execute(sql.SQL("drop role {}").format(sql.Identifier(drain_role)))


# ---------------------------------------------------------------------- checks before work


def test_check_names_the_missing_grant_and_the_command(
    captured: psycopg.Connection, logins: LoginRoles
) -> None:
    """One line: the role, what it lacks, and the `cdc grant` that fixes it."""
    plain = logins.connect(None)
    with pytest.raises(privileges.MissingPrivilege) as caught:
        privileges.check(plain, "snapshot", [("app", "orders")])
    message = str(caught.value)
    assert "\n" not in message
    assert f"role {plain.info.user} may not run `cdc snapshot`" in message
    assert "EXECUTE on cdc." in message and "SELECT on app.orders" in message
    assert f"cdc grant {plain.info.user} --as drain --tables app.orders" in message


def test_check_says_to_upgrade_an_older_install(
    captured: psycopg.Connection,
) -> None:
    """A function the package needs is missing: run `cdc install` to upgrade."""
    captured.execute("drop function cdc.next_batch_ticks(text, text, bigint)")
    with pytest.raises(privileges.MissingPrivilege, match=r"run `cdc install --dsn \.\.\.`"):
        privileges.check(captured, "drain", [])
    install.install(captured.info.dsn)
    privileges.check(captured, "drain", [])


def test_cli_status_as_an_ungranted_role_exits_could_not_run(
    captured: psycopg.Connection,
    logins: LoginRoles,
    dsn: str,
    tmp_path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`cdc status` and `cdc drain` as a role without the grants: exit COULD_NOT_RUN with the
    one-line message, before any work (the drain's Spark session is never asked for)."""
    from cdc import spark as spark_module

    def no_spark(*args: object, **kwargs: object) -> None:
        raise AssertionError("Spark was started before the privilege check")

    monkeypatch.setattr(spark_module, "pipeline_session", no_spark)
    member = logins.connect("cdc_writer").info.user
    path = tmp_path / "pipeline.toml"
    path.write_text(
        "[source]\n"
        f"dsn = {make_conninfo(dsn, user=member)!r}\n"
        'queue = "q"\nconsumer = "delta"\n'
        f"[target]\npath = {str(tmp_path / 'delta')!r}\n"
        '[[tables]]\nsource = "app.orders"\n'
    )
    for command in ("status", "drain"):
        code = cli.main([command, "--config", str(path)])
        err = capsys.readouterr().err
        assert code == exitcodes.COULD_NOT_RUN, err
        fix = f"cdc grant {member} --as drain" + (
            " --tables app.orders" if command == "drain" else ""
        )
        assert f"may not run `cdc {command}`" in err and fix in err
        assert len(err.strip().splitlines()) == 1


def test_check_refuses_a_consumer_of_another_role(
    captured: psycopg.Connection, logins: LoginRoles, dsn: str
) -> None:
    """Verify as its own role, on a consumer the drain's role registered: refused before it
    starts, naming the grant; a member of the drain's role passes."""
    drainer = granted(captured, logins, "drain")
    verifier = granted(captured, logins, "verify")
    with as_role(dsn, drainer) as c:
        Consumer(c, "q", "delta").register()
    tables = [("app", "orders")]
    with as_role(dsn, verifier) as c:
        with pytest.raises(privileges.MissingPrivilege) as caught:
            privileges.check(c, "verify", tables, consumer=("q", "delta"))
        assert f"it belongs to role {drainer}" in str(caught.value)
        # the statement it names (names quoted) is the one that lets the role through
        fix = str(caught.value).rsplit(" run: ", 1)[1]
        assert fix == f'grant "{drainer}" to "{verifier}"'
        captured.execute(fix)
        privileges.check(c, "verify", tables, consumer=("q", "delta"))
        privileges.check(c, "verify", tables, consumer=("q", "not_registered"))


@pytest.mark.parametrize(("kind", "group"), [("writer", "cdc_writer"), ("admin", "cdc_admin")])
def test_writer_and_admin_sets_are_their_group_alone(
    captured: psycopg.Connection, kind: str, group: str
) -> None:
    """No table privilege for a producer or an administrator; --tables is refused there."""
    statements, _ = roles.grant_statements(captured, "cdc_reader", kind)
    assert [s.as_string(captured) for s in statements] == [f'grant "{group}" to "cdc_reader"']
    with pytest.raises(errors.ConfigError, match="--tables and --queue are for --as drain"):
        roles.grant_statements(captured, "cdc_reader", kind, ["app.orders"])


def test_verify_point_needs_no_lock_and_gets_past_a_rolled_back_tick(
    captured: psycopg.Connection, logins: LoginRoles, dsn: str, tmp_path
) -> None:
    """Verify's consistent point as a `--as verify` role (no UPDATE on the table), with a
    writer holding a row lock on the table all along, after a tick that was rolled back (the
    tick sequence moved with no tick to show for it): the first try is refused, an ordinary
    tick follows, the next try makes the point; the snapshot sees the committed rows."""
    from cdc.pipeline.verify import Verifier

    role = granted(captured, logins, "verify")
    with as_role(dsn, role) as c:
        Consumer(c, "q", "delta").register()
    ticks = "select count(*) from cdc.tick t join cdc.queue q on q.queue_id = t.tick_queue"
    before = captured.execute(ticks).fetchone()[0]
    with psycopg.connect(dsn) as ticker:  # a tick, rolled back
        ticker.execute("select cdc.force_tick('q')")
        assert ticker.execute("select cdc.ticker('q')").fetchone()[0] is not None
        ticker.rollback()
    with psycopg.connect(dsn) as writer:
        writer.execute("update app.orders set v = 'locked' where id = 1")  # holds ROW EXCLUSIVE
        pipe = drainkit.pipeline(
            make_conninfo(dsn, user=role), str(tmp_path), [{"source": "app.orders"}]
        )
        verifier = Verifier(pipe, None)  # type: ignore[arg-type]  # the point needs no Spark
        tick_id, snapshot = verifier._consistent_point(list(pipe.tables))
        try:
            assert sorted(r[0] for r in snapshot.execute("select v from app.orders")) == [
                "v1",
                "v2",
                "v3",
            ]
        finally:
            snapshot.close()
        writer.rollback()
    last = captured.execute("select max(tick_id) from cdc.tick").fetchone()[0]
    assert tick_id == last
    assert captured.execute(ticks).fetchone()[0] == before + 2  # the ordinary tick, then T


def test_check_says_to_install_where_cdc_is_missing(empty_dsn: str) -> None:
    """No cdc schema at all: NotInstalled, saying to run `cdc install`."""
    with psycopg.connect(empty_dsn) as c, pytest.raises(errors.NotInstalled, match="cdc install"):
        privileges.check(c, "drain", [])
