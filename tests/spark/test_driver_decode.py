"""The driver's decoder (cdc.engines.arrow.decode) against Spark's (cdc.engines.spark.decode):
every value of every type PostgreSQL writes decides, and equals Spark's cast, bit for bit;
every hostile text and event either equals Spark's answer or is left to Spark (undecided);
whole events of the three formats decode to the same rows."""

from __future__ import annotations

import json
import math
import random
import struct
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql import functions as F

from cdc.engines.arrow import decode as driver_decode
from cdc.engines.spark import decode
from cdc.formats.spec import Undecided
from cdc.pg.batch import EVENT_SCHEMA
from cdc.pg.pgtypes import Column
from cdc.targets.schema_drift import Drift
from tests.support.exact import bits

pytestmark = pytest.mark.spark


def _float4_texts(rnd: random.Random, n: int) -> list[str]:
    """Random float4 values as their shortest text (PostgreSQL's output)."""
    texts = []
    while len(texts) < n:
        single = struct.unpack("<f", struct.pack("<I", rnd.getrandbits(32)))[0]
        if math.isnan(single) or math.isinf(single):
            continue
        for digits in range(1, 10):
            text = f"{single:.{digits}g}"
            if struct.unpack("<f", struct.pack("<f", float(text)))[0] == single:
                texts.append(text)
                break
    return texts


def _double_texts(rnd: random.Random, n: int) -> list[str]:
    texts = []
    while len(texts) < n:
        double = struct.unpack("<d", struct.pack("<Q", rnd.getrandbits(64)))[0]
        if not (math.isnan(double) or math.isinf(double)):
            texts.append(repr(double).replace("inf", "Infinity"))
    return texts


RND = random.Random(7)
# per Spark type: (texts as PostgreSQL writes them: each must decide and equal Spark's,
# hostile texts: each must equal Spark's or be undecided)
CASES: dict[str, tuple[list[str], list[str]]] = {
    "short": (["0", "-32768", "32767", "12"], ["32768", " 12", "+12", "1.0", "1e2", "١٢", ""]),
    "int": (
        ["-2147483648", "2147483647", "0", "7"],
        ["2147483648", "12 ", "0x1F", "-", "00012", "1_000"],
    ),
    "long": (["-9223372036854775808", "9223372036854775807", "42"], ["9223372036854775808"]),
    "float": (
        [
            "0",
            "-0",
            "1.5",
            "0.1",
            "3.4028235e+38",
            "1e-45",
            "1.1754944e-38",
            "NaN",
            "Infinity",
            "-Infinity",
            "123456.79",
            "-2.5e-10",
            *_float4_texts(RND, 300),
        ],
        [
            *["3.5e38", "1e-50", "7.006492e-46", "1.0000000596046448", ".5", "5.", "inf"],
            # below and at a halfway point where rounding through a double would differ
            *["1.0000001788139343261718749", "1.000000178813934326171875", "nan", "1d"],
        ],
    ),
    "double": (
        [
            "0",
            "-0",
            "NaN",
            "Infinity",
            "-Infinity",
            "1e+308",
            "5e-324",
            "0.1",
            "1.7976931348623157e+308",
            *_double_texts(RND, 300),
        ],
        ["1e400", "-1e400", "1e-400", "0x1p3", "1.5f", " 1", "Inf", "+1.5", ".5", "5."],
    ),
    "boolean": (["t", "f", "true", "false"], ["yes", "TRUE", "1", "0", "on", "T", " t", ""]),
    "decimal(10,2)": (
        ["0.00", "-12345678.99", "12345678.99", "1.50", "-0.01"],
        ["1.555", "1e2", "NaN", "123456789.00", "1.5", "12", "-0", "+1.00", " 1.00", "1.0000"],
    ),
    "decimal(38,10)": (["1234567890123456789012345678.0123456789", "-0.0000000001"], []),
    "decimal(4,4)": (["0.1234", "-0.9999"], ["1.0000", "0.12345"]),
    "date": (
        ["2024-02-29", "0001-01-01", "9999-12-31", "1970-01-01"],
        ["2024-02-30", "0000-01-01", "2024-1-2", "10000-01-01", "0044-03-15 BC", "infinity"],
    ),
    "timestamp_ntz": (
        [
            "2024-01-02 03:04:05",
            "2024-01-02T03:04:05.123456",
            "0001-01-01 00:00:00",
            "9999-12-31 23:59:59.999999",
            "2024-01-02 03:04:05.5",
        ],
        [
            "2024-01-02 24:00:00",
            "2024-01-02 03:04:05.1234567",
            "2024-01-02 03:04:05+00",
            "0044-03-15 00:00:00 BC",
            "infinity",
            "2024-01-02 03:04",
        ],
    ),
    "timestamp": (
        [
            "2024-01-02 03:04:05+00",
            "2024-01-02 03:04:05.123+05:30",
            "2024-01-02T03:04:05-08:00",
            "1900-01-01 00:00:00+01",
            "9999-12-31 23:59:59.999999+00",
            "0001-01-01 12:00:00+05",
            "2024-07-01 00:00:00.000001-03:30",
        ],
        [
            "2024-01-02 03:04:05+05:30:15",
            "2024-01-02 03:04:05 +05",
            "2024-01-02 03:04:05",
            "0001-01-01 00:00:00+05",
            "9999-12-31 23:59:59-01",
            "2024-01-02 03:04:05Z",
            "2024-01-02 03:04:05+5",
            "infinity",
            "2024-01-02 03:04:05+19",
            # minutes past 59 (Python's timezone would take them), year 0 before its offset
            "2024-01-02 03:04:05+05:60",
            "2024-01-02 03:04:05-05:99",
            "0000-12-31 23:00:00-05",
        ],
    ),
    "binary": (["\\x", "\\x00ff10", "\\xDEADbeef"], ["\\x0", "\\xzz", "00ff", "\\\\x00"]),
    "string": (["", "a b", "ünï", "x\ny", "NULL", "{1,2}"], []),
    "array<int>": (["{}", "{1,NULL,-3}", "{7}"], ["{1,{2}}", "[0:1]={1,2}", "{1,x}", "1", "{1.5}"]),
    "array<date>": (["{2024-01-01,NULL}"], ["{infinity}", '{"0044-03-15 BC"}']),
    "array<string>": (['{"a b","x\\"y",NULL,"NULL",""}', "{a,b}"], ['{"unterminated}']),
    "array<decimal(6,2)>": (["{1.50,NULL,-9999.99}"], ["{NaN}", "{1.555}"]),
    "array<timestamp>": (['{"2024-01-02 03:04:05+00"}'], ['{"infinity"}']),
    "array<double>": (["{NaN,Infinity,1.5,-0}"], ["{1e400}"]),
    "array<boolean>": (["{t,f,NULL}"], ["{yes}"]),
}


