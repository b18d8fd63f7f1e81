"""Capture rules: `cdc attach 'schema.*'`, cdc.sync_captures, and the event trigger that
captures tables created later (triggers/capture/functions/cdc.capture_rules.sql)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from cdc import cli, errors, globs
from cdc.pg import capture, capture_rules, install
from cdc.pg.capture import CaptureOptions
from cdc.pg.capture_rules import SyncRow
from cdc.pg.queue import Queue
from tests.pg.test_install import owned_db  # noqa: F401  (a fixture)
from tests.support.roles import LoginRoles

NO_KEY = "no primary key and no usable unique index: add one, or attach it with pkey=..."


@pytest.fixture
def db(conn: psycopg.Connection) -> psycopg.Connection:
    """A database with queue q."""
    Queue(conn, "q").create()
    return conn


@pytest.fixture
def roles(admin_dsn: str, dsn: str) -> Iterator[LoginRoles]:
    """Login roles on the test's database, dropped afterwards."""
    made = LoginRoles(admin_dsn, dsn)
    yield made
    made.cleanup()


def captured(conn: psycopg.Connection) -> list[tuple[str, str, dict[str, object]]]:
    """(table, queue, options) of every capture."""
    return conn.execute(
        "select cap_table::regclass::text, cap_queue, cap_options from cdc.capture order by 1, 2"
    ).fetchall()


def actions(rows: list[SyncRow]) -> dict[str, tuple[str, str | None]]:
    return {r.table: (r.action, r.reason) for r in rows}


def events(conn: psycopg.Connection) -> list[tuple[str, str, str | None]]:
    return conn.execute(
        "select ev_type, ev_data, ev_extra1 from cdc.event order by ev_id"
    ).fetchall()


def warnings_of(conn: psycopg.Connection) -> list[str]:
    """Collects the WARNING messages the server sends this connection from now on."""
    seen: list[str] = []
    conn.add_notice_handler(
        lambda d: (
            seen.append(d.message_primary or "") if d.severity_nonlocalized == "WARNING" else None
        )
    )
    return seen


def call(conn: psycopg.Connection, query: str, params: object = None) -> list[tuple[object, ...]]:
    """A query whose engine errors arrive typed (cdc.errors)."""
    try:
        return conn.execute(query, params).fetchall()
    except psycopg.Error as exc:
        raise errors.translate(exc) from exc


def run_cli(capsys: pytest.CaptureFixture[str], dsn: str, *argv: str) -> tuple[int, str, str]:
    code = cli.main([*argv, "--dsn", dsn])
    out = capsys.readouterr()
    return code, out.out, out.err


# ---------------------------------------------------------------------- rule + sync


def test_rule_attaches_matching_tables_and_lists_the_keyless(db):
    """A rule over public.* attaches the tables with a key, skips the keyless one with the
    reason, and leaves excluded tables and other schemas alone."""
    db.execute(
        "create table a (id int primary key); create table b (id int primary key);"
        " create table audit_x (id int primary key); create table nokey (v text);"
        " create schema other; create table other.c (id int primary key)"
    )
    result = capture_rules.add(db, "public.*", CaptureOptions(queue="q"), ("audit_*",))
    assert actions(result.rows) == {
        "public.a": ("attached", None),
        "public.b": ("attached", None),
        "public.nokey": ("skipped", NO_KEY),
    }
    assert [c[0] for c in captured(db)] == ["a", "b"]
    db.execute("insert into a values (1)")
    assert events(db)[-1][2] == "public.a"


def test_sync_reports_captured_tables_and_is_idempotent(db):
    """A second sync attaches nothing again: the tables show as already captured."""
    db.execute("create table a (id int primary key)")
    capture_rules.add(db, "public.*", CaptureOptions(queue="q"))
    assert actions(capture_rules.sync(db, "q")) == {"public.a": ("captured", None)}
    assert len(captured(db)) == 1


def test_sync_picks_up_a_table_created_without_the_event_trigger(db):
    """With the event trigger disabled, a new table is captured by the next sync."""
    capture_rules.add(db, "public.*", CaptureOptions(queue="q"))
    db.execute("alter event trigger cdc_capture_rules disable")
    db.execute("create table late (id int primary key)")
    assert captured(db) == []
    assert actions(capture_rules.sync(db, None)) == {"public.late": ("attached", None)}


