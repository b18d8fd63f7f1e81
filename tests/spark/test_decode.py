"""Decoding in Spark, without PostgreSQL: each capture format's events to op and column -> text
(cdc.formats through cdc.engines.spark.decode), the Arrow and Spark classifiers agreeing, and text
values cast to Spark types (cdc.engines.spark.decode.cast_text): exact, or null (so the event is
quarantined), never a different value. Expected figures are PostgreSQL's own:
``d - date '1970-01-01'`` and ``extract(epoch from t) * 1000000``."""

from __future__ import annotations

import datetime

import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from cdc import formats
from cdc.engines.spark import decode
from cdc.engines.spark import formats as spark_formats
from cdc.pg.pgtypes import Column
from tests.support.ev_types import EV_TYPES

pytestmark = pytest.mark.spark


def _cast(spark, values: list[str | None], spark_type: str, show=None) -> list[object]:
    frame = spark.createDataFrame([(v,) for v in values], "a string")
    typed = decode.cast_text(F.col("a"), spark_type)
    return [r[0] for r in frame.select((show or (lambda c: c))(typed)).collect()]


def test_dates_keep_their_day_bc_and_after_9999(spark):
    """BC dates become Spark's astronomical years (44 BC is -43), on the same day count as
    PostgreSQL; years past 9999 stay; infinity and text that is not a date do not cast."""
    values = ["0044-03-15 BC", "0001-12-31 BC", "4713-01-01 BC", "1582-10-04", "0044-03-15",
              "12345-01-01", "5874897-12-31", "infinity", "-infinity", "2024-01-01 x"]  # fmt: skip
    days = _cast(spark, values, "date", F.unix_date)
    assert days == [-735160, -719163, -2440550, -141438, -703383, 3789391, 2145042905,
                    None, None, None]  # fmt: skip


def test_timestamptz_keep_their_instant_bc_and_after_9999(spark):
    """timestamptz text (+HH, +HH:MM:SS offsets, json's T form, BC) gives PostgreSQL's
    instant; infinity and the years Spark cannot hold do not cast."""
    values = ["0044-03-15 08:00:00+00 BC", "0044-03-15T08:00:00.5+00:00 BC",
              "1000-01-01 00:00:00+00", "9999-12-31 23:59:59.999999+00",
              "12345-01-01T00:00:00+00:00", "2024-01-01 12:00:00+05:53:28", "infinity",
              "294276-12-31 23:59:59+00"]  # fmt: skip
    micros = _cast(spark, values, "timestamp", F.unix_micros)
    assert micros == [-63517795200000000, -63517795199500000, -30610224000000000,
                      253402300799999999, 327403382400000000, 1704089192000000, None,
                      None]  # fmt: skip


def test_timestamps_without_zone_bc(spark):
    """timestamp (no zone) BC keeps its wall time in the astronomical year."""
    values = [
        "0044-03-15 08:00:00 BC",
        "0044-03-15T08:00:00.5 BC",
        "1000-01-01 00:00:00",
        "infinity",
    ]
    got = _cast(spark, values, "timestamp_ntz", lambda c: c.cast("string"))
    assert got == ["-0043-03-15 08:00:00", "-0043-03-15 08:00:00.5", "1000-01-01 00:00:00", None]


@pytest.mark.parametrize(
    ("spark_type", "text"),
    [
        ("array<date>", "{infinity,2024-01-01}"),
        ("array<timestamp>", '{"2024-01-01 00:00:00+00",-infinity}'),
        ("array<decimal(10,2)>", "{1.5,NaN}"),
        ("array<int>", "[0:1]={1,2}"),
        ("array<int>", "{{1,2},{3,4}}"),
    ],
)
def test_arrays_that_do_not_fit_do_not_cast(spark, spark_type, text):
    """An element that does not fit its type, explicit bounds or a second dimension make the
    whole array not cast (so the event is quarantined), never a NULL element."""
    assert _cast(spark, [text], spark_type) == [None]


def test_array_elements_cast_exactly(spark):
    """NULL elements stay NULL, BC dates inside arrays keep their day, empty arrays stay."""
    got = _cast(spark, ['{"0044-03-15 BC",2024-01-01,NULL}', "{}"], "array<date>",
                lambda c: F.transform(c, F.unix_date))  # fmt: skip
    assert got == [[-735160, 19723, None], []]


