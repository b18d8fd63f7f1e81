"""Columns kept out of the target or masked in it (exclude_columns, mask: cdc.targets.masking)
through the real drain, snapshot, verify and quarantine replay, on the Arrow engine and on
Spark's: the target has no excluded column, a sha256 column holds the salted hex computed here
with hashlib from the value's text, a null one NULL; both engines give the same hex; a missing
salt and a key column nulled are refused. Real PostgreSQL, Spark and Delta."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from cdc.config import Pipeline
from cdc.errors import ConfigError
from cdc.pg import capture
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Queue
from cdc.pipeline import replay, verify
from cdc.pipeline.apply import BatchStats
from cdc.pipeline.drain import Drain
from cdc.pipeline.resync import resync
from cdc.pipeline.snapshot import Snapshot
from cdc.targets import failing, mask_record, masking
from cdc.targets.history import HISTORY_META
from tests.support import drainkit

pytestmark = pytest.mark.spark

SALT = "s3cret salt ü"
ENGINES = ("arrow", "spark")
TABLE = """create table {name} (
    id int primary key, email text, phone varchar(20), born date, notes text, code char(5),
    score int)"""
MASKED = {
    "exclude_columns": ["notes"],
    "mask": {
        "email": "sha256",
        "phone": "null",
        "born": "sha256",
        "code": "sha256",
        "sec_*": "sha256",  # columns added later (none at first)
    },
}
# id, email, phone, born, notes, code, score (born as PostgreSQL writes it: DateStyle ISO)
ROWS = [
    (1, "ann@example.com", "+1 555 0100", "1980-02-29", "secret one", "ab", 10),
    (2, "bob@example.com", None, "2024-12-31", "secret two", "abcde", -5),
    (3, None, "555", None, None, None, None),
    (4, "é ü 中 😀 'q' & = %", "", "0001-01-01", "", " x", 0),
]
# dates the Arrow decoder leaves to Spark (a BC year, one past 9999)
FAR = [
    (5, "far", "1", "10000-01-01", "n", "z", 1),
    (6, "bc", "2", "0044-03-15 BC", "n", "zz", 2),
]
TARGET_COLUMNS = ["id", "email", "phone", "born", "code", "score"]


def hexed(text: str | None) -> str | None:
    """The sha256 mask of a text, from its definition: salt bytes, then the text's."""
    if text is None:
        return None
    return hashlib.sha256(SALT.encode() + text.encode()).hexdigest()


def expected(row: tuple) -> tuple:
    """A source row as the masked target holds it (a char(n)'s text without its padding)."""
    id_, email, _phone, born, _notes, code, score = row
    return (id_, hexed(email), None, hexed(born), hexed(code and code.rstrip(" ")), score)


