"""The sessions that read source rows (a snapshot's chunks, verify's source pass) as the role
`cdc grant --as drain` sets up, over tables a role that may only create tables owns: a
table whose row-level security applies is refused with the fix, never copied in part, and
no code of the owner's (a policy, a trigger, a column default, an index expression, a cast
to text, an operator on its type) runs in them. `cdc grant` says which tables have
row-level security."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from cdc import cli, failures
from cdc.pg import capture, pgtypes, reading
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Queue
from cdc.pipeline import chunks, compare, snapshot_job
from tests.support import drainkit
from tests.support.roles import LoginRoles

# The table owner's code: every function below goes through app.note, which raises when any
# role but the owner runs it (a reading session is read-only: an error is what shows).
OWNER_CODE = """
create function app.note(what text) returns boolean language plpgsql stable as $$
begin
    if current_user <> {owner} then
        raise exception 'code of the table owner ran as %: %', current_user, what;
    end if;
    return true;
end $$;
create function app.visible(id int) returns boolean language sql
    as $$ select app.note('policy') and id > 15 $$;
create function app.fill() returns int language sql as $$ select 7 where app.note('default') $$;
create function app.fired() returns trigger language plpgsql as $$
begin
    perform app.note('trigger ' || tg_op);
    return coalesce(new, old);
end $$;
create function app.index_key(v int) returns int language plpgsql immutable as $$
begin
    perform app.note('index expression');
    return v;
end $$;
create type app.mood as enum ('calm', 'cross', 'glad', 'sad');
create type app.tone as enum ('low', 'high');
create function app.tone_text(app.tone) returns text language sql
    as $$ select 'X' where app.note('cast') $$;
create cast (app.tone as text) with function app.tone_text(app.tone);
create function app.mood_after(app.mood, app.mood) returns boolean language sql
    as $$ select app.note('operator') $$;
create operator public.> (leftarg = app.mood, rightarg = app.mood, function = app.mood_after);

create table app.secret (id int primary key, v text);
insert into app.secret select g, 'v' || g from generate_series(1, 20) g;
alter table app.secret enable row level security;
alter table app.secret force row level security;
create policy only_some on app.secret using (app.visible(id));

create table app.plain (
    k app.mood primary key, t app.tone default 'high', v int default app.fill(), w int
);
create index on app.plain (app.index_key(w));
create trigger fired before insert or update or delete on app.plain
    for each row execute function app.fired();
create trigger fired_truncate before truncate on app.plain
    for each statement execute function app.fired();