# (ev_type, ev_data) -> (fmt, op, kv): shapes and values from docs/event-format.md §3
DECODED = {
    "json": [
        (('{"op":"INSERT","table":["public","t1"],"pkey":["id"]}',
          '{"id":1,"name":"a b","val":10}'),
         ("json", "I", {"id": "1", "name": "a b", "val": "10"})),
        (('{"op":"UPDATE","table":["public","t1"],"pkey":["id"]}',
          '{"id":1,"n":"12.50","b":true,"i8":-9223372036854775808,"z":null,'
          '"j":"{\\"a\\": 1}","s":"é\\n\\"\\u0001"}'),
         ("json", "U", {"id": "1", "n": "12.50", "b": "true", "i8": "-9223372036854775808",
                        "z": None, "j": '{"a": 1}', "s": 'é\n"\x01'})),
        (('{"op":"DELETE","table":["public","t1"],"pkey":["id"]}', '{"id":1}'),
         ("json", "D", {"id": "1"})),
        (('{"op":"TRUNCATE","table":["public","t5"],"pkey":["id"]}', "{}"), ("json", "R", {})),
        (('{"op":"INSERT","table":["public","t1"],"pkey":["id"]}', "not json"),
         ("json", "I", None)),
    ],
    "urlenc": [
        (("I:id", "id=1&name=a+b&val=10"),
         ("urlenc", "I", {"id": "1", "name": "a b", "val": "10"})),
        (("U:id", "id=1&a=x%26y&b=1&c"),
         ("urlenc", "U", {"id": "1", "a": "x&y", "b": "1", "c": None})),
        (("D:a,b", "a=1&b=%C3%A9%3D%2B"), ("urlenc", "D", {"a": "1", "b": "é=+"})),
        (("I:", "My+Col=%25"), ("urlenc", "I", {"My Col": "%"})),
        (("R", ""), (None, "R", {})),
    ],
    "sql": [
        (("I", "(id,name,val) values ('1','a b',null)"),
         ("sql", "I", {"id": "1", "name": "a b", "val": None})),
        (("U", "name='x' where id='1'"), ("sql", "U", {"id": "1", "name": "x"})),
        (("D", "b='2' and a='1'"), ("sql", "D", {"a": "1", "b": "2"})),
        (("R", ""), (None, "R", {})),
        (("U", "garbage("), ("sql", "U", None)),
    ],
}  # fmt: skip
RAW_SCHEMA = (
    "ev_id long, ev_time timestamp, ev_txid long, ev_type string, ev_data string,"
    " ev_extra1 string, ev_extra2 string, ev_extra3 string, ev_extra4 string, tick_id long"
)


def _raw(spark, events: list[tuple[str | None, str | None]]):
    """Raw events as a batch holds them, ev_id 1, 2, ... in the given order."""
    when = datetime.datetime(2024, 1, 1)
    rows = [
        (i, when, 7, t, d, "public.t", None, None, None, 3) for i, (t, d) in enumerate(events, 1)
    ]
    return spark.createDataFrame(rows, RAW_SCHEMA)


def _decoded(frame) -> list[tuple[object, ...]]:
    rows = frame.orderBy("ev_id").select("fmt", "op", "kv").collect()
    return [(r.fmt, r.op, r.kv) for r in rows]


@pytest.mark.parametrize("fmt", formats.NAMES)
def test_each_format_decodes_to_op_and_column_texts(spark, fmt):
    """A format's INSERT, UPDATE, DELETE and TRUNCATE give their op and column -> text map
    (NULL as None, a TRUNCATE an empty map); a payload that does not decode gives no map.
    urlenc's and sql's bare R is a TRUNCATE of no format."""
    cases = DECODED[fmt]
    events = _raw(spark, [event for event, _ in cases])
    assert _decoded(decode.with_op_and_map(events, {fmt})) == [want for _, want in cases]