def _plain(kind: pa.DataType) -> pa.DataType:
    """The type a value is compared in: dates and timestamps as their integers (Python's
    datetime holds no year outside 1-9999)."""
    if pa.types.is_list(kind):
        return pa.list_(_plain(kind.value_type))
    if pa.types.is_date32(kind):
        return pa.int32()
    if pa.types.is_timestamp(kind):
        return pa.int64()
    return kind


def _values(column: pa.Array | pa.ChunkedArray, kind: pa.DataType) -> list[Any]:
    return column.cast(kind).cast(_plain(kind)).to_pylist()


TYPES = sorted(CASES)


@pytest.fixture(scope="module")
def spark_casts(spark) -> dict[tuple[str, int], Any]:
    """Spark's cast of every text of CASES, in one job: (type, index) -> value."""
    rows = [
        (k, i, t)
        for k, name in enumerate(TYPES)
        for i, t in enumerate([*CASES[name][0], *CASES[name][1]])
    ]
    frame = spark.createDataFrame(rows, "k int, i int, t string")
    casts = [decode.cast_text(F.col("t"), name).alias(f"c{k}") for k, name in enumerate(TYPES)]
    table = frame.select("k", "i", *casts).toArrow()
    found: dict[tuple[str, int], Any] = {}
    for k, name in enumerate(TYPES):
        mine = table.filter(pc.equal(table.column("k"), k))
        values = _values(mine.column(f"c{k}"), driver_decode.arrow_type(name))
        for i, v in zip(mine.column("i").to_pylist(), values, strict=True):
            found[(name, i)] = v
    return found


@pytest.mark.parametrize("spark_type", TYPES)
def test_each_cast_decides_as_spark_casts(spark_casts, spark_type):
    written, hostile = CASES[spark_type]
    kind = driver_decode.arrow_type(spark_type)
    for i, text in enumerate(written + hostile):
        spark_value = spark_casts[(spark_type, i)]
        try:
            mine = driver_decode.cast(text, spark_type)
        except Undecided:
            assert i >= len(written), f"{spark_type}: {text!r} is undecided on the driver"
            continue
        assert spark_value is not None, f"{spark_type}: {text!r} decided, Spark gives null"
        # through Arrow as the decoded rows carry it
        mine = _values(pa.array([mine], kind), kind)[0]
        assert bits(mine) == bits(spark_value), f"{spark_type}: {text!r}"


