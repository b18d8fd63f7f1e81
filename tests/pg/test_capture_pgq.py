"""Differential test: our generated capture triggers against PgQ 3.5's C triggers.

Two databases on one throwaway PostgreSQL 15 cluster hold the same schema and tables: in
database A PgQ's ``pgq.jsontriga`` / ``logutriga`` / ``sqltriga`` capture into queue ``q``, in
database B ``capture.attach`` does. The same random DML runs in both, and every event field
(ev_type, ev_data, ev_extra1..4) must be equal, in order. Statement outcomes (error or row
count) and the final table contents must be equal too.

PgQ writes values as the writer's session formats them; our capture pins the settings that
change value text (DateStyle, IntervalStyle, extra_float_digits, bytea_output, TimeZone) to
PostgreSQL's defaults with TimeZone UTC. So the PgQ side always runs under those defaults and
our side under the session settings each test chooses, hostile ones included: equal events
mean our payload does not depend on the writer's session.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pytest

from cdc import errors
from cdc.pg import capture, install
from cdc.pg.capture import CaptureOptions
from tests.support.databases import create_database, drop_database

TPL_PGQ = "pgq_diff_tpl_pgq"
TPL_CDC = "pgq_diff_tpl_cdc"
TRIGGER_FUNC = {"json": "jsontriga", "urlenc": "logutriga", "sql": "sqltriga"}
EVENT_COLS = ("ev_type", "ev_data", "ev_extra1", "ev_extra2", "ev_extra3", "ev_extra4")

TABLE = 's."T x"'
COMP = 's."Comp"'
NESTED = 's."N"'

# The settings our capture functions pin (cdc._cap_settings): PostgreSQL's defaults, UTC.
PGQ_DEFAULTS = {
    "DateStyle": "ISO, MDY",
    "IntervalStyle": "postgres",
    "extra_float_digits": "1",
    "bytea_output": "hex",
    "TimeZone": "UTC",
}
# Writer sessions that format values differently in every way they can.
HOSTILE_SETTINGS = {
    "sql_dmy": {
        "DateStyle": "SQL, DMY",
        "IntervalStyle": "sql_standard",
        "extra_float_digits": "0",
        "bytea_output": "escape",
        "TimeZone": "Asia/Kathmandu",
    },
    "german": {
        "DateStyle": "German",
        "IntervalStyle": "iso_8601",
        "extra_float_digits": "-15",
        "bytea_output": "escape",
        "TimeZone": "America/St_Johns",
    },
    "postgres_verbose": {
        "DateStyle": "Postgres, DMY",
        "IntervalStyle": "postgres_verbose",
        "extra_float_digits": "3",
        "bytea_output": "hex",
        "TimeZone": "Pacific/Chatham",
    },
}

SCHEMA_DDL = """
create schema s;
create type s.mood as enum ('happy', 'so sad', 'Qu''ote', 'é');
create domain s.dint as int;
create domain s.dtext as text;
create table s."T x" (
    id int primary key,
    "Mixed Case" int2,
    i4 int4,
    i8 int8,
    num numeric,
    f4 float4,
    f8 float8,
    t text,
    "order" varchar(40),
    "q""uote" char(5),
    b bool,
    d date,
    tm time,
    ttz timetz,
    ts timestamp,
    tstz timestamptz,
    iv interval,
    ba bytea,
    u uuid,
    j json,
    jb jsonb,
    ia int[],
    ta text[],
    m s.mood,
    di s.dint,
    dtx s.dtext,
    ip inet
);
create table s."Comp" (x text, b int, a int, v text, primary key (a, b));
create type s.pair as (x float8, d date);
create domain s.dpair as s.pair;
create type s.rich as (f float8, f4 float4, d date, ts timestamp, tstz timestamptz,
                       iv interval, b bytea);
create table s."N" (
    id int primary key,
    f8 float8,
    f4 float4,
    fa float8[],
    f4a float4[],
    da date[],
    tsa timestamp[],
    tza timestamptz[],
    iva interval[],
    baa bytea[],
    cp s.pair,
    dp s.dpair,
    rc s.rich,
    rca s.rich[],
    tr tstzrange,
    dr daterange,
    pt point,
    ba bytea
);
"""

# Non-key columns of s."T x" (name, SQL type) in attnum order.
COLUMNS: list[tuple[str, str]] = [
    ("Mixed Case", "int2"),
    ("i4", "int4"),
    ("i8", "int8"),
    ("num", "numeric"),
    ("f4", "float4"),
    ("f8", "float8"),
    ("t", "text"),
    ("order", "varchar(40)"),
    ('q"uote', "char(5)"),
    ("b", "bool"),
    ("d", "date"),
    ("tm", "time"),
    ("ttz", "timetz"),
    ("ts", "timestamp"),
    ("tstz", "timestamptz"),
    ("iv", "interval"),
    ("ba", "bytea"),
    ("u", "uuid"),
    ("j", "json"),
    ("jb", "jsonb"),
    ("ia", "int[]"),
    ("ta", "text[]"),
    ("m", "s.mood"),
    ("di", "s.dint"),
    ("dtx", "s.dtext"),
    ("ip", "inet"),
]

TRICKY = [
    "",
    "it's",
    'say "hi"',
    "back\\slash",
    "a'b\\c",
    "a&b=c%d+e",
    "two  spaces",
    "line1\nline2",
    "tab\there",
    "cr\rx",
    "\x01\x07\x08\x0b\x0c\x1b\x1f\x7f",
    "café",
    "日本",
    "😀",
    "\u2028\u00a0",
    "null",
    "NULL",
    "/slash/",
    "<html>",
    "~!@#$^*()_-.[]{}|:;,?`",
    "{x}",
    "a,b",
]
ALPHABET = "aZ9 '\"\\&=%+\n\t,{}é日😀_-.~/"


# ---------------------------------------------------------------------------------------------
# servers and databases


@pytest.fixture(scope="session")
def pgq_templates(pgq_admin_dsn: str) -> str:
    """Template A: pgq + queue q + tables; template B: cdc + queue q + the same tables (on the
    PgQ cluster, tests/support/pgq.py); returns the cluster's superuser DSN."""
    a = create_database(pgq_admin_dsn, TPL_PGQ)
    with psycopg.connect(a, autocommit=True) as conn:
        conn.execute("create extension pgq")
        conn.execute("select pgq.create_queue('q')")
        conn.execute(SCHEMA_DDL)
    b = create_database(pgq_admin_dsn, TPL_CDC)
    install.install(b)
    with psycopg.connect(b, autocommit=True) as conn:
        conn.execute("select cdc.create_queue('q')")
        conn.execute(SCHEMA_DDL)
    return pgq_admin_dsn


