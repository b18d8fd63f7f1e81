"""Pure parts of the drain: configuration checks, sql events, array literals, type mapping."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdc import config
from cdc.errors import ConfigError
from cdc.formats import sql as sqlformat
from cdc.pg import pgarray, pgtypes

GOOD = {
    "source": {"dsn": "postgresql://x/y", "queue": "q", "consumer": "c"},
    "target": {"path": "/data/delta"},
    "tables": [{"source": "public.orders", "target": "orders"}],
}


def with_(path: tuple[str, ...], value: object) -> dict:
    import copy

    data = copy.deepcopy(GOOD)
    node = data
    for key in path[:-1]:
        node = node[key] if not isinstance(node, list) else node[int(key)]
    if isinstance(node, list):
        node[int(path[-1])] = value
    elif value is None:
        node.pop(path[-1])
    else:
        node[path[-1]] = value
    return data


def test_a_good_configuration_parses():
    pipe = config.parse(GOOD)
    assert pipe.source.queue_schema == "cdc"
    assert pipe.tables[0].mode == "mirror"
    assert pipe.location("orders") == "/data/delta/orders"
    assert pipe.location("lake.orders") == "/data/delta/_spark_warehouse/lake.db/orders"
    assert pipe.metrics_port is None
    assert config.parse({**GOOD, "metrics": {"port": 9187}}).metrics_port == 9187


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("source", "queue"), None, "source.queue is missing"),
        (("source", "queue"), "", "source.queue must be a non-empty string"),
        (("source", "queue_schema"), "londiste", "source.queue_schema must be one of"),
        (("source", "max_events"), 0, "source.max_events must be a positive integer"),
        (("source", "colour"), "red", "source has unknown keys: colour"),
        (("target", "path"), None, "target.path is missing"),
        (("tables",), [], "[[tables]] is missing"),
        (("tables", "0"), {"source": "orders"}, "tables[1].source must be schema.table"),
        (("tables", "0"), {"source": "public.o", "mode": "copy"}, "tables[1].mode must be mirror"),
        (("tables", "0"), {"source": "public.o", "target": "../x"}, "tables[1].target must be"),
        (("metrics",), {"port": "http"}, "metrics.port must be a TCP port number"),
        (("metrics",), {"port": 70000}, "metrics.port must be a TCP port number"),
        (("metrics",), {"host": "x"}, "metrics has unknown keys: host"),
    ],
)
def test_bad_configurations_name_the_key(path, value, message):
    with pytest.raises(ConfigError) as err:
        config.parse(with_(path, value))
    assert message in str(err.value)


def test_a_target_listed_twice_is_refused():
    data = with_(
        ("tables",), [{"source": "public.a", "target": "x"}, {"source": "public.b", "target": "x"}]
    )
    with pytest.raises(
        ConfigError, match=r"target 'x' is the target of both public\.a and public\.b"
    ):
        config.parse(data)


def test_dsn_from_the_environment(monkeypatch):
    monkeypatch.setenv("CDC_DSN", "postgresql://env/db")
    assert config.parse(with_(("source", "dsn"), None)).source.dsn == "postgresql://env/db"
    monkeypatch.delenv("CDC_DSN")
    with pytest.raises(ConfigError, match=r"source\.dsn is missing"):
        config.parse(with_(("source", "dsn"), None))


def test_load_reports_a_missing_file_and_bad_toml(tmp_path: Path):
    with pytest.raises(ConfigError, match="does not exist"):
        config.load(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[source\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        config.load(bad)


@pytest.mark.parametrize(
    ("op", "data", "expected"),
    [
        ("I", "(id,name,val) values ('1','a b','10')", {"id": "1", "name": "a b", "val": "10"}),
        ("I", '(id,"Odd""x") values (\'2\',null)', {"id": "2", 'Odd"x': None}),
        ("I", "(a) values (E'back\\\\slash ''q''')", {"a": "back\\slash 'q'"}),
        ("I", "(a) values (E'\\\\xdeadbeef')", {"a": "\\xdeadbeef"}),
        ("U", "name='x',val=NULL where id='1'", {"id": "1", "name": "x", "val": None}),
        ("U", "b='2' where b='2' and a='1'", {"a": "1", "b": "2"}),
        ("D", "id='1' and k='x y'", {"id": "1", "k": "x y"}),
    ],
)
def test_sql_events_parse(op, data, expected):
    assert sqlformat.parse(op, data) == expected


def test_sql_event_values_keep_control_characters_and_unicode():
    """quote_literal's E'' text with raw control characters, emoji, doubled quotes and
    doubled backslashes parses back to the exact value."""
    value = "ctl \x01\t\n\r é😀 'q' b\\s \uffff"
    literal = "E'" + value.replace("\\", "\\\\").replace("'", "''") + "'"
    assert sqlformat.parse("I", f"(id,t) values ('1',{literal})") == {"id": "1", "t": value}


@pytest.mark.parametrize(
    ("op", "data"),
    [("I", "(a,b) values ('1')"), ("U", "a='1'"), ("D", "id=1"), ("I", "garbage("), ("X", "a='1'")],
)
def test_bad_sql_events_are_refused(op, data):
    with pytest.raises(sqlformat.SqlEventError):
        sqlformat.parse(op, data)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{}", []),
        ("{1,2,NULL}", ["1", "2", None]),
        ('{"x y","q\\"t",NULL,""}', ["x y", 'q"t', None, ""]),
        ('{"NULL",null}', ["NULL", None]),
        ('{"a\\"b","x,y"," s ","b\\\\c",""}', ['a"b', "x,y", " s ", "b\\c", ""]),
        ('{"0044-03-15 BC",infinity}', ["0044-03-15 BC", "infinity"]),
        ('{"(1,\\"x y\\")",NULL}', ['(1,"x y")', None]),
    ],
)
def test_array_literals_parse(text, expected):
    """PostgreSQL's array output parses into its elements: quotes, backslashes, commas,
    spaces, the string "NULL" and NULL kept apart."""
    assert pgarray.parse(text) == expected


@pytest.mark.parametrize(
    "text", ["{{1,2},{3,4}}", "1,2", '{"open', "[1:2]", "[0:1]={7,8}", "[0:1][1:1]={{1},{2}}"]
)
def test_bad_array_literals_are_refused(text):
    """Multi-dimensional arrays and arrays with explicit bounds (which a Spark array cannot
    hold) are refused, so they go to quarantine instead of losing their shape."""
    with pytest.raises(pgarray.ArrayLiteralError):
        pgarray.parse(text)


def _pg_array_text(items: list[str | None]) -> str:
    def one(x: str | None) -> str:
        if x is None:
            return "NULL"
        return '"' + x.replace("\\", "\\\\").replace('"', '\\"') + '"'

    return "{" + ",".join(one(x) for x in items) + "}"


@given(st.lists(st.one_of(st.none(), st.text())))
def test_array_literal_round_trip(items):
    """Whatever text elements, quoted as PostgreSQL quotes them, parse back."""
    assert pgarray.parse(_pg_array_text(items)) == items


@pytest.mark.parametrize(
    ("pg", "typmod", "spark"),
    [
        ("integer", -1, "int"),
        ("bigint", -1, "long"),
        ("numeric", (12 << 16 | 3) + 4, "decimal(12,3)"),
        ("numeric", -1, "string"),
        ("numeric", (40 << 16 | 2) + 4, "string"),
        ("timestamp with time zone", -1, "timestamp"),
        ("timestamp without time zone", -1, "timestamp_ntz"),
        ("bytea", -1, "binary"),
        ("integer[]", -1, "array<int>"),
        ("jsonb", -1, "string"),
        ("uuid", -1, "string"),
        ("date[]", -1, "array<date>"),
        ("box[]", -1, "string"),
        ("numeric", (2 << 16 | 5) + 4, "string"),
        ("numeric", (2 << 16 | (-3 & 0x7FF)) + 4, "string"),
    ],
)
def test_spark_types(pg, typmod, spark):
    """Each PostgreSQL type maps to the Spark type that holds its values exactly."""
    assert pgtypes.spark_type(pg, typmod) == spark


def _info(first_seq: int, last_seq: int):
    """A batch's info between ticks at these event sequence positions."""
    import datetime as dt

    from cdc.pg.batch import BatchInfo

    now = dt.datetime.now(dt.UTC)
    return BatchInfo(1, 2, 1, now, now, cur_tick_event_seq=last_seq, prev_tick_event_seq=first_seq)


def test_jdbc_slices_cover_every_ev_id():
    from cdc.pg.batch import jdbc_slices

    slices = jdbc_slices(_info(first_seq=100, last_seq=200), 4)
    assert slices == [(None, 125), (125, 150), (150, 175), (175, None)]
    assert jdbc_slices(_info(first_seq=5, last_seq=5), 2) == [(None, 6), (6, None)]


def test_the_example_configuration_is_valid():
    pipe = config.load(Path(__file__).parents[2] / "conf" / "pipeline.toml")
    assert [t.mode for t in pipe.tables] == ["mirror", "history", "mirror"]


def test_a_missing_java_is_a_clear_message(monkeypatch, tmp_path):
    from cdc import spark

    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-java-here"))
    with pytest.raises(ConfigError, match="no Java found: Spark needs Java 17 or 21"):
        spark.java_major()


def test_a_wrong_java_is_a_clear_message(monkeypatch, tmp_path):
    from cdc import spark

    java = tmp_path / "bin" / "java"
    java.parent.mkdir()
    java.write_text("#!/bin/sh\necho 'openjdk version \"11.0.2\" 2019-01-15' >&2\n")
    java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(ConfigError, match="is Java 11; Spark 4 needs Java 17 or 21"):
        spark.java_major()
