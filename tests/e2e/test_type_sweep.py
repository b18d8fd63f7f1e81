"""Every built-in type a user might store, at its edges, captured in json, urlenc and sql,
drained through the real drain and compared value by value with the source.

Each (column, value) is its own row (the other columns NULL), so each value has its own
verdict: it arrives identical (in the comparison form of cdc.pipeline.compare: text output for
strings, exact decimals, floats bit for bit, dates as days and timestamps as microseconds
since 1970 in the proleptic Gregorian calendar), or its event is quarantined with a reason
naming its column. Any other outcome (a changed value, a NULL in place of a value, an
unexpected quarantine) fails. The table in docs/drain.md ("Types, value by value") is this
file's summary.

The same events are drained by three consumers of the queue into three target folders, with
``[drain] engine = "spark"``, ``"arrow"`` and ``"arrow+spark"`` (decoded and folded on the
driver, written by Spark: a large part on a cluster), and each is compared with the source.
The values the Arrow decoder leaves to Spark (``left_to_spark``: bad values, dates and
timestamps BC or past year 9999; one such event hands a table's whole part to Spark) come
in a second transaction after a tick. Spark drains both ticks in one batch; the Arrow run
drains the first tick (and so does the arrow+spark run), every table's part of which it
decodes and writes itself
(BatchStats.routes says so). It leaves the second tick in the queue: drained, that batch
would be Spark's decode and MERGE again (about 40 % more time for the file), of values the
Spark run has just compared.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from cdc.engines.planner import ARROW, FORCEABLE, SHIPPED, SPARK
from cdc.pg import capture, pgtypes
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Queue
from cdc.pipeline import compare
from cdc.pipeline.apply import BatchStats
from cdc.pipeline.drain import Drain
from tests.support import drainkit

pytestmark = pytest.mark.spark

FORMATS = ("json", "urlenc", "sql")
LONG_TEXT = "repeat('long text é 😀 ', 200000)"  # about 3.4 MB
LONG_BYTEA = "decode(repeat('00ff7f80', 100000), 'hex')"

PRELUDE = """
create type mood as enum ('happy', 'so sad', 'Qu''ote', '');
create type pair as (a int, b text);
create domain posint as int check (value > 0);
create domain olddate as date;
"""


@dataclass(frozen=True)
class Q:
    """A value whose event must go to quarantine (the reason names its column)."""

    sql: str


# column -> (type, values); a value is an SQL expression, Q(...) when it must be quarantined
SWEEP: dict[str, tuple[str, list[str | Q]]] = {
    "i2": ("int2", ["-32768", "32767"]),
    "i4": ("int4", ["-2147483648", "2147483647"]),
    "i8": ("int8", ["-9223372036854775808", "9223372036854775807"]),
    "num": (
        "numeric",
        [
            "'NaN'",
            "'Infinity'",
            "'-Infinity'",
            "'1.000'",
            "'1e-40'",
            "'-123456789012345678901234567890123456789012345.678'",
        ],
    ),
    "n102": ("numeric(10,2)", ["12345678.99", "-0.01", Q("'NaN'")]),
    "n380": (
        "numeric(38,0)",
        ["'99999999999999999999999999999999999999'", "'-99999999999999999999999999999999999999'"],
    ),
    "n5020": ("numeric(50,20)", ["'123456789012345678901234567890.12345678901234567890'"]),
    "f4": (
        "float4",
        ["'NaN'", "'Infinity'", "'-Infinity'", "'-0'", "'1e-45'", "'3.4028235e38'", "'0.1'"],
    ),
    "f8": (
        "float8",
        [
            "'NaN'",
            "'Infinity'",
            "'-Infinity'",
            "'-0'",
            "'5e-324'",
            "'1.7976931348623157e308'",
            "'0.30000000000000004'",
        ],
    ),
    "mon": ("money", ["'-92233720368547758.08'", "12.5"]),
    "t": (
        "text",
        [
            "''",
            "E'ctl \\x01\\x02\\t\\n\\r\\x1b\\x7f end'",
            "'é ü 中 😀 \u200b'",
            "E'\\uFFFF \\U0010FFFF \\uFEFF e\\u0301'",
            "'back\\slash ''q'' \"dq\"'",
            "'NULL'",
            "'a b&c=d%e+f;'",
            LONG_TEXT,
        ],
    ),
    "vc": ("varchar(10)", ["'ten chars!'"]),
    "ch": ("char(5)", ["'ab'"]),
    "nm": ("name", ["'a name'"]),
    "ba": ("bytea", ["'\\x'", "'\\x00ff10'", LONG_BYTEA]),
    "b": ("bool", ["true", "false"]),
    "d": (
        "date",
        [
            "'0044-03-15 BC'",
            "'4713-01-01 BC'",
            "'0001-01-01'",
            "'1582-10-04'",
            "'1582-10-15'",
            "'9999-12-31'",
            "'10000-01-01'",
            "'5874897-12-31'",
            Q("'infinity'"),
            Q("'-infinity'"),
        ],
    ),
    "tm": ("time", ["'00:00:00'", "'24:00:00'", "'23:59:59.999999'"]),
    "ttz": ("timetz", ["'00:00:00+15:59'", "'23:59:59.999999-15:59'"]),
    "ts": (
        "timestamp",
        [
            "'4713-01-01 00:00:00 BC'",
            "'0044-03-15 12:00:00.5 BC'",
            "'1582-10-04 23:59:59'",
            "'1677-09-21 00:12:43.145224'",
            "'2262-04-11 23:47:16.854776'",
            "'9999-12-31 23:59:59.999999'",
            "'10000-01-01 00:00:00'",
            Q("'294276-12-31 23:59:59.999999'"),
            Q("'infinity'"),
            Q("'-infinity'"),
        ],
    ),
    "tstz": (
        "timestamptz",
        [
            "'4713-01-01 00:00:00+00 BC'",
            "'0044-03-15 12:00:00+00 BC'",
            "'1000-01-01 00:00:00+00'",
            "'9999-12-31 23:59:59.999999+00'",
            "'12345-01-01 00:00:00+00'",
            Q("'294276-12-31 23:59:59+00'"),
            Q("'infinity'"),
            Q("'-infinity'"),
        ],
    ),
    "iv": (
        "interval",
        ["'-178000000 years'", "'1 year 2 mons -3 days 04:05:06.789'", "'00:00:00.000001'"],
    ),
    "u": (
        "uuid",
        ["'00000000-0000-0000-0000-000000000000'", "'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'"],
    ),
    "j": ("json", ['\'{"a": 1, "a": 2,  "b" : [1, 2.50]}\'', "'\"str\"'", "'null'"]),
    "jb": ("jsonb", ['\'{"b": 1, "a": [true, null, 1e400]}\'', "'[]'", "'\"\\u00e9\"'"]),
    "ip": ("inet", ["'192.168.0.1/24'", "'::1'", "'::ffff:1.2.3.4/128'"]),
    "cd": ("cidr", ["'10.0.0.0/8'", "'2001:db8::/32'"]),
    "mac": ("macaddr", ["'08:00:2b:01:02:03'"]),
    "mac8": ("macaddr8", ["'08:00:2b:01:02:03:04:05'"]),
    "bt": ("bit(3)", ["'101'"]),
    "vb": ("varbit", ["''", "'1010101'"]),
    "pt": ("point", ["'(1.5,-2)'", "'(NaN,Infinity)'"]),
    "ln": ("line", ["'{1,-1,0}'"]),
    "ls": ("lseg", ["'[(0,0),(1,1)]'"]),
    "bx": ("box", ["'(1,1),(0,0)'"]),
    "pa": ("path", ["'[(0,0),(1,1),(2,0)]'", "'((0,0),(1,1))'"]),
    "pg": ("polygon", ["'((0,0),(1,1),(1,0))'"]),
    "ci": ("circle", ["'<(0,0),1.5>'"]),
    "tv": ("tsvector", ["'a fat cat:1A sat''s'"]),
    "tq": ("tsquery", ["'fat & (rat | !cat)'"]),
    "x": ("xml", ["'<a b=\"1\">t&amp;</a>'", "'plain text'"]),
    "lsn": ("pg_lsn", ["'16/B374D848'", "'FFFFFFFF/FFFFFFFF'"]),
    "o": ("oid", ["4294967295"]),
    "rt": ("regtype", ["'integer'"]),
    "x8": ("xid8", ["'18446744073709551615'"]),
    "i4r": ("int4range", ["'empty'", "'[1,5)'", "'(,)'"]),
    "nr": ("numrange", ["'(-Infinity,1.5]'"]),
    "tsr": ("tstzrange", ["'[0044-03-15 00:00:00+00 BC,infinity)'"]),
    "dr": ("daterange", ["'[0044-03-15 BC,10000-01-01)'"]),
    "i4mr": ("int4multirange", ["'{[1,3),[5,7)}'", "'{}'"]),
    "dmr": ("datemultirange", ["'{[2024-01-01,2024-02-01)}'"]),
    "ia": (
        "int4[]",
        ["'{}'", "'{1,NULL,3}'", "'{NULL}'", Q("'{{1,2},{3,4}}'"), Q("'[0:1]={1,2}'")],
    ),
    "ta": (
        "text[]",
        [
            '\'{"a\\"b",NULL,"NULL","x,y","b\\\\c",""," s ","é😀"}\'',
            "'{}'",
            Q("'{{a,b},{c,d}}'"),
            Q("'[2:2]={x}'"),
        ],
    ),
    "na": ("numeric(10,2)[]", ["'{1.5,NULL}'", Q("'{NaN}'")]),
    "nu": ("numeric[]", ["'{NaN,Infinity,1.000}'"]),
    "fa": ("float8[]", ["'{NaN,Infinity,-Infinity,-0,5e-324}'"]),
    "f4a": ("float4[]", ["'{0.1,NaN}'"]),
    "da": ("date[]", ["'{0044-03-15 BC,NULL,12345-01-01}'", Q("'{infinity}'")]),
    "tsa": (
        "timestamptz[]",
        ['\'{"0044-03-15 12:00:00+00 BC","9999-12-31 23:59:59.999999+00"}\'', Q("'{-infinity}'")],
    ),
    "tna": ("timestamp[]", ['\'{"1000-01-01 00:00:00","0001-01-01 00:00:00 BC"}\'']),
    "bla": ("bool[]", ["'{t,f,NULL}'"]),
    "baa": ("bytea[]", ['\'{"\\\\x00ff","\\\\x",NULL}\'']),
    "ua": ("uuid[]", ["'{00000000-0000-0000-0000-000000000000}'"]),
    "jba": ("jsonb[]", ['\'{"{\\"a\\": 1}",null}\'']),
    "boxa": ("box[]", ["'{(1,1),(0,0);(3,3),(2,2)}'"]),
    "pta": ("point[]", ['\'{"(1,2)","(3,4)"}\'']),
    "ra": ("int4range[]", ["'{\"[1,2)\",empty}'"]),
    "ma": ("mood[]", ['\'{happy,"so sad",""}\'']),
    "pra": ("pair[]", ['\'{"(1,x)","(,)"}\'']),
    "dm": ("posint", ["5"]),
    "od": ("olddate", ["'0044-03-15 BC'", Q("'infinity'")]),
    "m": ("mood", ["'so sad'", "'Qu''ote'", "''"]),
    "pr": ("pair", ["'(1,\"a,b\")'", "'(,)'"]),
}

# columns per table: a json capture of more than 49 columns fails (concat() takes at most
# 100 arguments), reported separately
PART = 40
PARTS = [list(SWEEP)[i : i + PART] for i in range(0, len(SWEEP), PART)]

ROWS: list[tuple[int, str, str | Q]] = [
    (i, col, value)
    for i, (col, value) in enumerate(
        ((c, v) for c, (_, values) in SWEEP.items() for v in values), start=2
    )
]
QUARANTINED = {key for key, _, value in ROWS if isinstance(value, Q)}

# dates and timestamps the Arrow decoder leaves to Spark: BC, or past year 9999
DATETIMES = {"d", "ts", "tstz", "da", "tsa", "tna", "od"}
FAR = re.compile(r" BC\b|\d{5,}-\d\d-\d\d")


def left_to_spark(col: str, value: str | Q) -> bool:
    """Whether the Arrow decoder leaves the value's event to Spark (it decides every other):
    a bad value (quarantined), a date or timestamp BC or past year 9999."""
    return isinstance(value, Q) or (col in DATETIMES and FAR.search(value) is not None)


def _create(conn: psycopg.Connection, table: str, part: list[str]) -> None:
    columns = sql.SQL(", ").join(
        sql.SQL("{} {}").format(sql.Identifier(c), sql.SQL(SWEEP[c][0])) for c in part
    )
    conn.execute(
        sql.SQL("create table {} (id int primary key, {})").format(sql.Identifier(table), columns)
    )


def _fill(conn: psycopg.Connection, table: str, part: list[str], later: bool) -> None:
    """The rows of the part's values the Arrow decoder decides (and the row of NULLs), or
    later: the others."""
    with conn.transaction():
        if not later:
            conn.execute(sql.SQL("insert into {} (id) values (1)").format(sql.Identifier(table)))
        for key, col, value in _rows(part):
            if left_to_spark(col, value) != later:
                continue
            text = value.sql if isinstance(value, Q) else value
            conn.execute(
                sql.SQL("insert into {} (id, {}) values ({}, {})").format(
                    sql.Identifier(table), sql.Identifier(col), key, sql.SQL(text)
                )
            )


def _rows(part: list[str]) -> list[tuple[int, str, str | Q]]:
    return [(key, col, value) for key, col, value in ROWS if col in part]


def _has_xml(conn: psycopg.Connection) -> bool:
    """Whether the server is built with libxml (the embedded one is not)."""
    try:
        with conn.transaction():
            conn.execute("select '<a/>'::xml")
    except psycopg.errors.FeatureNotSupported:
        return False
    return True


def _tick(conn: psycopg.Connection) -> int:
    Queue(conn, "q").force_tick()
    return Queue(conn, "q").tick()


def _drain(
    dsn: str, spark, root: Path, conf: list[dict], engine: str, stop_at: int | None = None
) -> list[str]:
    """Drains the queue with the engine forced, by its own consumer, into root (up to tick
    stop_at, when given). Returns each batch's routes, as "target: route"."""
    pipe = drainkit.pipeline(dsn, str(root), conf, consumer=engine)
    pipe = replace(pipe, drain=replace(pipe.drain, engine=engine))
    stats: list[BatchStats] = []
    with Drain(pipe, spark) as drain:
        drain.run(on_batch=stats.append, stop_at_tick=stop_at)
    return [f"{t}: {route}" for s in stats for t, route in sorted(s.routes.items())]