@dataclass
class Pair:
    """The PgQ database (a) and ours (b), one connection each."""

    a: psycopg.Connection
    b: psycopg.Connection
    pgq_event_table: str


def _set(conn: psycopg.Connection, settings: dict[str, str]) -> None:
    for name, value in settings.items():
        conn.execute("select pg_catalog.set_config(%s, %s, false)", (name, value))


@pytest.fixture
def pair_factory(pgq_templates: str) -> Iterator[Callable[..., Pair]]:
    """Opens fresh clones of both templates: PgQ's under PgQ_DEFAULTS, ours under those
    changed by the given session settings."""
    names: list[str] = []
    conns: list[psycopg.Connection] = []

    def _make(settings: dict[str, str] | None = None) -> Pair:
        tag = uuid.uuid4().hex[:10]
        dsns = []
        for tpl in (TPL_PGQ, TPL_CDC):
            name = f"{tpl}_{tag}"
            names.append(name)
            dsns.append(create_database(pgq_templates, name, template=tpl))
        a, b = (psycopg.connect(d, autocommit=True) for d in dsns)
        conns.extend((a, b))
        _set(a, PGQ_DEFAULTS)
        _set(b, PGQ_DEFAULTS | (settings or {}))
        qid = a.execute("select queue_id from pgq.queue where queue_name = 'q'").fetchone()
        assert qid is not None
        return Pair(a, b, f"pgq.event_{qid[0]}")

    yield _make
    for c in conns:
        c.close()
    for n in names:
        drop_database(pgq_templates, n)


# ---------------------------------------------------------------------------------------------
# options: PgQ trigger arguments and our CaptureOptions side by side


@dataclass(frozen=True)
class OptionSet:
    """One capture configuration, written both ways: PgQ trigger arguments, and the keyword
    arguments of our CaptureOptions (queue and format come per test)."""

    name: str
    pgq_args: tuple[str, ...] = ()
    ours: dict[str, Any] = field(default_factory=dict)
    frozen: tuple[str, ...] = ()  # columns the DML must neither change nor set to NULL
    # PgQ rejects most options on a truncate trigger, pkey= included: its TRUNCATE event
    # names the table's primary key whatever the row trigger's pkey=, and so does ours
    truncate_args: tuple[str, ...] = ()

    def options(self, fmt: str) -> CaptureOptions:
        return CaptureOptions(queue="q", format=fmt, **self.ours)  # type: ignore[arg-type]

    @property
    def skip(self) -> bool:
        return bool(self.ours.get("skip"))

    @property
    def deny(self) -> bool:
        return bool(self.ours.get("deny"))


OPTION_SETS = [
    OptionSet("none"),
    OptionSet("ignore", pgq_args=("ignore=i4,order",), ours=dict(ignore=("i4", "order"))),
    OptionSet(
        "pkey",
        pgq_args=("pkey=u,i8",),
        ours=dict(pkey=("u", "i8")),
        frozen=("u", "i8"),
    ),
    OptionSet("backup", pgq_args=("backup",), ours=dict(backup=True)),
    OptionSet(
        "backup_ignore",
        pgq_args=("backup", "ignore=t,ba"),
        ours=dict(backup=True, ignore=("t", "ba")),
    ),
    OptionSet(
        "when",
        pgq_args=("when=coalesce(i4, 0) > 0 and id % 3 <> 1",),
        ours=dict(when="coalesce(i4, 0) > 0 and id % 3 <> 1"),
    ),
    OptionSet(
        "extra",
        pgq_args=(
            "ev_extra1=upper(t)",
            "ev_extra2=i4::int8 + 1",
            "ev_extra3=coalesce(t, 'none') || '!' || id",
            "ev_extra4=f8 * 2",
        ),
        ours=dict(
            extra={
                1: "upper(t)",
                2: "i4::int8 + 1",
                3: "coalesce(t, 'none') || '!' || id",
                4: "f8 * 2",
            }
        ),
    ),
    OptionSet(
        "extra_bare_column",
        pgq_args=("ev_extra3=t", "ev_extra4=d"),
        ours=dict(extra={3: "t", 4: "d"}),
    ),
    OptionSet(
        "extra_types",
        pgq_args=("ev_extra2=(b)", "ev_extra3=(ip)", "ev_extra4=(d)"),
        ours=dict(extra={2: "(b)", 3: "(ip)", 4: "(d)"}),
    ),
    OptionSet("ev_type", pgq_args=("ev_type='X:' || id",), ours=dict(ev_type="'X:' || id")),
    OptionSet("skip", pgq_args=("SKIP",), ours=dict(skip=True), truncate_args=("SKIP",)),
    OptionSet("deny", pgq_args=("deny",), ours=dict(deny=True), truncate_args=("deny",)),
]