def test_rule_options_reach_each_table(db):
    """The rule's format and options are those of every table it attaches."""
    db.execute("create table a (id int primary key, secret text, n int)")
    opts = CaptureOptions(queue="q", format="urlenc", ignore=("secret",), when="n > 0")
    capture_rules.add(db, "public.a*", opts)
    db.execute("insert into a values (1, 's', 0), (2, 's', 5)")
    assert [(e[0], e[1]) for e in events(db)] == [("I:id", "id=2&n=5")]


def test_an_expression_a_table_cannot_take_skips_that_table_only(db):
    """An option expression naming a column one table lacks skips that table with the
    server's reason; the others are attached."""
    db.execute("create table a (id int primary key, n int); create table b (id int primary key)")
    result = capture_rules.add(db, "public.*", CaptureOptions(queue="q", when="n > 0"))
    rows = actions(result.rows)
    assert rows["public.a"] == ("attached", None)
    assert rows["public.b"][0] == "skipped" and "no longer fits the table" in rows["public.b"][1]


def test_refused_expression_is_refused_when_the_rule_is_added(db):
    """An expression the capture refuses (a subquery) stores no rule."""
    with pytest.raises(errors.ExpressionRefused):
        call(
            db,
            "select cdc.add_capture_rule('public', '*', 'q', %s::jsonb)",
            (json.dumps({"format": "json", "when": "(select true)"}),),
        )
    assert db.execute("select count(*) from cdc.capture_rule").fetchone() == (0,)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"format": "xml"}, "format"),
        ({"colour": "red"}, "is not a capture option"),
        ({"ignore": "a"}, "array of column names"),
        ({"skip": True, "deny": True}, "exclude each other"),
    ],
)
def test_bad_rule_options_store_nothing(db, options, message):
    """Options cdc.attach would refuse are refused when the rule is added."""
    with pytest.raises(psycopg.Error, match=message):
        db.execute(
            "select cdc.add_capture_rule('public', '*', 'q', %s::jsonb)", (json.dumps(options),)
        )


def test_rule_for_an_unknown_queue_is_refused(db):
    """A rule's queue must exist (QC001)."""
    with pytest.raises(errors.QueueNotFound):
        capture_rules.add(db, "public.*", CaptureOptions(queue="nope"))


@pytest.mark.parametrize("exclude", ["a..b", '"open', "a.b.c", ""])
def test_malformed_exclude_is_refused(db, exclude):
    """An exclude that is not SCHEMA.TABLE or TABLE is refused, by the CLI and by the server."""
    with pytest.raises(errors.ConfigError):
        globs.split(exclude, default_schema=None)
    with pytest.raises(errors.InvalidArgument):
        call(db, "select cdc.add_capture_rule('public', '*', 'q', '{}'::jsonb, %s)", ([exclude],))


def test_adding_the_same_rule_again_replaces_it(db):
    """The same globs and queue again: one rule, with the new excludes."""
    first = capture_rules.add(db, "public.*", CaptureOptions(queue="q"))
    second = capture_rules.add(db, "public.*", CaptureOptions(queue="q"), ("x*",))
    assert first.rule_id == second.rule_id
    assert [(r["rule_id"], r["exclude"]) for r in capture_rules.rules(db)] == [
        (first.rule_id, ["x*"])
    ]


def test_dropping_the_queue_removes_its_rules(db):
    """A queue dropped takes its rules with it."""
    capture_rules.add(db, "public.*", CaptureOptions(queue="q"))
    Queue(db, "q").drop()
    assert capture_rules.rules(db) == []


# ---------------------------------------------------------------------- keys


def test_unique_index_on_not_null_columns_is_the_key(db):
    """A table without a primary key is keyed by its usable unique index, recorded as pkey;
    partial, nullable or expression indexes do not count."""
    db.execute(
        "create table u (a int not null, b int not null, v text);"
        " create unique index u_b on u (b) where b > 0;"
        " create unique index u_lower on u (lower(v));"
        " create unique index u_ab on u (b, a);"
        " create table n (a int, v text unique)"
    )
    rows = actions(capture_rules.add(db, "public.*", CaptureOptions(queue="q")).rows)
    assert rows == {"public.n": ("skipped", NO_KEY), "public.u": ("attached", None)}
    assert captured(db)[0][2]["pkey"] == ["b", "a"]
    db.execute("insert into u values (1, 2, 'x')")
    assert json.loads(events(db)[-1][0])["pkey"] == ["b", "a"]