def test_every_type_at_its_edges_is_exact_or_quarantined(conn, dsn, spark, tmp_path):
    """Every value of every type arrives identical in Delta, or its event is quarantined
    naming its column, in json, urlenc and sql, on both engines: never a silent change."""
    conn.execute("set timezone = 'UTC'")
    conn.execute(PRELUDE)
    Queue(conn, "q").create()
    for engine in FORCEABLE:
        Consumer(conn, "q", engine).register()
    parts = [[c for c in p if c != "x" or _has_xml(conn)] for p in PARTS]
    tables = {f"sweep_{fmt}_{n}": (fmt, part) for fmt in FORMATS for n, part in enumerate(parts)}
    for table, (fmt, part) in tables.items():
        _create(conn, table, part)
        capture.attach(conn, f"public.{table}", CaptureOptions(queue="q", format=fmt))
        _fill(conn, table, part, later=False)
    first = _tick(conn)
    for table, (_, part) in tables.items():
        _fill(conn, table, part, later=True)
    conf = [{"source": f"public.{t}", "target": t} for t in tables]
    routes = _drain(dsn, spark, tmp_path / SPARK, conf, SPARK)
    assert routes == [f"{t}: spark (drain.engine = spark)" for t in sorted(tables)]
    routes = _drain(dsn, spark, tmp_path / ARROW, conf, ARROW, stop_at=first)
    assert routes == [f"{t}: arrow (drain.engine = arrow)" for t in sorted(tables)]
    # decoded and folded on the driver, written by Spark (a large part on a cluster)
    routes = _drain(dsn, spark, tmp_path / "shipped", conf, SHIPPED, stop_at=first)
    assert routes == [f"{t}: arrow+spark (drain.engine = arrow+spark)" for t in sorted(tables)]

    # absent from each target: the quarantined values, and from the Arrow run's the values
    # it left in the queue
    absent = {
        SPARK: {key: "quarantined" for key in QUARANTINED},
        ARROW: {key: "left to Spark" for key, col, value in ROWS if left_to_spark(col, value)},
    }
    absent[SHIPPED] = absent[ARROW]
    folders = {SPARK: SPARK, ARROW: ARROW, SHIPPED: "shipped"}
    problems: list[str] = []
    for table, (_, part) in tables.items():
        cols = pgtypes.columns(conn, "public", table)
        source = {row[0]: row for row in compare.source_rows(conn, "public", table, cols)}
        for engine in FORCEABLE:
            found = compare.delta_rows(spark, str(tmp_path / folders[engine] / table), cols)
            problems += _differences(f"{engine}: {table}", part, source, found, absent[engine])
    reasons = spark.read.format("delta").load(str(tmp_path / SPARK / "_quarantine"))
    problems += _quarantined(tables, reasons.collect())
    assert not (tmp_path / ARROW / "_quarantine").exists()
    assert not (tmp_path / "shipped" / "_quarantine").exists()
    assert not problems, "\n".join(problems)