def test_a_batch_of_every_format_decodes_each_event_once(spark):
    """All formats in one frame, with unknown and NULL ev_types: every event comes out
    exactly once (the Python pass takes the sql row events only), decoded as on its own."""
    cases = [case for fmt in formats.NAMES for case in DECODED[fmt]]
    unknown = [(("X", "a=1"), (None, None, None)), ((None, None), (None, None, None))]
    events = _raw(spark, [event for event, _ in cases + unknown])
    assert _decoded(decode.with_op_and_map(events)) == [want for _, want in cases + unknown]


def test_truncates_alone_need_no_decoder(spark):
    """A batch of TRUNCATEs only (no format present) still gives op R and an empty map."""
    events = _raw(spark, [("R", ""), ('{"op":"TRUNCATE","table":["s","t"],"pkey":[]}', "{}")])
    assert formats.formats_of(pa.array(["R"])) == set()
    assert _decoded(decode.with_op_and_map(events, set())) == [(None, "R", {}), ("json", "R", {})]


def test_arrow_and_spark_classifiers_agree(spark):
    """For every ev_type shape, the Arrow classifier (COPY reads), the Spark aggregates (JDBC
    reads) and the Spark CASE (decoding) name the same format, or none."""
    events = _raw(spark, [(t, None) for t, _ in EV_TYPES])
    flags = events.groupBy("ev_id").agg(*spark_formats.format_flags()).orderBy("ev_id").collect()
    cases = events.select(spark_formats.format_of(F.col("ev_type"))).orderBy("ev_id").collect()
    for (ev_type, expected), flag, case in zip(EV_TYPES, flags, cases, strict=True):
        arrow = formats.formats_of(pa.array([ev_type], pa.string()))
        spark_flags = {name for name in formats.NAMES if flag[name]}
        assert arrow == spark_flags == expected, ev_type
        assert ({case[0]} - {None}) == expected, ev_type


COLUMNS = [
    Column("id", "integer", "int", True),
    Column("name", "text", "string", False),
    Column("val", "integer", "int", False),
]
UPDATES = {
    "json": ('{"op":"UPDATE","table":["public","t"],"pkey":["id"]}',
             '{"id":1,"name":"x","val":5}'),
    "urlenc": ("U:id", "id=1&name=x&val=5"),
    "sql": ("U", "name='x' where id='1'"),
}  # fmt: skip


@pytest.mark.parametrize("fmt", formats.NAMES)
def test_an_update_carries_every_column_only_in_a_full_row_format(spark, fmt):
    """A json or urlenc UPDATE carries every column; a sql UPDATE the key and the changed
    columns only, the others not present (so the fold keeps their earlier values)."""
    decoded = decode.decode_table(_raw(spark, [UPDATES[fmt]]), COLUMNS, {fmt})
    try:
        row = decoded.rows.collect()[0]
        carried = [c.name for i, c in enumerate(COLUMNS) if row[decode.present(i)]]
        values = [row[decode.value(i)] for i in range(len(COLUMNS))]
        assert decoded.bad.count() == 0
    finally:
        decoded.release()
    full = formats.by_name(fmt).full_row
    assert carried == (["id", "name", "val"] if full else ["id", "name"])
    assert values == ([1, "x", 5] if full else [1, "x", None])


def test_bad_events_name_their_reason(spark):
    """Unknown ev_type, undecodable payload per format, a value that does not cast and a
    missing key each go to the bad events with their reason, the raw event kept."""
    events = _raw(spark, [
        ("X", "id=1"),
        ("U", "id=1"),
        ('{"op":"INSERT","table":["public","t"],"pkey":["id"]}', "[1]"),
        ("I:id", "id=x&name=a&val=1"),
        ("D:id", "name=a"),
        ("R", ""),
    ])  # fmt: skip
    decoded = decode.decode_table(events, COLUMNS)
    try:
        bad = [(r.ev_id, r.ev_data, r.reason) for r in decoded.bad.orderBy("ev_id").collect()]
        good = [(r[decode.meta("ev_id")], r[decode.meta("op")]) for r in decoded.rows.collect()]
    finally:
        decoded.release()
    assert bad == [
        (1, "id=1", "unknown event type"),
        (2, "id=1", "undecodable sql payload"),
        (3, "[1]", "undecodable json payload"),
        (4, "id=x&name=a&val=1", "value does not cast to the column type: id"),
        (5, "name=a", "no value for key column id"),
    ]
    assert good == [(6, "R")]