def test_plain_attach_uses_the_unique_index(db):
    """cdc attach of a table with only a usable unique index works, keyed by it."""
    db.execute("create table u (a int not null unique, v text)")
    capture.attach(db, "public.u", CaptureOptions(queue="q"))
    assert captured(db)[0][2] == {"format": "json", "pkey": ["a"]}


def test_primary_key_wins_over_unique_index(db):
    """A table with a primary key is captured by it, as before: no pkey is recorded."""
    db.execute("create table t (id int primary key, a int not null unique)")
    capture.attach(db, "public.t", CaptureOptions(queue="q"))
    assert captured(db)[0][2] == {"format": "json"}


# ---------------------------------------------------------------------- who


def test_rule_never_captures_a_table_its_owner_does_not_own(db, roles):
    """A cdc_admin member's rule attaches its own tables and skips a table of another role,
    naming both roles; the event trigger does the same for a table created later."""
    admin = roles.connect("cdc_admin")
    db.execute(
        sql.SQL("grant create on schema public to {}").format(sql.Identifier(admin.info.user))
    )
    admin.execute("create table mine (id int primary key)")
    db.execute("create table theirs (id int primary key)")
    rows = actions(capture_rules.add(admin, "public.*", CaptureOptions(queue="q")).rows)
    assert rows["public.mine"] == ("attached", None)
    action, reason = rows["public.theirs"]
    assert action == "skipped" and admin.info.user in reason and "is not a member of" in reason
    seen = warnings_of(db)
    db.execute("create table later (id int primary key)")
    assert [c[0] for c in captured(db)] == ["mine"]
    assert any("later" in w and "is not a member of" in w for w in seen)


def test_rule_owner_no_longer_admin_attaches_nothing(db, roles):
    """A rule whose owner left cdc_admin attaches nothing and says why."""
    admin = roles.connect("cdc_admin")
    db.execute(
        sql.SQL("grant create on schema public to {}").format(sql.Identifier(admin.info.user))
    )
    capture_rules.add(admin, "public.*", CaptureOptions(queue="q"))
    db.execute(sql.SQL("revoke cdc_admin from {}").format(sql.Identifier(admin.info.user)))
    admin.execute("create table mine (id int primary key)")
    assert captured(db) == []
    (row,) = capture_rules.sync(db, "q")
    assert row.action == "skipped" and "may no longer run cdc.attach" in (row.reason or "")


def test_only_the_owner_or_a_superuser_removes_a_rule(db, roles):
    """Another cdc_admin member may not remove a rule (QC025); its owner may."""
    owner = roles.connect("cdc_admin")
    other = roles.connect("cdc_admin")
    rule = capture_rules.add(owner, "public.*", CaptureOptions(queue="q")).rule_id
    assert rule is not None
    with pytest.raises(errors.NotTableOwner):
        capture_rules.remove(other, rule)
    capture_rules.remove(owner, rule)
    assert capture_rules.rules(db) == []
    with pytest.raises(errors.NotCaptured):
        capture_rules.remove(db, rule)


def test_plain_role_cannot_add_a_rule(db, roles):
    """Without cdc_admin, adding a rule is refused by the privileges."""
    plain = roles.connect(None)
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        plain.execute("select cdc.add_capture_rule('public', '*', 'q', '{}'::jsonb)")


# ---------------------------------------------------------------------- the event trigger


def test_table_created_later_is_captured_in_its_transaction(db):
    """CREATE TABLE matching a rule gets its triggers at once: its first insert is an event;
    an empty table gets no snapshot signal."""
    capture_rules.add(db, "public.*", CaptureOptions(queue="q"))
    db.execute("create table later (id int primary key, v text)")
    db.execute("insert into later values (1, 'x')")
    assert [(e[1], e[2]) for e in events(db)] == [('{"id":1,"v":"x"}', "public.later")]


def test_create_table_as_with_rows_sends_the_snapshot_signal(db):
    """CREATE TABLE AS with rows, then a key: the table is captured and a cdc.snapshot event
    asks the drain for the rows that predate the triggers."""
    capture_rules.add(db, "public.*", CaptureOptions(queue="q"))
    with db.transaction():
        db.execute("create table copy as select g as id from generate_series(1, 3) g")
        db.execute("alter table copy add primary key (id)")
    assert events(db) == [("cdc.snapshot", '{"table": "public.copy"}', "public.copy")]
    assert [c[0] for c in captured(db)] == ["copy"]