@pytest.mark.parametrize("spark_type", TYPES)
def test_each_column_cast_is_spark_cast(spark_casts, spark_type):
    # a snapshot chunk's column (cdc.engines.arrow.decode.cast_column): every text
    # PostgreSQL writes at once, with a null, decides; each hostile text alone equals
    # Spark's cast or is undecided
    written, hostile = CASES[spark_type]
    kind = driver_decode.arrow_type(spark_type)
    got = _values(driver_decode.cast_column(pa.array([*written, None]), spark_type), kind)
    expected = [spark_casts[(spark_type, i)] for i in range(len(written))]
    assert [bits(v) for v in got] == [bits(v) for v in [*expected, None]]
    for i, text in enumerate(hostile, start=len(written)):
        try:
            mine = driver_decode.cast_column(pa.array([text]), spark_type)
        except Undecided:
            continue
        spark_value = spark_casts[(spark_type, i)]
        assert spark_value is not None, f"{spark_type}: {text!r} decided, Spark gives null"
        assert bits(_values(mine, kind)[0]) == bits(spark_value), f"{spark_type}: {text!r}"


COLUMNS = [
    Column("id", "integer", "int", True),
    Column("b", "boolean", "boolean", False),
    Column("n", "numeric(10,2)", "decimal(10,2)", False),
    Column("ts", "timestamp with time zone", "timestamp", False),
    Column("arr", "integer[]", "array<int>", False),
    Column("s", "text", "string", False),
    Column("f", "real", "float", False),
]
JSON_TYPE = '{{"op":"{}","table":["public","t"],"pkey":["id"]}}'