def _attach(pair: Pair, table: str, fmt: str, opts: OptionSet) -> None:
    func = f"pgq.{TRIGGER_FUNC[fmt]}"
    when = "before" if opts.skip or opts.deny else "after"
    args = ", ".join(["'q'", *(_quote(a) for a in opts.pgq_args)])
    targs = ", ".join(["'q'", *(_quote(a) for a in opts.truncate_args)])
    pair.a.execute(
        f"create trigger t {when} insert or update or delete on {table} "
        f"for each row execute procedure {func}({args})"
    )
    pair.a.execute(
        f"create trigger tt {when} truncate on {table} "
        f"for each statement execute procedure {func}({targs})"
    )
    capture.attach(pair.b, table, opts.options(fmt))


# ---------------------------------------------------------------------------------------------
# random values as SQL literals


def _quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _rand_text(rng: random.Random, maxlen: int = 12) -> str:
    if rng.random() < 0.5:
        return rng.choice(TRICKY)
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, maxlen)))


def _rand_date(rng: random.Random) -> dt.date:
    return dt.date(1900, 1, 1) + dt.timedelta(days=rng.randint(0, 60000))


def _rand_time(rng: random.Random) -> str:
    us = rng.choice([0, 0, 500000, 123456, 1, rng.randint(0, 999999)])
    s = f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
    return f"{s}.{us:06d}" if us else s


def _rand_value(rng: random.Random, typ: str) -> str:
    """A SQL expression of the column's type (never NULL)."""
    if typ == "int2":
        v: Any = rng.choice([0, -32768, 32767, rng.randint(-32768, 32767)])
    elif typ == "int4":
        v = rng.choice([0, 1, -1, 2147483647, -2147483648, rng.randint(-1000, 1000)])
    elif typ == "int8":
        v = rng.choice([-9223372036854775808, 9223372036854775807, rng.randint(-(10**15), 10**15)])
    elif typ == "numeric":
        v = rng.choice(
            [
                "0",
                "12.50",
                "-0.001",
                "1e20",
                "NaN",
                "1.0",
                "1.00",
                f"{rng.randint(-(10**6), 10**6)}.{rng.randint(0, 999):03d}",
            ]
        )
    elif typ in ("float4", "float8"):
        v = rng.choice(
            [
                "NaN",
                "Infinity",
                "-Infinity",
                "-0",
                "1.5",
                "0.1",
                "3.4e38",
                repr(rng.uniform(-1e6, 1e6)),
                repr(rng.random()),
            ]
            + (["1e300", "1e-300", "123456789012345678"] if typ == "float8" else [])
        )
    elif typ in ("text", "s.dtext"):
        v = _rand_text(rng)
    elif typ == "varchar(40)":
        v = _rand_text(rng)[:40]
    elif typ == "char(5)":
        v = rng.choice(["", "ab", "a'b\\", "&=%+", "x\ny\t", "é日😀", "abcde"])
    elif typ == "bool":
        return rng.choice(["true", "false"])
    elif typ == "date":
        v = rng.choice(["infinity", "-infinity", "0044-03-15 BC", str(_rand_date(rng))])
    elif typ == "time":
        v = rng.choice(["24:00:00", _rand_time(rng)])
    elif typ == "timetz":
        v = _rand_time(rng) + rng.choice(["+00", "+02", "-05", "+05:30", "-14:59"])
    elif typ == "timestamp":
        v = rng.choice(
            ["infinity", "0044-03-15 12:00:00 BC", f"{_rand_date(rng)} {_rand_time(rng)}"]
        )
    elif typ == "timestamptz":
        v = rng.choice(
            [
                "-infinity",
                "1850-01-01 00:00:00+00",
                f"{_rand_date(rng)} {_rand_time(rng)}"
                + rng.choice(["+00", "-03:30", "+05:45", "+14"]),
            ]
        )
    elif typ == "interval":
        v = rng.choice(
            [
                "1 year 2 mons 3 days 04:05:06.7",
                "-1 mons +1 day -00:00:01",
                "0",
                f"{rng.randint(-99, 99)} days +{rng.randint(0, 9999)} seconds",
            ]
        )
    elif typ == "bytea":
        v = "\\x" + bytes(rng.randrange(256) for _ in range(rng.randint(0, 6))).hex()
    elif typ == "uuid":
        v = str(uuid.UUID(int=rng.getrandbits(128))).upper()
    elif typ in ("json", "jsonb"):
        obj = {"a": rng.randint(0, 9), "b": _rand_text(rng, 4), "c": [None, True, 1.5]}
        v = rng.choice(
            [
                json.dumps(obj),
                json.dumps(obj, separators=(",", ":")),
                json.dumps(_rand_text(rng, 4)),
                "null",
                "[]",
            ]
        )
    elif typ == "int[]":
        v = rng.choice(
            [
                "{1,2,NULL}",
                "{{1,2},{3,4}}",
                "{}",
                "{" + ",".join(str(rng.randint(-9, 99)) for _ in range(3)) + "}",
            ]
        )
    elif typ == "text[]":
        items = [rng.choice(["NULL", _quote(_rand_text(rng, 5))]) for _ in range(rng.randint(0, 4))]
        return f"array[{', '.join(items)}]::text[]"
    elif typ == "s.mood":
        v = rng.choice(["happy", "so sad", "Qu'ote", "é"])
    elif typ == "s.dint":
        v = str(rng.randint(-100, 100))
    elif typ == "inet":
        v = rng.choice(["192.168.0.1/24", "::1", "10.1.2.3", "2001:db8::ff/64"])
    else:  # pragma: no cover
        raise AssertionError(typ)
    return f"{_quote(str(v))}::{typ}"