def test_select_into_with_a_unique_key_is_captured(db):
    """SELECT INTO is a CREATE TABLE too."""
    capture_rules.add(db, "public.*", CaptureOptions(queue="q"))
    db.execute("select 1 as id into fresh")
    assert captured(db) == []  # no key yet
    db.execute("alter table fresh alter id set not null, add constraint fresh_id unique (id)")
    assert captured(db) == [("fresh", "q", {"format": "json", "pkey": ["id"]})]
    assert events(db)[0][0] == "cdc.snapshot"


def test_keyless_create_table_succeeds_with_a_warning(db):
    """A keyless CREATE TABLE matching a rule succeeds; a warning names the table and
    `cdc attach --sync`; nothing is attached."""
    capture_rules.add(db, "public.*", CaptureOptions(queue="q"))
    seen = warnings_of(db)
    db.execute("create table loose (v text)")
    assert captured(db) == []
    assert len(seen) == 1 and "loose" in seen[0] and "no primary key" in seen[0]
    assert db.execute("select count(*) from loose").fetchone() == (0,)


def test_a_failing_attach_never_fails_the_ddl(db):
    """A queue refusing inserts fails the snapshot signal: the CREATE TABLE AS still succeeds,
    with a warning, and no trigger is left on the table."""
    capture_rules.add(db, "public.*", CaptureOptions(queue="q"))
    Queue(db, "q").set_config("disable_insert", True)
    seen = warnings_of(db)
    db.execute("create table full_one (id int primary key)")  # empty: attached, no signal
    db.execute("create table copy (id int primary key)")
    with pytest.raises(psycopg.Error, match="inserts into queue 'q' are disabled"):
        db.execute("insert into copy values (1)")  # its capture obeys the queue, as PgQ's
    db.execute("create table rows_one as select 1 as id")
    db.execute("alter table rows_one add primary key (id)")
    assert [c[0] for c in captured(db)] == ["copy", "full_one"]
    assert any("rows_one" in w and "disabled" in w for w in seen)
    assert db.execute(
        "select count(*) from pg_trigger where tgrelid = 'rows_one'::regclass"
    ).fetchone() == (0,)


def test_table_renamed_into_a_matching_name_is_captured(db):
    """ALTER TABLE ... RENAME / SET SCHEMA into a name a rule matches captures the table."""
    db.execute("create schema staging; create table staging.t (id int primary key)")
    capture_rules.add(db, "public.live_*", CaptureOptions(queue="q"))
    db.execute("alter table staging.t set schema public")
    assert captured(db) == []
    db.execute("alter table public.t rename to live_t")
    assert [c[0] for c in captured(db)] == ["live_t"]


def test_partitions_are_covered_by_their_parent(db):
    """A rule captures a partitioned table, never its partitions; rows in a partition send
    the snapshot signal."""
    db.execute(
        "create table p (id int primary key) partition by range (id);"
        " create table p1 partition of p for values from (0) to (10);"
        " insert into p values (1)"
    )
    rows = actions(capture_rules.add(db, "public.*", CaptureOptions(queue="q")).rows)
    assert rows == {"public.p": ("attached", None)}
    db.execute("create table p2 partition of p for values from (10) to (20)")
    assert [c[0] for c in captured(db)] == ["p"]
    assert events(db) == [("cdc.snapshot", '{"table": "public.p"}', "public.p")]


def test_tables_of_cdc_itself_never_match(db):
    """A rule over every schema leaves schema cdc alone, also when a queue is created."""
    capture_rules.add(db, "*.*", CaptureOptions(queue="q"))
    Queue(db, "q2").create()
    assert captured(db) == []


# ---------------------------------------------------------------------- names


HOSTILE = ['we"ird', "a.b", "a_1", "ab1", "a%1", "A1", "(t)", "t$1", "x\\y", "ünï"]