def _differences(
    where: str, part: list[str], source: dict, found: list[tuple], absent: dict[int, str]
) -> list[str]:
    """Each value of the part that did not arrive as the source holds it, or arrived where
    it should be absent (the reason, by key)."""
    delta = {row[0]: row for row in found}
    problems = []
    for key, col, value in [(1, "id", "(all NULL)"), *_rows(part)]:
        if key in absent:
            if key in delta:
                problems.append(f"{where}.{col} = {value}: not {absent[key]}")
        elif delta.get(key) != source[key]:
            at = ["id", *part].index(col)
            got = delta[key][at] if key in delta else "(row missing)"
            problems.append(f"{where}.{col} = {value}: {str(got)[:80]!r}")
    return problems


def _quarantined(tables: dict[str, tuple[str, list[str]]], reasons: list) -> list[str]:
    """Each table whose quarantined events are not those of its bad values, by column."""
    problems = []
    prefix = "value does not cast to the column type: "
    for table, (_, part) in tables.items():
        want = Counter(col for key, col, _ in _rows(part) if key in QUARANTINED)
        got = Counter(
            r.reason.removeprefix(prefix) for r in reasons if r.ev_extra1 == f"public.{table}"
        )
        if got != want:
            problems.append(f"{table}: quarantined {dict(got)}, expected {dict(want)}")
    return problems