def _maybe_null(rng: random.Random, typ: str, frozen: bool) -> str:
    if not frozen and rng.random() < 0.15:
        return "null"
    return _rand_value(rng, typ)


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _statements(seed: int, opts: OptionSet) -> list[str]:
    """The DML for s."T x": inserts, updates (some columns, none, to/from NULL), deletes,
    a truncate; the primary key (and any frozen column) never changes."""
    rng = random.Random(seed)
    names = [c for c, _ in COLUMNS]
    cols = ", ".join(_ident(c) for c in ["id", *names])
    types = dict(COLUMNS)
    live: list[int] = []
    next_id = 1
    out: list[str] = []

    def row(i: int) -> str:
        return (
            "("
            + ", ".join([str(i)] + [_maybe_null(rng, t, c in opts.frozen) for c, t in COLUMNS])
            + ")"
        )

    def insert(n: int) -> None:
        nonlocal next_id
        ids = list(range(next_id, next_id + n))
        next_id += n
        live.extend(ids)
        out.append(f"insert into {TABLE} ({cols}) values {', '.join(row(i) for i in ids)}")

    def update(i: int, chosen: list[str], nulls: bool = True) -> None:
        sets = ", ".join(
            f"{_ident(c)} = "
            + (
                "null"
                if nulls and c not in opts.frozen and rng.random() < 0.2
                else _rand_value(rng, types[c])
            )
            for c in chosen
        )
        out.append(f"update {TABLE} set {sets} where id = {i}")

    movable = [c for c in names if c not in opts.frozen]
    insert(1)
    insert(4)
    for i in list(live):
        update(i, rng.sample(movable, rng.randint(1, 4)))
    for _ in range(12):
        i = rng.choice(live)
        kind = rng.random()
        if kind < 0.15:
            c = _ident(rng.choice(names))
            out.append(f"update {TABLE} set {c} = {c} where id = {i}")  # nothing changes
        elif kind < 0.3:
            out.append(
                f"update {TABLE} set i4 = {rng.randint(-5, 5)}, "
                f'"order" = {_quote(_rand_text(rng, 6))} where id = {i}'
            )
        elif kind < 0.45:
            out.append(f"update {TABLE} set t = t, ba = ba where id = {i}")
        elif kind < 0.6:
            chosen = rng.sample(movable, 3)
            out.append(
                f"update {TABLE} set "
                + ", ".join(f"{_ident(c)} = null" for c in chosen)
                + f" where id = {i}"
            )
        elif kind < 0.75:
            update(i, rng.sample(movable, rng.randint(1, len(movable))), nulls=False)
        else:
            update(i, rng.sample(movable, rng.randint(1, 5)))
    out.append(f"update {TABLE} set f8 = f8, num = num")  # every row, no change
    victim = live.pop(rng.randrange(len(live)))
    out.append(f"delete from {TABLE} where id = {victim}")
    insert(2)
    out.append(f"delete from {TABLE} where id in ({live.pop()}, {live.pop()})")
    out.append(f"truncate {TABLE}")
    live.clear()
    insert(3)
    out.append(f"update {TABLE} set i4 = coalesce(i4, 0) % 1000 + 1")
    out.append(f"delete from {TABLE}")
    return out


# ---------------------------------------------------------------------------------------------
# running and comparing


Outcome = tuple[str, int | str | None]


def _run(conn: psycopg.Connection, stmt: str) -> Outcome:
    """("ok", rowcount) or ("error", message)."""
    try:
        cur = conn.execute(stmt)
    except psycopg.Error as exc:
        return ("error", exc.diag.message_primary)
    return ("ok", cur.rowcount)


def _events(conn: psycopg.Connection, table: str) -> list[tuple[Any, ...]]:
    cols = ", ".join(EVENT_COLS)
    return conn.execute(f"select {cols} from {table} order by ev_id").fetchall()


def _contents(conn: psycopg.Connection, table: str) -> list[str]:
    return [r[0] for r in conn.execute(f"select x::text from {table} x order by 1").fetchall()]


def _explain(stmts: list[str], pgq: list[tuple[Any, ...]], ours: list[tuple[Any, ...]]) -> str:
    for n, (p, o) in enumerate(zip(pgq, ours, strict=False)):
        if p != o:
            diff = "\n".join(
                f"  {name}:\n    pgq : {pv!r}\n    ours: {ov!r}"
                for name, pv, ov in zip(EVENT_COLS, p, o, strict=True)
                if pv != ov
            )
            return f"event #{n} differs:\n{diff}"
    return (
        f"event counts differ: pgq {len(pgq)}, ours {len(ours)}; first extra: "
        f"{(pgq if len(pgq) > len(ours) else ours)[min(len(pgq), len(ours))]!r}"
    )


def _compare(
    pair: Pair, stmts: list[str], tables: list[str], refused: bool = False
) -> list[tuple[Any, ...]]:
    """Runs every statement on both sides; asserts equal outcomes, events and contents, and
    that every statement succeeded (or, when ``refused``, that every one touching rows failed)."""
    for stmt in stmts:
        pa, pb = _run(pair.a, stmt), _run(pair.b, stmt)
        assert pa[0] == pb[0], f"outcome differs for {stmt!r}: pgq {pa}, ours {pb}"
        if pa[0] == "ok":
            assert pa == pb, f"row counts differ for {stmt!r}: pgq {pa}, ours {pb}"
        if not refused:
            assert pa[0] == "ok", f"statement failed on both sides ({pa[1]}): {stmt!r}"
        elif pa[0] == "ok":
            assert pa[1] == 0, f"not refused: {stmt!r}"
    pgq, ours = _events(pair.a, pair.pgq_event_table), _events(pair.b, "cdc.event")
    assert pgq == ours, _explain(stmts, pgq, ours)
    for t in tables:
        assert _contents(pair.a, t) == _contents(pair.b, t), f"contents of {t} differ"
    return pgq