@pytest.mark.parametrize(
    ("glob", "expected"),
    [
        ("a_*", ["a_1"]),
        ("a%*", ["a%1"]),
        ("a?1", ["a%1", "a_1", "ab1"]),
        ("a.b", ["a.b"]),
        ("A*", ["A1"]),
        ("(t)", ["(t)"]),
        ("t$1", ["t$1"]),
        ("x\\y", ["x\\y"]),
        ('we"*', ['we"ird']),
        ("ü*", ["ünï"]),
        ("*", sorted(HOSTILE)),
    ],
)
def test_globs_take_every_other_character_literally(db, glob, expected):
    """Only * and ? are wildcards: dots, quotes, %, _, regex characters and case are literal,
    in the server and in the CLI's twin."""
    db.execute('create schema "s.x"')
    for name in HOSTILE:
        db.execute(
            sql.SQL("create table {} (id int primary key)").format(sql.Identifier("s.x", name))
        )
    db.execute("alter event trigger cdc_capture_rules disable")
    rule = db.execute(
        "select cdc.add_capture_rule('s.x', %s, 'q', '{}'::jsonb)", (glob,)
    ).fetchone()[0]
    rows = db.execute(
        "select table_name from cdc.sync_capture_rule(%s, true) where action = 'would attach'",
        (rule,),
    ).fetchall()
    got = sorted(globs.split(r[0])[1] for r in rows)
    assert got == sorted(expected)
    assert sorted(n for n in HOSTILE if globs.matches(glob, n)) == sorted(expected)


def test_quoted_pattern_parts_are_taken_as_written(db, dsn, capsys):
    """`cdc attach '"s.x"."My*"'`: the quoted schema holds a dot, the table glob keeps its
    case; an exclude in the same form leaves a table out."""
    db.execute('create schema "s.x"')
    for name in ("My1", "My2", "my3"):
        db.execute(
            sql.SQL("create table {} (id int primary key)").format(sql.Identifier("s.x", name))
        )
    code, out, _ = run_cli(
        capsys, dsn, "attach", '"s.x"."My*"', "--queue", "q", "--exclude", '"s.x".My2'
    )
    assert code == 0
    assert [c[0] for c in captured(db)] == ['"s.x"."My1"']
    assert "1 attached" in out


def test_event_trigger_captures_a_hostile_name(db):
    """A table created later whose schema and name hold dots, quotes, % and _ is captured;
    its snapshot signal names it unquoted, as capture events do."""
    db.execute('create schema "s.x"')
    capture_rules.add(db, '"s.x".*', CaptureOptions(queue="q"))
    name = 'we"ird.%_'
    db.execute(sql.SQL("create table {} as select 1 as id").format(sql.Identifier("s.x", name)))
    db.execute(sql.SQL("alter table {} add primary key (id)").format(sql.Identifier("s.x", name)))
    assert [c[0] for c in captured(db)] == ['"s.x"."we""ird.%_"']
    assert events(db) == [("cdc.snapshot", json.dumps({"table": f"s.x.{name}"}), f"s.x.{name}")]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("public.*", ("public", "*")),
        ("*", ("public", "*")),
        ('"a.b"."C*"', ("a.b", "C*")),
        ('"q""x".t', ('q"x', "t")),
        ("Sch.Tab?", ("Sch", "Tab?")),
    ],
)
def test_pattern_split(text, expected):
    """Patterns split like table names; bare parts keep their case."""
    assert globs.split(text) == expected


def test_python_and_server_globs_agree(db):
    """cdc._glob_regex and globs.regex decide alike on every hostile name."""
    for glob in ("a_*", "a?1", "*.*", "(t)", "x\\y", "[ab]*", "a{1}", "^a$", "ü?ï"):
        for name in [*HOSTILE, "[ab]1", "a{1}", "^a$", "a", "aa1"]:
            server = db.execute("select %s ~ cdc._glob_regex(%s)", (name, glob)).fetchone()[0]
            assert server == globs.matches(glob, name), (glob, name)


# ---------------------------------------------------------------------- the command line


def test_cli_pattern_attach_lists_every_table(db, dsn, capsys):
    """`cdc attach 'public.*'` prints one line per table and a summary; a keyless table is a
    listing (exit 0)."""
    db.execute("create table a (id int primary key); create table nokey (v text)")
    code, out, _ = run_cli(capsys, dsn, "attach", "public.*", "--queue", "q")
    assert code == 0
    assert "attached      public.a" in out
    assert f"public.nokey  q  {NO_KEY}" in out
    assert "1 attached, 0 already captured, 1 skipped without a key" in out


def test_cli_print_changes_nothing(db, dsn, capsys):
    """--print with a pattern says what would be attached and records nothing."""
    db.execute("create table a (id int primary key)")
    code, out, _ = run_cli(capsys, dsn, "attach", "public.*", "--queue", "q", "--print")
    assert code == 0 and "would attach  public.a" in out and "no rule recorded" in out
    assert captured(db) == [] and capture_rules.rules(db) == []
    assert db.execute(
        "select count(*) from pg_trigger t join pg_class c on c.oid = t.tgrelid"
        " where not t.tgisinternal and c.relnamespace = 'public'::regnamespace"
    ).fetchone() == (0,)
    code, out, _ = run_cli(capsys, dsn, "attach", "--sync", "--print")
    assert code == 0 and captured(db) == []