insert into app.plain (k, w) select m, 1 from unnest(enum_range(null::app.mood)) m;
"""


@dataclass
class Roles:
    owner: psycopg.Connection  # may only create tables (and types, functions) in app, public
    drain: psycopg.Connection  # cdc_reader member, SELECT on the tables: cdc grant --as drain
    dsn: str

    def as_role(self, role: psycopg.Connection) -> str:
        return make_conninfo(self.dsn, user=role.info.user)


@pytest.fixture
def roles(admin_dsn: str, dsn: str, conn: psycopg.Connection) -> Iterator[Roles]:
    """app.secret (forced row-level security, a policy calling its owner's function) and
    app.plain (an enum key with its owner's `>` operator, an enum column with its owner's
    cast to text, a default, a trigger, an index expression), both captured into q, owned by
    a role that may only create objects in schemas app and public; a drain role given what
    cdc grant gives."""
    login = LoginRoles(admin_dsn, dsn)
    owner = login.connect(None)
    drain = login.connect("cdc_reader")
    name = sql.Identifier(owner.info.user)
    conn.execute(sql.SQL("create schema app authorization {}").format(name))
    conn.execute(sql.SQL("grant create on schema public to {}").format(name))
    owner.execute(sql.SQL(OWNER_CODE).format(owner=sql.Literal(owner.info.user)))
    Queue(conn, "q").create()
    for table in ("app.secret", "app.plain"):
        capture.attach(conn, table, CaptureOptions(queue="q"))
    grant = ["grant", drain.info.user, "--as", "drain", "--queue", "q", "--dsn", dsn]
    assert cli.main(grant) == 0
    yield Roles(owner, drain, dsn)
    conn.execute("drop schema app cascade")  # with the capture functions that name its types
    login.cleanup()


def test_a_chunk_refuses_a_table_under_row_level_security(
    roles: Roles, conn: psycopg.Connection
) -> None:
    """A snapshot chunk of app.secret as the drain role raises RowSecurityRefused naming the
    table, its policy and the fix, before reading a row; given BYPASSRLS (the fix), it copies
    all 20 rows. The policy's function never runs."""
    dsn = roles.as_role(roles.drain)
    with pytest.raises(reading.RowSecurityRefused) as refused:
        chunks.ChunkReader(dsn, "app", "secret", "q", False)
    message = str(refused.value)
    assert '"app"."secret"' in message and "only_some" in message
    assert "row-level security" in message and "bypassrls" in message
    role = sql.Identifier(roles.drain.info.user)
    conn.execute(sql.SQL("alter role {} bypassrls").format(role))
    with chunks.ChunkReader(dsn, "app", "secret", "q", False) as reader:
        data = reader.read_arrow(None, reader.plan(None, 100))
    assert data is not None and data.num_rows == 20


def test_a_refusal_is_a_failure_of_that_table_only(roles: Roles, tmp_path: Path) -> None:
    """Both refusals, the reading sessions' own and PostgreSQL's under row_security = off
    (a session that did not check first, as a JDBC partition), count as a failure of the
    table (its snapshot fails, the drain and the other tables go on), with the fix."""
    pipe = drainkit.pipeline(roles.dsn, str(tmp_path), [{"source": "app.secret"}])
    with pytest.raises(reading.RowSecurityRefused) as refused:
        chunks.ChunkReader(roles.as_role(roles.drain), "app", "secret", "q", False)
    with psycopg.connect(roles.as_role(roles.drain)) as session:
        session.execute("set row_security = off")
        with pytest.raises(psycopg.errors.InsufficientPrivilege) as postgres:
            session.execute("select * from app.secret")
    for exc in (refused.value, postgres.value):
        failure = snapshot_job.failure_of(exc, pipe, "app.secret")
        assert failure.kind == failures.TABLE
        assert "app" in failure.message and "BYPASSRLS" in failure.message.upper()


def test_the_owner_is_refused_its_own_forced_table(roles: Roles) -> None:
    """The table's owner reading its table with FORCE ROW LEVEL SECURITY is refused too, and
    told it may turn FORCE off."""
    with pytest.raises(reading.RowSecurityRefused, match="no force row level security"):
        chunks.ChunkReader(roles.as_role(roles.owner), "app", "secret", None, False)


def test_no_code_of_the_owner_runs_in_a_reading_session(roles: Roles) -> None:
    """Reading app.plain as the drain role, in chunks after a key (the key comparison) and
    as verify's source pass, gives the enum's own text, and none of the owner's functions
    (cast, operator, default, trigger, index expression) ran."""
    dsn = roles.as_role(roles.drain)
    with chunks.ChunkReader(dsn, "app", "plain", "q", False) as reader:
        assert reader.estimate() == 4
        first = reader.plan(None, 1)
        rest = reader.plan(first.last_key, 10)
        data = reader.read_arrow(first.last_key, rest)
        _, again = reader.read_next_arrow(first.last_key, 10)
    assert first.last_key == ("calm",)
    assert data is not None and again is not None
    assert data.to_pydict() == {
        "k": ["cross", "glad", "sad"],
        "t": ["high"] * 3,
        "v": ["7"] * 3,
        "w": ["1"] * 3,
    }
    assert again.to_pydict() == data.to_pydict()
    with psycopg.connect(dsn) as verify:
        reading.prepare(verify)
        reading.check(verify, "app", "plain")
        cols = pgtypes.keyed_columns(verify, "app", "plain", "q", registry_required=True)
        by_output = reading.text_by_output(verify, "app", "plain")
        rows = verify.execute(compare.source_query("app", "plain", cols, by_output)).fetchall()
    assert rows == [(k, "high", 7, 1) for k in ("calm", "cross", "glad", "sad")]


def test_grant_says_which_tables_have_row_level_security(
    roles: Roles, conn: psycopg.Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    """cdc grant --as drain names app.secret's row-level security, that it applies to the
    role, and the fix; once the role has BYPASSRLS, that it bypasses it; never app.plain."""
    role = roles.drain.info.user
    argv = ["grant", role, "--as", "drain", "--queue", "q", "--dsn", roles.dsn, "--print"]
    capsys.readouterr()
    assert cli.main(argv) == 0
    err = capsys.readouterr().err
    assert f"app.secret has row-level security that applies to role {role}" in err
    assert "only_some" in err and "bypassrls" in err
    assert "plain" not in err
    conn.execute(sql.SQL("alter role {} bypassrls").format(sql.Identifier(role)))
    assert cli.main(argv) == 0
    err = capsys.readouterr().err
    assert f"role {role} bypasses it" in err