def _raw(events: list[tuple[str, str | None]]) -> pa.Table:
    rows = [
        {"ev_id": i + 1, "ev_txid": 100 + i // 3, "ev_retry": None, "ev_type": t, "ev_data": d}
        | {"ev_time": None, "ev_extra1": "public.t"}
        | {f"ev_extra{k}": None for k in (2, 3, 4)}
        for i, (t, d) in enumerate(events)
    ]
    return pa.Table.from_pylist(rows, EVENT_SCHEMA)


TICK = 1  # the batch's tick, as both decoders are given it


def _spark_rows(spark, raw: pa.Table, drift: Drift | None) -> tuple[pa.Table, int]:
    frame = spark.createDataFrame(raw).withColumn("tick_id", F.lit(TICK).cast("long"))
    decoded = decode.decode_table(frame, COLUMNS, drift=drift)
    try:
        bad = decoded.facts(COLUMNS).bad
        names = [decode.meta(n) for n in ("op", "ev_id", "ev_txid", "ev_time", "tick_id")]
        names += [decode.value(i) for i in range(len(COLUMNS))]
        names += [decode.present(i) for i in range(len(COLUMNS))]
        return decoded.rows.select(*names).toArrow(), bad
    finally:
        decoded.release()


def _same_rows(mine: pa.Table, spark_rows: pa.Table) -> None:
    spark_rows = spark_rows.cast(mine.schema).sort_by(decode.meta("ev_id"))
    assert mine.column_names == spark_rows.column_names
    for name, kind in zip(mine.column_names, mine.schema.types, strict=True):
        got = [bits(v) for v in _values(mine.column(name), kind)]
        assert got == [bits(v) for v in _values(spark_rows.column(name), kind)], name


GOOD_EVENTS = [
    (
        JSON_TYPE.format("INSERT"),
        json.dumps(
            {"id": 1, "b": True, "n": "1.50", "ts": "2024-01-02T03:04:05+00:00"}
            | {"arr": "{1,2}", "s": "x \u00e9\n", "f": "0.1"}
        ),
    ),
    (JSON_TYPE.format("UPDATE"), json.dumps({"id": 1, "b": False, "n": None, "s": None})),
    (JSON_TYPE.format("DELETE"), json.dumps({"id": 1, "b": None})),
    ("I:id", "id=2&b=t&n=-1.25&ts=2024-01-02+03%3A04%3A05%2B05%3A30&arr=%7B%7D&s=a+b%26c%3D&f"),
    ("U:id", "id=2&b=f&n=0.00&ts&arr=%7BNULL%2C3%7D&s=%C3%BC&f=NaN"),
    ("D:id", "id=2&b&n&ts&arr&s&f"),
    ("I", "(id,b,n,ts,arr,s,f) values ('3','t','2.00','2024-01-02 03:04:05-08','{5}','q''t',null)"),
    ("U", "s='new', f='-Infinity' where id='3'"),
    ("D", "id='3'"),
]


def test_events_decode_as_in_spark(spark):
    raw = _raw(GOOD_EVENTS)
    mine = driver_decode.decode(raw, COLUMNS, tick_id=TICK)
    assert mine is not None, "every event here is decided on the driver"
    spark_rows, bad = _spark_rows(spark, raw, None)
    assert bad == 0
    _same_rows(mine, spark_rows)


def _compact(event: tuple[str, str | None]) -> tuple[str, str | None]:
    """A json event as jsontriga writes it (no spaces, non-ASCII raw): decoded by shape."""
    ev_type, ev_data = event
    if not ev_type.startswith("{") or ev_data is None:
        return event
    return ev_type, json.dumps(json.loads(ev_data), separators=(",", ":"), ensure_ascii=False)


def test_events_in_the_triggers_form_decode_by_shape_as_in_spark(spark):
    # many events of each shape, so that each is decoded by its shape (Format.driver_shape)
    raw = _raw([_compact(e) for e in GOOD_EVENTS for _ in range(3)])
    mine = driver_decode.decode(raw, COLUMNS, tick_id=TICK)
    assert mine is not None
    spark_rows, bad = _spark_rows(spark, raw, None)
    assert bad == 0
    _same_rows(mine, spark_rows)


def test_the_value_a_column_had_before_it_existed_fills_full_rows(spark):
    # json and urlenc rows without column s, and a sql UPDATE: only full-row events are
    # given the missing value (schema_drift.Drift.missing)
    events = [
        (JSON_TYPE.format("INSERT"), json.dumps({"id": 1, "b": True})),
        (JSON_TYPE.format("UPDATE"), json.dumps({"id": 1, "b": False})),
        _compact((JSON_TYPE.format("UPDATE"), json.dumps({"id": 1, "b": True}))),
        ("I:id", "id=2&b=t"),
        ("U:id", "id=1&b=t"),
        ("U", "b='f' where id='1'"),
        (JSON_TYPE.format("DELETE"), json.dumps({"id": 1})),
    ]
    drift = Drift(COLUMNS, missing={5: "before"})
    raw = _raw(events)
    mine = driver_decode.decode(raw, COLUMNS, drift, TICK)
    assert mine is not None
    spark_rows, bad = _spark_rows(spark, raw, drift)
    assert bad == 0
    _same_rows(mine, spark_rows)


HOSTILE_EVENTS = [
    (JSON_TYPE.format("INSERT"), '{"id": 1, "id": 2}'),  # a repeated name
    (JSON_TYPE.format("INSERT"), '{"id": 1, "f": 1.5}'),  # a bare non-integral number
    (JSON_TYPE.format("INSERT"), '{"id": 1, "s": {"x": 1}}'),  # a nested object
    (JSON_TYPE.format("INSERT"), '{"id": 1, "f": NaN}'),
    (JSON_TYPE.format("INSERT"), '{"id": 1} trailing'),
    (JSON_TYPE.format("INSERT"), "[1, 2]"),
    (JSON_TYPE.format("INSERT"), '{"id": "\\ud800"}'),  # a lone surrogate
    (JSON_TYPE.format("INSERT"), '{"id": 99999999999999999999}'),
    (JSON_TYPE.format("INSERT"), '{"id": 1, "nosuch": "x"}'),  # a column the source lacks
    (JSON_TYPE.format("INSERT"), '{"b": true}'),  # no key
    (JSON_TYPE.format("TRUNCATE"), "{}"),
    (JSON_TYPE.format("MERGE"), '{"id": 1}'),
    ('{"op": ["INSERT"]}', '{"id": 1}'),
    ("{not json", '{"id": 1}'),
    ("I:id", "id=1&s=%zz"),
    ("I:id", "id=1&s=%C3"),  # not UTF-8
    ("I:id", "id=1&id=2"),
    ("I:id", "id=1&&s=x"),
    ("I:id", "=1&id=1"),
    ("I", "(id) values (1)"),  # not a quoted literal
    ("U", "garbage"),
    ("R", ""),
    ("X", "id=1"),
    ("I:id", None),
]


@pytest.mark.parametrize("event", HOSTILE_EVENTS, ids=range(len(HOSTILE_EVENTS)))
def test_a_table_with_a_hostile_event_is_left_to_spark(event):
    # Spark decodes the table then, and quarantines what is bad
    assert driver_decode.decode(_raw([GOOD_EVENTS[0], event]), COLUMNS) is None
    assert driver_decode.decode(_raw([GOOD_EVENTS[0]]), COLUMNS) is not None


def test_a_target_type_unlike_the_source_is_left_to_spark():
    drift = Drift(COLUMNS, source_types={1: "string"})
    assert driver_decode.decode(_raw(GOOD_EVENTS), COLUMNS, drift) is None