def test_cli_pattern_matching_nothing_exits_1(db, dsn, capsys):
    """A pattern matching no table exits 1 and names it; the rule stays for later tables."""
    code, _, err = run_cli(capsys, dsn, "attach", "public.nothing_*", "--queue", "q")
    assert code == 1 and "public.nothing_* matched no table" in err
    db.execute("create table nothing_yet (id int primary key)")
    assert [c[0] for c in captured(db)] == ["nothing_yet"]


def test_cli_only_keyless_tables_exits_1(db, dsn, capsys):
    """A pattern whose every table is skipped attached nothing: exit 1."""
    db.execute("create table nokey (v text)")
    code, out, _ = run_cli(capsys, dsn, "attach", "public.*", "--queue", "q")
    assert code == 1 and "skipped" in out


def test_cli_sync_rules_and_detach_rule(db, dsn, capsys):
    """--sync attaches what the rules match; `cdc rules` lists them; `detach --rule` removes
    one and keeps its captures."""
    run_cli(capsys, dsn, "attach", "public.*", "--queue", "q", "--exclude", "skip_*")
    rule = capture_rules.rules(db)[0]["rule_id"]
    db.execute("alter event trigger cdc_capture_rules disable")
    db.execute("create table t (id int primary key); create table skip_me (id int primary key)")
    code, out, _ = run_cli(capsys, dsn, "attach", "--sync", "--queue", "q")
    assert code == 0 and "attached      public.t" in out and "skip_me" not in out
    code, out, _ = run_cli(capsys, dsn, "rules")
    assert code == 0 and f"{rule:>4}  public.*  q  json" in out and "exclude skip_*" in out
    code, out, _ = run_cli(capsys, dsn, "detach", "--rule", str(rule))
    assert code == 0 and capture_rules.rules(db) == [] and len(captured(db)) == 1


def test_cli_exclude_needs_a_pattern(db, dsn, capsys):
    """--exclude with a single table is an error that says so."""
    db.execute("create table a (id int primary key)")
    code, _, err = run_cli(capsys, dsn, "attach", "public.a", "--queue", "q", "--exclude", "x")
    assert code != 0 and "--exclude goes with a pattern" in err
    assert captured(db) == []


# ---------------------------------------------------------------------- install


def test_rules_survive_a_reinstall(db, dsn):
    """`cdc install` again keeps the rules, and the event trigger still applies them."""
    capture_rules.add(db, "public.*", CaptureOptions(queue="q"), ("x_*",))
    before = capture_rules.rules(db)
    install.install(dsn)
    assert capture_rules.rules(db) == before
    db.execute("create table later (id int primary key)")
    assert [c[0] for c in captured(db)] == ["later"]


def test_install_over_an_install_without_rules_adds_them(db, dsn):
    """An install from before capture rules (no table, functions or event trigger) is
    upgraded in place: rules work afterwards."""
    db.execute("drop event trigger cdc_capture_rules")
    db.execute("drop table cdc.capture_rule cascade")
    db.execute("drop function cdc.add_capture_rule, cdc.sync_captures, cdc._glob_regex")
    install.install(dsn)
    db.execute("create table a (id int primary key)")
    assert actions(capture_rules.add(db, "public.*", CaptureOptions(queue="q")).rows) == {
        "public.a": ("attached", None)
    }
    db.execute("create table later (id int primary key)")
    assert [c[0] for c in captured(db)] == ["a", "later"]


def test_without_a_superuser_new_tables_wait_for_the_sync(owned_db):  # noqa: F811
    """Installed by a database owner that is not a superuser: no event trigger, so a table
    created later is captured by the next sync, with its snapshot signal."""
    install.install(owned_db)
    with psycopg.connect(owned_db, autocommit=True) as c:
        assert c.execute("select count(*) from pg_event_trigger").fetchone() == (0,)
        Queue(c, "q").create()
        capture_rules.add(c, "public.*", CaptureOptions(queue="q"))
        c.execute("create table later (id int primary key); insert into later values (1)")
        assert captured(c) == []
        assert actions(capture_rules.sync(c, "q")) == {"public.later": ("attached", None)}
        assert events(c) == [("cdc.snapshot", '{"table": "public.later"}', "public.later")]