FORMATS = ["json", "urlenc", "sql"]


OPTION_PARAMS = [pytest.param(o, id=o.name) for o in OPTION_SETS]


@pytest.mark.parametrize("opts", OPTION_PARAMS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_events_match_pgq(pair_factory: Callable[..., Pair], fmt: str, opts: OptionSet) -> None:
    """Random DML on an all-types table gives PgQ's events, field by field, in order."""
    pair = pair_factory({"TimeZone": "America/New_York"})
    seed = 1000 + FORMATS.index(fmt) * 100 + OPTION_SETS.index(opts)
    pre = [
        f"insert into {TABLE} (id, i4, t, u, i8) values (1001, 5, 'pre', "
        f"'{uuid.UUID(int=1)}', 1), (1002, null, null, '{uuid.UUID(int=2)}', 2)"
    ]
    for stmt in pre:
        pair.a.execute(stmt)
        pair.b.execute(stmt)
    _attach(pair, TABLE, fmt, opts)
    stmts = _statements(seed, opts)
    if opts.deny:  # rows to refuse updates and deletes on
        stmts = [s.replace("where id = ", "where id > 1000 or id = ") for s in stmts]
    events = _compare(pair, stmts, [TABLE], refused=opts.deny)
    if opts.deny:
        assert events == []
        assert len(_contents(pair.a, TABLE)) == 2
    elif opts.skip:
        assert events
        assert _contents(pair.a, TABLE) == []  # rows skipped; truncate still truncates
    else:
        assert events


SESSIONS = {"defaults": {}, "kolkata": {"TimeZone": "Asia/Kolkata"}, **HOSTILE_SETTINGS}


@pytest.mark.parametrize("session", list(SESSIONS))
@pytest.mark.parametrize("fmt", FORMATS)
def test_session_settings_match_pgq(
    pair_factory: Callable[..., Pair], fmt: str, session: str
) -> None:
    """Under any writer session settings our events for every type are PgQ's under the
    default settings, byte for byte."""
    pair = pair_factory(SESSIONS[session])
    _attach(pair, TABLE, fmt, OPTION_SETS[0])
    _compare(pair, _statements(7 + FORMATS.index(fmt), OPTION_SETS[0]), [TABLE])


@pytest.mark.parametrize("backup", [False, True], ids=["plain", "backup"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_composite_key_matches_pgq(
    pair_factory: Callable[..., Pair], fmt: str, backup: bool
) -> None:
    """A composite key declared in another order than its columns gives PgQ's events."""
    pair = pair_factory({"TimeZone": "America/New_York"})
    _attach(pair, COMP, fmt, OptionSet("c", pgq_args=("backup",) * backup, ours={"backup": backup}))
    rng = random.Random(42 + backup)
    stmts = [f"insert into {COMP} values ('x0', 2, 1, 'v'), (null, 1, 2, null)"]
    for k in range(3, 8):
        stmts.append(
            f"insert into {COMP} values ({_quote(_rand_text(rng))}, {k}, {k % 2}, "
            f"{_quote(_rand_text(rng))})"
        )
    stmts += [
        f"update {COMP} set v = 'w' where a = 1 and b = 2",
        f"update {COMP} set x = x",
        f"update {COMP} set x = null, v = {_quote(_rand_text(rng))} where b = 1",
        f"update {COMP} set x = 'from null' where x is null",
        f"update {COMP} set v = v || '&' where b > 4",
        f"delete from {COMP} where a = 0 and b = 4",
        f"truncate {COMP}",
        f"insert into {COMP} values ('again', 1, 1, 'z')",
        f"delete from {COMP}",
    ]
    assert _compare(pair, stmts, [COMP])


# Floats, dates, timestamps, intervals and bytea alone and nested in arrays, composites (one of
# them over a domain), ranges and a point: every kind of value whose text the session formats.
NESTED_ROW_1 = r"""(1, 0.30000000000000004, 0.1,
    '{0.30000000000000004,NULL,1e300,-0,NaN}', '{0.1,3.4028235e38,-Infinity}',
    '{2024-12-31,0044-03-15 BC,NULL,infinity}',
    '{"2024-01-02 03:04:05.678",infinity,"1999-12-31 23:59:59"}',
    '{"2024-06-30 23:59:59.5+00","1900-01-01 00:00:00+05:30",-infinity}',
    '{"1 year 2 mons","-3 days -04:05:06.5",NULL}',
    array['\x00ff'::bytea, '\x'::bytea, null, '\x5c27'::bytea],
    '(0.30000000000000004,2024-02-29)', '(,)',
    row(0.1, 0.1, '2024-01-02', '2024-01-02 03:04:05', '2024-01-02 03:04:05+02',
        '1 day 02:00:00', '\xdead')::s.rich,
    array[null::s.rich, '(,,,,,,)'::s.rich,
          row(1e-300, '-0', '2000-02-29', 'infinity', '-infinity', '-1 mons +2 days',
              '\x')::s.rich],
    '[2024-01-01 00:00+00,2024-01-02 00:00+05:45)', '[2024-01-01,2024-02-01)',
    '(0.30000000000000004,1e-300)', '\x0001ff5c')"""
NESTED_STATEMENTS = [
    f"insert into {NESTED} values {NESTED_ROW_1}",
    f"insert into {NESTED} (id) values (2)",
    f"insert into {NESTED} (id, cp, f8, ba) values (3, '(,)', 1.0000000000000002, '\\x')",
    f"update {NESTED} set cp = '(,)', dp = '(1.5,)' where id = 2",  # NULL to all-NULL fields
    f"update {NESTED} set cp = null where id = 3",  # all-NULL fields to NULL
    f"update {NESTED} set f8 = f8 + 0, cp = cp",  # nothing changes
    f"update {NESTED} set rc = '(,,,,,,)', dp = null, fa = fa || 0.1::float8 where id = 1",
    f"update {NESTED} set tr = '[2024-01-01 00:00+00,)', pt = '(1e300,-0)' where id = 3",
    f"delete from {NESTED} where id = 2",
    f"delete from {NESTED}",
]
# The float of the issue, and an all-NULL composite, as each format writes them.
EXACT_FLOAT = "0.30000000000000004"
ALL_NULL_COMPOSITE = {"json": '"dp":"(,)"', "urlenc": "&dp=%28%2c%29&", "sql": ",'(,)',"}


@pytest.mark.parametrize("mode", ["row", "statement"])
@pytest.mark.parametrize("session", list(SESSIONS))
@pytest.mark.parametrize("fmt", FORMATS)
def test_nested_values_match_pgq_under_any_session(
    pair_factory: Callable[..., Pair], fmt: str, session: str, mode: str
) -> None:
    """Floats, dates, intervals and bytea inside arrays, composites and ranges, and composites
    whose fields are all NULL, give PgQ's default-settings events byte for byte, whatever the
    writer's DateStyle, IntervalStyle, extra_float_digits, bytea_output and TimeZone."""
    pair = pair_factory(SESSIONS[session])
    _attach(
        pair, NESTED, fmt, OptionSet("b", pgq_args=("backup",), ours={"backup": True, "mode": mode})
    )
    events = _compare(pair, NESTED_STATEMENTS, [NESTED])
    first = events[0][1]
    assert f"{EXACT_FLOAT}" in first and ALL_NULL_COMPOSITE[fmt] in first
    if fmt == "urlenc":  # NULL and all-NULL fields differ: bare name vs. "(,)"
        assert "&cp=%28%2c%29&" in events[2][1] and "&fa&" in events[2][1]


def test_install_pins_settings_of_capture_functions_generated_before(
    pair_factory: Callable[..., Pair],
) -> None:
    """An install over an older one gives capture functions generated without the pinned
    settings their SET clauses: a float then travels exactly under extra_float_digits 0."""
    pair = pair_factory(HOSTILE_SETTINGS["sql_dmy"])
    capture.attach(pair.b, NESTED, CaptureOptions(queue="q", format="json"))
    func = pair.b.execute(
        "select distinct tgfoid::regprocedure::text from pg_trigger where tgrelid = %s::regclass",
        (NESTED,),
    ).fetchone()[0]
    pair.b.execute(f"alter function {func} reset all")  # as generated by an older version
    pair.b.execute(f"alter function {func} set search_path = pg_catalog, pg_temp")
    pair.b.execute(f"insert into {NESTED} (id, f8) values (1, {EXACT_FLOAT})")
    install.install(pair.b.info.dsn)
    pair.b.execute(f"insert into {NESTED} (id, f8) values (2, {EXACT_FLOAT})")
    data = [r[0] for r in pair.b.execute("select ev_data from cdc.event order by ev_id")]
    # before the install the session's 0.3; after it, the exact float
    assert [d.split(',"f4"')[0] for d in data] == [
        '{"id":1,"f8":"0.3"',
        f'{{"id":2,"f8":"{EXACT_FLOAT}"',
    ]


WIDE_COLUMNS = 130  # past PostgreSQL's 100 arguments per function call, for every format


@pytest.mark.parametrize("mode", ["row", "statement"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_wide_table_matches_pgq(pair_factory: Callable[..., Pair], fmt: str, mode: str) -> None:
    """A table of 130 columns (more than one concat() call may take) is captured, and its
    events are PgQ's byte for byte: inserts, updates of a few and of all columns, deletes."""
    pair = pair_factory()
    cols = ", ".join(f"c{i} {'int' if i % 2 else 'text'}" for i in range(WIDE_COLUMNS))
    for conn in (pair.a, pair.b):
        conn.execute(f"create table s.wide (id int primary key, {cols})")
    _attach(
        pair,
        "s.wide",
        fmt,
        OptionSet("b", pgq_args=("backup",), ours={"backup": True, "mode": mode}),
    )
    values = ", ".join(str(i) if i % 2 else f"'t{i}&'" for i in range(WIDE_COLUMNS))
    every = ", ".join(f"c{i} = null" for i in range(WIDE_COLUMNS))
    stmts = [
        f"insert into s.wide values (1, {values}), (2, {values})",
        "insert into s.wide (id) values (3)",
        "update s.wide set c7 = 70, c120 = 'x' where id = 1",
        f"update s.wide set {every} where id = 2",
        "update s.wide set c1 = c1 where id = 3",
        "delete from s.wide where id = 1",
    ]
    events = _compare(pair, stmts, ["s.wide"])
    assert len(events) == 7


# ---------------------------------------------------------------------------------------------
# magic columns (_pgq_ev_*): fields of the event taken from the row, left out of the payload

MAGIC_DDL = """
create table s.m (id int primary key, v text, _pgq_ev_type text, _pgq_ev_data text,
                  _pgq_ev_extra1 text, _pgq_ev_extra2 text, _pgq_ev_extra3 text,
                  _pgq_ev_extra4 text, w text);
create table s.m2 (id int primary key, v text, _pgq_ev_extra3 int, "_PGQ_EV_EXTRA4" text,
                   _pgq_ev_extra2 date, w text);
"""
MAGIC_STATEMENTS = [
    "insert into s.m values (1, 'a', 'T', 'D', 'X1', 'X2', 'X3', 'X4')",
    "insert into s.m values (2, 'b', null, null, null, null, null, null)",
    "update s.m set _pgq_ev_extra4 = 'X4b', w = 'ignored' where id = 1",
    "insert into s.m (id, v) values (3, 'c')",
    "update s.m set v = 'a2' where id = 1",
    "update s.m set _pgq_ev_type = 'T2' where id = 1",  # only magic columns: sql writes none
    "update s.m set _pgq_ev_data = null, _pgq_ev_type = null where id = 1",
    "update s.m set v = v where id = 1",  # nothing changed: an event in every format
    "update s.m set v = 'b2', _pgq_ev_extra3 = 'new3' where id = 2",
    "delete from s.m where id = 1",
    "delete from s.m",
    "insert into s.m2 values (1, 'a', 42, 'up', '2024-01-02')",
    "update s.m2 set v = 'b', _pgq_ev_extra2 = null",
    "update s.m2 set \"_PGQ_EV_EXTRA4\" = 'down'",  # an ordinary column: in the payload
    "delete from s.m2",
]


MAGIC_OPTIONS = [
    pytest.param(OptionSet("b", pgq_args=("backup",), ours={"backup": True}), id="backup"),
    # with ignored columns, an UPDATE of magic columns only writes no event in any format
    pytest.param(
        OptionSet("i", pgq_args=("backup", "ignore=w"), ours={"backup": True, "ignore": ("w",)}),
        id="backup_ignore",
    ),
]


@pytest.mark.parametrize("opts", MAGIC_OPTIONS)
@pytest.mark.parametrize("mode", ["row", "statement"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_magic_columns_match_pgq(
    pair_factory: Callable[..., Pair], fmt: str, mode: str, opts: OptionSet
) -> None:
    """_pgq_ev_type, _pgq_ev_data and _pgq_ev_extra1..4 give their fields (NULL included,
    from NEW, or OLD on DELETE), stay out of the payload, and beat the backup row in
    ev_extra2, as in PgQ; a column spelled in capitals is an ordinary column."""
    pair = pair_factory()
    for conn in (pair.a, pair.b):
        conn.execute(MAGIC_DDL)
    opts = OptionSet(opts.name, pgq_args=opts.pgq_args, ours=opts.ours | {"mode": mode})
    for table in ("s.m", "s.m2"):
        _attach(pair, table, fmt, opts)
    events = _compare(pair, MAGIC_STATEMENTS, ["s.m", "s.m2"])
    assert events[0][0:6] == ("T", "D", "X1", "X2", "X3", "X4")
    assert events[1] == (None,) * 6
    assert all("_pgq_ev_" not in (e[1] or "") for e in events)
    assert any("_PGQ_EV_EXTRA4" in (e[1] or "") for e in events)


@pytest.mark.parametrize("fmt", FORMATS)
def test_option_expression_beats_magic_column_like_pgq(
    pair_factory: Callable[..., Pair], fmt: str
) -> None:
    """An extra3 / ev_type option wins over the _pgq_ev_extra3 / _pgq_ev_type column, which
    still stays out of the payload."""
    pair = pair_factory()
    for conn in (pair.a, pair.b):
        conn.execute(
            "create table s.m4 (id int primary key, _pgq_ev_extra3 text, _pgq_ev_type text)"
        )
    opts = OptionSet(
        "x",
        pgq_args=("ev_extra3='expr'", "ev_type='E:' || id"),
        ours=dict(extra={3: "'expr'"}, ev_type="'E:' || id"),
    )
    _attach(pair, "s.m4", fmt, opts)
    events = _compare(
        pair,
        [
            "insert into s.m4 values (1, 'magic', 'M')",
            "update s.m4 set id = id",
            "delete from s.m4",
        ],
        ["s.m4"],
    )
    assert [(e[0], e[4]) for e in events] == [("E:1", "expr")] * 3


def test_unknown_magic_column_is_refused(pair_factory: Callable[..., Pair]) -> None:
    """A column named _pgq_ev_ plus an unknown suffix: PgQ's trigger fails every change of
    the table; ours refuses the attach, naming the column, and a later ALTER TABLE that adds
    one to a captured table is refused (QC027), so no change is ever lost to it."""
    pair = pair_factory()
    for conn in (pair.a, pair.b):
        conn.execute("create table s.bad (id int primary key, _pgq_ev_bogus text)")
        conn.execute("create table s.later (id int primary key)")
    pair.a.execute(
        "create trigger t after insert on s.bad for each row execute procedure pgq.jsontriga('q')"
    )
    with pytest.raises(psycopg.Error, match="Unknown magic column: _pgq_ev_bogus"):
        pair.a.execute("insert into s.bad values (1, 'x')")
    with pytest.raises(errors.UnknownMagicColumn, match="_pgq_ev_bogus"):
        capture.attach(pair.b, "s.bad", CaptureOptions(queue="q", format="json"))
    capture.attach(pair.b, "s.later", CaptureOptions(queue="q", format="json"))
    with pytest.raises(psycopg.Error, match="_pgq_ev_Extra1") as info:
        pair.b.execute('alter table s.later add column "_pgq_ev_Extra1" text')
    assert info.value.sqlstate == "QC027"
    pair.b.execute("insert into s.later values (1)")  # the capture still works
    assert pair.b.execute("select count(*) from cdc.event").fetchone() == (1,)


# ---------------------------------------------------------------------------------------------
# the queue's disable_insert and per_tx_limit bind the triggers


def _outcomes(pair: Pair, stmts: list[str]) -> list[tuple[Outcome, Outcome]]:
    return [(_run(pair.a, s), _run(pair.b, s)) for s in stmts]


def _same_outcomes(pair: Pair, stmts: list[str]) -> list[str]:
    """Runs each statement on both sides: both fail, or both succeed with the same row count.
    Returns the statements that failed."""
    failed = []
    for stmt, (pa, pb) in zip(stmts, _outcomes(pair, stmts), strict=True):
        assert pa[0] == pb[0], f"outcome differs for {stmt!r}: pgq {pa}, ours {pb}"
        if pa[0] == "ok":
            assert pa == pb, f"row counts differ for {stmt!r}: pgq {pa}, ours {pb}"
        else:
            failed.append(stmt)
    return failed


def _set_queue(pair: Pair, assignments: str, by_function: bool) -> None:
    """The same queue settings on both sides: PgQ's only way is an UPDATE of pgq.queue (its
    set_queue_config cannot set them); ours takes the UPDATE too, or set_queue_config."""
    pair.a.execute(f"update pgq.queue set {assignments} where queue_name = 'q'")
    if not by_function:
        pair.b.execute(f"update cdc.queue set {assignments} where queue_name = 'q'")
        return
    for assignment in assignments.split(","):
        name, value = (p.strip() for p in assignment.split("="))
        value = None if value == "null" else value
        pair.b.execute("select cdc.set_queue_config('q', %s, %s)", (name, value))


@pytest.mark.parametrize("by_function", [False, True], ids=["update", "set_queue_config"])
@pytest.mark.parametrize("mode", ["row", "statement"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_disable_insert_binds_triggers_like_pgq(
    pair_factory: Callable[..., Pair], fmt: str, mode: str, by_function: bool
) -> None:
    """With inserts disabled, a change that writes an event fails (the row is not written),
    one that writes none succeeds, and replica mode lets insert_event through; enabled
    again, the triggers write as before."""
    pair = pair_factory()
    for conn in (pair.a, pair.b):
        conn.execute(f"insert into {COMP} values ('pre', 1, 1, 'v')")
    _attach(pair, COMP, fmt, OptionSet("p", ours={"mode": mode}))
    _set_queue(pair, "queue_disable_insert = true", by_function)
    failed = _same_outcomes(
        pair,
        [
            f"insert into {COMP} values ('x', 2, 2, 'w')",
            f"update {COMP} set v = 'u'",
            f"delete from {COMP}",
            f"truncate {COMP}",
            f"delete from {COMP} where false",
        ],
    )
    assert len(failed) == 4
    assert pair.b.execute(f"select count(*) from {COMP}").fetchone() == (1,)
    for conn, schema in ((pair.a, "pgq"), (pair.b, "cdc")):
        with pytest.raises(psycopg.Error):
            conn.execute(f"select {schema}.insert_event('q', 't', 'refused')")
        conn.execute("set session_replication_role = replica")
        conn.execute(f"select {schema}.insert_event('q', 't', 'replica')")
        conn.execute("set session_replication_role = origin")
    with pytest.raises(psycopg.Error, match="inserts into queue 'q' are disabled") as info:
        pair.b.execute(f"insert into {COMP} values ('x', 3, 3, 'w')")
    assert info.value.sqlstate == "QC008"
    _set_queue(pair, "queue_disable_insert = false", by_function)
    events = _compare(
        pair, [f"insert into {COMP} values ('x', 4, 4, 'w')", f"truncate {COMP}"], [COMP]
    )
    assert events[0][1] == "replica"
    assert len(events) == 3


@pytest.mark.parametrize("mode", ["row", "statement"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_per_tx_limit_binds_triggers_like_pgq(
    pair_factory: Callable[..., Pair], fmt: str, mode: str
) -> None:
    """per_tx_limit counts every event a transaction puts into the queue, from triggers and
    insert_event alike, in replica mode too; a limit of 0 refuses every event."""
    pair = pair_factory()
    _attach(pair, COMP, fmt, OptionSet("p", ours={"mode": mode}))
    _set_queue(pair, "queue_per_tx_limit = 2", by_function=False)
    stmts = [
        f"insert into {COMP} (a, b) select i, i from generate_series(1, 5) i",
        f"insert into {COMP} (a, b) select i, i from generate_series(1, 2) i",
        f"insert into {COMP} (a, b) values (3, 3)",
        f"begin; insert into {COMP} (a, b) values (4, 4); insert into {COMP} (a, b) values (5, 5);"
        f" insert into {COMP} (a, b) values (6, 6); commit",
        "begin; select {s}.insert_event('q', 'a', '1');"
        f" insert into {COMP} (a, b) values (7, 7);"
        f" insert into {COMP} (a, b) values (8, 8); commit",
        f"update {COMP} set v = 'two' where a < 3",
        f"update {COMP} set v = 'three'",
    ]
    outcomes = []
    for stmt in stmts:
        pa = _run(pair.a, stmt.replace("{s}", "pgq"))
        pb = _run(pair.b, stmt.replace("{s}", "cdc"))
        outcomes.append((pa[0], pb[0]))
        for conn in (pair.a, pair.b):  # a failed explicit transaction is left open
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                conn.execute("rollback")
    assert [o[0] for o in outcomes] == [o[1] for o in outcomes], outcomes
    assert [o[0] for o in outcomes] == ["error", "ok", "ok", "error", "error", "ok", "error"]
    with pytest.raises(psycopg.Error, match="limit of 2 events") as info:
        pair.b.execute(f"insert into {COMP} (a, b) select i, i from generate_series(10, 12) i")
    assert info.value.sqlstate == "QC007"
    _set_queue(pair, "queue_per_tx_limit = 0", by_function=False)
    failed = _same_outcomes(pair, [f"insert into {COMP} (a, b) values (9, 9)", f"truncate {COMP}"])
    assert len(failed) == 2
    _set_queue(pair, "queue_per_tx_limit = null", by_function=False)
    events = _compare(
        pair, [f"insert into {COMP} (a, b) select i, i from generate_series(20, 25) i"], [COMP]
    )
    assert len(events) == 2 + 1 + 2 + 6