@pytest.fixture(autouse=True)
def salt(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(masking.SALT_ENV, SALT)


def _create(conn, name: str = "people", fmt: str = "json", attach: bool = True) -> None:
    conn.execute(TABLE.format(name=name))
    if attach:
        capture.attach(conn, f"public.{name}", CaptureOptions(queue="q", format=fmt))


def _insert(conn, rows: list[tuple], name: str = "people") -> None:
    with conn.cursor() as cur:
        cur.executemany(f"insert into {name} values (%s, %s, %s, %s, %s, %s, %s)", rows)


def _pipeline(dsn: str, root: Path, engine: str, tables: list[dict], **source) -> Pipeline:
    pipe = drainkit.pipeline(dsn, str(root), tables, **source)
    return replace(pipe, drain=replace(pipe.drain, engine=engine))


def _drain(pipe: Pipeline, spark) -> list[BatchStats]:
    stats: list[BatchStats] = []
    with Drain(pipe, spark) as drain:
        drain.run(on_batch=stats.append)
    return stats


def _source(conn, name: str = "people") -> list[tuple]:
    """The source's rows, born as its text in DateStyle ISO (BC dates included)."""
    conn.execute("set datestyle = 'ISO, YMD'")
    query = f"select id, email, phone, born::text, notes, code, score from {name} order by id"
    return conn.execute(query).fetchall()


def _target(spark, root: Path, target: str = "people") -> list[tuple]:
    frame = spark.read.format("delta").load(str(root / target))
    return sorted(tuple(r) for r in frame.select(*TARGET_COLUMNS).collect())


def _commits(location: Path) -> list[dict]:
    """The commitInfo of each version, oldest first."""
    infos = []
    for path in sorted((location / "_delta_log").glob("*.json")):
        for line in path.read_text().splitlines():
            action = json.loads(line)
            if "commitInfo" in action:
                infos.append(action["commitInfo"])
    return infos


def _writer(info: dict) -> str:
    return "delta-rs" if "delta-rs" in json.dumps(info.get("engineInfo", "")) else "spark"


@pytest.fixture
def queue(conn) -> None:
    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()


@pytest.mark.parametrize("engine", ENGINES)
def test_the_drain_masks_and_excludes(conn, dsn, spark, tmp_path, queue, engine):
    """Inserts, updates and a delete reach a mirror and a history target masked: no notes
    column, email, born and code as the salted hex of their text, phone NULL, NULL kept
    NULL; on the forced engine (Arrow decodes and writes every batch of ordinary values)."""
    _create(conn)
    _insert(conn, ROWS)
    tables = [
        {"source": "public.people", "target": "people", **MASKED},
        {"source": "public.people", "target": "people_h", "mode": "history", **MASKED},
    ]
    pipe = _pipeline(dsn, tmp_path, engine, tables)
    stats = _drain(pipe, spark)
    assert [s.routes["people"].split(" ")[0] for s in stats] == [engine]
    assert _target(spark, tmp_path) == [expected(r) for r in ROWS]

    conn.execute("update people set email = 'ann@new.example', notes = 'x' where id = 1")
    conn.execute("update people set phone = '999', score = 11 where id = 2")
    conn.execute("update people set notes = 'only an excluded column' where id = 4")
    conn.execute("delete from people where id = 3")
    stats = _drain(pipe, spark)
    assert [s.routes["people"].split(" ")[0] for s in stats] == [engine]
    now = _source(conn)
    assert _target(spark, tmp_path) == [expected(r) for r in now]
    schema = spark.read.format("delta").load(str(tmp_path / "people")).schema
    assert [(f.name, f.dataType.simpleString()) for f in schema] == [
        ("id", "int"),
        ("email", "string"),
        ("phone", "string"),
        ("born", "string"),
        ("code", "string"),
        ("score", "int"),
    ]
    history = spark.read.format("delta").load(str(tmp_path / "people_h"))
    assert history.columns == [n for n, _ in HISTORY_META] + TARGET_COLUMNS
    events = sorted(tuple(r) for r in history.where("id = 1").select(*TARGET_COLUMNS).collect())
    assert events == sorted([expected(ROWS[0]), expected(now[0])])
    assert "secret one" not in str(history.collect())
    # a column added with a default: the rows the target holds get its hash, which is all
    # the target's log ever holds of it
    conn.execute("alter table people add column sec_code text default 'S-0 default'")
    conn.execute("update people set sec_code = 'S-1 set' where id = 1")
    _drain(pipe, spark)
    codes = spark.read.format("delta").load(str(tmp_path / "people")).select("id", "sec_code")
    assert sorted(tuple(r) for r in codes.collect()) == [
        (1, hexed("S-1 set")), (2, hexed("S-0 default")), (4, hexed("S-0 default")),
    ]  # fmt: skip
    log = "".join(p.read_text() for p in (tmp_path / "people" / "_delta_log").glob("*.json"))
    assert hexed("S-0 default") in log and "S-0 default" not in log
    # the dates the Arrow decoder leaves to Spark: masked alike
    _insert(conn, FAR)
    _drain(pipe, spark)
    now = _source(conn)
    assert _target(spark, tmp_path) == [expected(r) for r in now]
    assert expected(now[-1])[3] == hexed("0044-03-15 BC")


def test_both_engines_give_the_same_hex_in_every_format(conn, dsn, spark, tmp_path, queue):
    """The same events in json, urlenc and sql, drained by one consumer per engine (Arrow,
    Spark, and the Arrow decode written by Spark) into their own folders: equal targets,
    equal to the hex computed here."""
    routes = ("arrow", "spark", "arrow+spark")
    for engine in routes:
        Consumer(conn, "q", engine).register()
    names = {fmt: f"people_{fmt}" for fmt in ("json", "urlenc", "sql")}
    for fmt, name in names.items():
        _create(conn, name, fmt)
        _insert(conn, ROWS + FAR, name)
        conn.execute(f"update {name} set code = 'new', email = email || '!' where id % 2 = 0")
    tables = [{"source": f"public.{n}", "target": n, **MASKED} for n in names.values()]
    found = {}
    for engine in routes:
        _drain(_pipeline(dsn, tmp_path / engine, engine, tables, consumer=engine), spark)
        found[engine] = {n: _target(spark, tmp_path / engine, n) for n in names.values()}
    for name in names.values():
        want = [expected(r) for r in _source(conn, name)]
        assert found["arrow"][name] == found["spark"][name] == found["arrow+spark"][name] == want


def test_whoever_holds_the_salt_finds_a_hash_with_sparks_sha2(spark):
    """docs/drain.md's query: Spark's sha2 of the salt and a value's text is the mask."""
    texts = ["ann@example.com", "0044-03-15 BC", "é ü 中 😀"]
    frame = spark.createDataFrame([(t,) for t in texts], "t string")
    found = frame.select(F.sha2(F.concat(F.lit(SALT), F.col("t")), 256)).collect()
    assert [r[0] for r in found] == [hexed(t) for t in texts]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_snapshot_is_masked_and_verify_compares_masked(conn, dsn, spark, tmp_path, engine):
    """A snapshot writes the rows masked (the Arrow path on the driver, or Spark's); verify
    masks the source alike and passes, then catches a masked value changed in the target."""
    Queue(conn, "q").create()
    _create(conn, attach=False)
    _insert(conn, ROWS + (FAR if engine == "spark" else []))
    capture.attach(conn, "public.people", CaptureOptions(queue="q"))
    pipe = _pipeline(
        dsn, tmp_path, engine, [{"source": "public.people", "target": "people", **MASKED}]
    )
    Snapshot(pipe, spark, progress=False).run("public.people")
    writers = {_writer(c) for c in _commits(tmp_path / "people") if c.get("operation") == "WRITE"}
    assert writers == {"delta-rs" if engine == "arrow" else "spark"}
    now = _source(conn)
    assert _target(spark, tmp_path) == [expected(r) for r in now]
    conn.execute("update people set email = 'later@example.com' where id = 2")
    [verdict] = verify.Verifier(pipe, spark).run()
    assert verdict.state == verify.OK, verdict
    assert verdict.source_rows == verdict.delta_rows == len(now)
    # a masked value tampered with in the target: a difference, with its column
    spark.sql(
        f"update delta.`{tmp_path / 'people'}` set email = '{hexed('someone@else')}' where id = 1"
    )
    [verdict] = verify.Verifier(pipe, spark).run()
    assert verdict.state == verify.DIFFERS and verdict.differences == 1
    [key] = verdict.keys
    assert key["key"] == {"id": 1}
    assert key["columns"] == [
        {"column": "email", "source": hexed("ann@example.com"), "delta": hexed("someone@else")}
    ]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_replayed_event_is_masked(conn, dsn, spark, tmp_path, queue, engine):
    """Events of a table captured before it was configured are quarantined; once it is in
    the file, with its key hashed too, replay writes them masked, and takes an event of a
    key changed since (matched by its hashed key) for superseded."""
    _create(conn)
    conn.execute("create table other (id int primary key)")
    capture.attach(conn, "public.other", CaptureOptions(queue="q"))
    _insert(conn, ROWS)
    before = [{"source": "public.other", "target": "other"}]
    _drain(_pipeline(dsn, tmp_path, engine, before), spark)
    hashed_key = {**MASKED, "mask": {**MASKED["mask"], "id": "sha256"}}
    after = [*before, {"source": "public.people", "target": "people", **hashed_key}]
    pipe = _pipeline(dsn, tmp_path, engine, after)
    conn.execute("update people set email = 'later@example.com' where id = 2")
    _drain(pipe, spark)  # the target holds key 2's later row only
    result = replay.Replayer(pipe, spark).replay("public.people")
    assert (result.replayed, result.superseded, result.failed) == (3, 1, 0)

    def masked_key(row: tuple) -> tuple:
        return (hexed(str(row[0])), *expected(row)[1:])

    now = _source(conn)
    assert _target(spark, tmp_path) == sorted(masked_key(r) for r in now)
    [verdict] = verify.Verifier(pipe, spark).run(["public.people"])
    assert verdict.state == verify.OK, verdict


def test_a_missing_salt_is_refused_before_anything_is_written(
    conn, dsn, spark, tmp_path, queue, monkeypatch
):
    """No $CDC_MASK_SALT: the drain, a snapshot and verify refuse at once, naming the
    variable; the queue keeps its events and no target is made."""
    _create(conn)
    _insert(conn, ROWS)
    pipe = _pipeline(
        dsn, tmp_path, "arrow", [{"source": "public.people", "target": "people", **MASKED}]
    )
    position = Consumer(conn, "q", "delta").position()
    monkeypatch.delenv(masking.SALT_ENV)
    for start in (
        lambda: Drain(pipe, spark),
        lambda: Snapshot(pipe, spark),
        lambda: verify.Verifier(pipe, spark),
        lambda: replay.Replayer(pipe, spark).replay("public.people"),
    ):
        with pytest.raises(ConfigError, match=r"public\.people has a sha256 mask.*CDC_MASK_SALT"):
            start()
    assert list(tmp_path.iterdir()) == []
    assert Consumer(conn, "q", "delta").position() == position
    open_batches = "select count(*) from cdc.subscription where sub_batch is not null"
    assert conn.execute(open_batches).fetchone()[0] == 0
    monkeypatch.setenv(masking.SALT_ENV, SALT)
    _drain(pipe, spark)  # with the salt, the same events
    assert _target(spark, tmp_path) == [expected(r) for r in ROWS]


def test_a_key_column_nulled_is_refused(conn, dsn, spark, tmp_path, queue):
    """mask gives the key "null": the table is failing with the reason, its target never
    made; the other tables go on."""
    _create(conn)
    _insert(conn, ROWS)
    tables = [{"source": "public.people", "target": "people", "mask": {"id": "null"}}]
    pipe = _pipeline(dsn, tmp_path, "arrow", tables)
    _drain(pipe, spark)
    marks = failing.read(spark, pipe.table(pipe.failing_table))
    assert 'mask gives key column id "null"' in marks["people"].reason
    assert not (tmp_path / "people").exists()


def test_new_rules_on_a_target_with_rows_are_refused_until_a_resync(
    conn, dsn, spark, tmp_path, queue, monkeypatch
):
    """The target records its rules: rows would never be written under others (another
    mask, or another salt) beside the ones it holds; a resync rewrites it under the new."""
    _create(conn)
    _insert(conn, ROWS)
    entry = {"source": "public.people", "target": "people", **MASKED}
    _drain(_pipeline(dsn, tmp_path, "arrow", [entry]), spark)
    monkeypatch.setenv(masking.SALT_ENV, "another salt")
    conn.execute("update people set score = 1 where id = 1")
    pipe = _pipeline(dsn, tmp_path, "arrow", [entry])
    _drain(pipe, spark)
    marks = failing.read(spark, pipe.table(pipe.failing_table))
    assert "masked with another salt" in marks["people"].reason
    monkeypatch.setenv(masking.SALT_ENV, SALT)
    unmasked_phone = {**entry, "mask": {k: v for k, v in MASKED["mask"].items() if k != "phone"}}
    pipe = _pipeline(dsn, tmp_path, "arrow", [unmasked_phone])
    resync(pipe, spark, "public.people", progress=False)
    props = spark.sql(f"show tblproperties delta.`{tmp_path / 'people'}`").collect()
    assert masking.resolve(pipe.tables[0].options, [], "x", listed=False).record() in {
        r[1] for r in props if r[0] == mask_record.PROPERTY
    }
    conn.execute("update people set phone = '777' where id = 4")
    _drain(pipe, spark)
    phones = spark.read.format("delta").load(str(tmp_path / "people")).select("id", "phone")
    assert sorted(tuple(r) for r in phones.collect()) == [
        (1, "+1 555 0100"), (2, None), (3, "555"), (4, "777"),
    ]  # fmt: skip
