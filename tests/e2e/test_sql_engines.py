"""`cdc sql` answers alike on its two engines, Spark SQL and DataFusion through delta-rs, over
the type sweep's tables (tests/e2e/test_type_sweep.py: every type at its edges, captured in
json and drained by Spark): every row of ``select *``, aggregates over every column, filters
on each kind of column, and the quarantine. Where the two SQL dialects give different answers
to one statement, the statement is in DIFFERENT with the reason (docs: "Dialects"); the test
fails when another statement differs, or when one of those stops differing.

Then the reads at a tick on both engines: ``--at-tick`` gives each table as the batch that
ended at that tick left it, ``--consistent`` the last finished batch's, a catalog target
(Spark) too."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import psycopg
import pytest

from cdc import cli
from cdc.config import Pipeline
from cdc.errors import ConfigError
from cdc.ops import at_tick
from cdc.ops.query import SparkQueries
from cdc.ops.query_datafusion import DataFusionQueries
from cdc.ops.query_text import Result
from cdc.pg import capture
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Queue
from cdc.pipeline.drain import Drain
from tests.e2e import test_type_sweep as sweep
from tests.support import drainkit

pytestmark = pytest.mark.spark

# statement (by its label) -> why the engines answer it differently
DIFFERENT: dict[str, str] = {}


@dataclass(frozen=True)
class Fails:
    """An error whose message holds this text."""

    text: str


# where the dialects differ (docs: "Dialects"): statement -> (Spark's answer, DataFusion's),
# an answer as (column names, rows) or Fails
DIALECTS: dict[str, tuple[Any, Any]] = {
    # integer division: Spark's / is a double, DataFusion's an integer division
    "select id / 2 as h from sweep_0 where id = 3": ((["h"], [(1.5,)]), (["h"], [(1,)])),
    # overflow: Spark (ANSI mode) refuses, DataFusion wraps around
    "select max(i8) + 1 as o from sweep_0": (Fails("ARITHMETIC_OVERFLOW"), (["o"], [(-(2**63),)])),
    # double quotes: a string in Spark SQL, a column name in DataFusion
    'select "id" as v from sweep_0 where id = 2': ((["v"], [("id",)]), (["v"], [(2,)])),
    # a column without an alias is named by each engine its way
    "select count(*) from sweep_0 where id < 3": ((["count(1)"], [(2,)]), (["count(*)"], [(2,)])),
    # concatenation with NULL: NULL in Spark, the other strings in DataFusion
    "select concat('a', null) as c": ((["c"], [(None,)]), (["c"], [("a",)])),
    # DataFusion's timestamp literals are nanoseconds: years 1677 to 2262 only
    "select count(*) as n from sweep_0 where ts < timestamp '1000-01-01 00:00:00'": (
        (["n"], [(2,)]),
        Fails("simplify_expressions"),
    ),
    # function names: Spark's size, explode, year; DataFusion's cardinality, unnest, extract
    "select max(size(ia)) as n from sweep_1": ((["n"], [(3,)]), Fails("Invalid function 'size'")),
    # isnan of NULL: false in Spark, NULL in DataFusion (a WHERE clause drops the row on both)
    "select isnan(f4) as x from sweep_0 where id = 1": ((["x"], [(False,)]), (["x"], [(None,)])),
    # Delta's own statements are Spark's (auto takes Spark for them)
    "describe detail sweep_0": (None, Fails("syntax error")),
}

ENGINES = ("spark", "datafusion")
INTEGERS = ("tinyint", "smallint", "int", "bigint")


def statements(table: str, schema: list[tuple[str, str]]) -> dict[str, str]:
    """label -> statement over the table: every row; aggregates of every column; each filter
    of every column as a column of its truth values (NULL apart from false), and as a WHERE
    clause for the first column of each type (where the engines push it down into the files)."""
    found = {f"{table}: select *": f"select * from {table} order by id"}
    aggregates = ["count(*)"]
    filters: list[str] = []
    pushed: dict[str, list[str]] = {}
    for name, kind in schema:
        col = f"`{name}`"
        aggregates.append(f"count({col})")
        if kind in INTEGERS or kind.startswith("decimal"):
            aggregates += [f"sum({col})", f"min({col})", f"max({col})"]
            these = [f"{col} > 0", f"{col} < 0"]
        elif kind in ("float", "double"):
            aggregates += [f"min({col})", f"max({col})"]
            these = [f"{col} > 0", f"{col} = 0", f"{col} is not null and isnan({col})"]
        elif kind == "string":
            aggregates += [f"min({col})", f"max({col})", f"max(length({col}))"]
            these = [f"{col} = ''", f"{col} like '%é%'", f"{col} > 'a'"]
        elif kind == "date":
            aggregates += [f"min({col})", f"max({col})"]
            these = [f"{col} < date '1000-01-01'", f"{col} >= date '9999-12-31'"]
        elif kind.startswith("timestamp"):
            aggregates += [f"min({col})", f"max({col})"]
            these = [f"{col} < timestamp '1970-01-01 00:00:00'"]
        elif kind == "boolean":
            these = [f"{col}", f"not {col}"]
        else:
            these = []
        filters += these
        pushed.setdefault(kind, these)
    found[f"{table}: aggregates"] = (
        "select " + ", ".join(f"{a} as `a{n}`" for n, a in enumerate(aggregates)) + f" from {table}"
    )
    found[f"{table}: filters"] = (
        "select id, " + ", ".join(f"({f}) as `f{n}`" for n, f in enumerate(filters))
        + f" from {table} order by id"
    )  # fmt: skip
    for condition in (c for these in pushed.values() for c in these):
        found[f"{table}: where {condition}"] = (
            f"select id from {table} where {condition} order by id"
        )
    return found


def comparable(value: Any) -> Any:
    """A plain value in a form == compares as the engines mean it (NaN equal to NaN, -0.0
    apart from 0.0)."""
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else repr(value)
    if isinstance(value, list):
        return [comparable(v) for v in value]
    if isinstance(value, dict):
        return {k: comparable(v) for k, v in value.items()}
    return value


def same(a: Result, b: Result) -> bool:
    rows = [[comparable(list(r)) for r in x.rows] for x in (a, b)]
    return a.names == b.names and rows[0] == rows[1]


def first_difference(a: Result, b: Result) -> str:
    if a.names != b.names:
        return f"columns {a.names} / {b.names}"
    if len(a.rows) != len(b.rows):
        return f"{len(a.rows)} / {len(b.rows)} rows"
    for ra, rb in zip(a.rows, b.rows, strict=True):
        for name, x, y in zip(a.names, ra, rb, strict=True):
            if comparable(x) != comparable(y):
                return f"{name}: {str(x)[:60]!r} / {str(y)[:60]!r}"
    return "?"


def drained_sweep(conn: psycopg.Connection, dsn: str, spark, root: Path) -> Pipeline:
    """The type sweep's tables in json, every value of them drained by Spark into root."""
    conn.execute("set timezone = 'UTC'")
    conn.execute(sweep.PRELUDE)
    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()
    parts = [[c for c in p if c != "x" or sweep._has_xml(conn)] for p in sweep.PARTS]
    tables = {f"sweep_{n}": part for n, part in enumerate(parts)}
    for table, part in tables.items():
        sweep._create(conn, table, part)
        capture.attach(conn, f"public.{table}", CaptureOptions(queue="q", format="json"))
        sweep._fill(conn, table, part, later=False)
        sweep._fill(conn, table, part, later=True)
    pipe = drainkit.pipeline(
        dsn, str(root), [{"source": f"public.{t}", "target": t} for t in tables]
    )
    pipe = replace(pipe, drain=replace(pipe.drain, engine="spark"))
    with Drain(pipe, spark) as drain:
        drain.run()
    return pipe


def test_both_engines_answer_alike_over_every_type(conn, dsn, spark, tmp_path: Path) -> None:
    """select *, aggregates and filters over every type at its edges: the same rows from
    Spark and from DataFusion, but for the statements DIFFERENT names."""
    pipe = drained_sweep(conn, dsn, spark, tmp_path)
    on_spark, on_datafusion = SparkQueries(pipe, spark), DataFusionQueries(pipe)
    try:
        assert sorted(on_spark.names) == sorted(on_datafusion.names)
        work = {"_quarantine": "select * from _quarantine order by ev_id"}
        for t in pipe.tables:
            schema = spark.read.format("delta").load(pipe.location(t.target)).schema
            work |= statements(t.target, [(f.name, f.dataType.simpleString()) for f in schema])
            dialects = {q: [_answer(x, q) for x in (on_spark, on_datafusion)] for q in DIALECTS}
        differing, failing = {}, {}
        for label, statement in work.items():
            answers = []
            for queries in (on_spark, on_datafusion):
                try:
                    answers.append(queries.answer(statement))
                except Exception as exc:
                    failing[label] = f"{queries.engine}: {exc}"
            if len(answers) == 2 and not same(*answers):
                differing[label] = first_difference(*answers)
    finally:
        on_spark.close()
    assert len(work) > 20 and not failing, "\n".join(f"{k}: {v}" for k, v in failing.items())
    unexpected = {k: v for k, v in differing.items() if k not in DIFFERENT}
    assert not unexpected, "\n".join(f"{k}: {v}" for k, v in unexpected.items())
    assert set(differing) == set(DIFFERENT), "no longer different: update DIFFERENT and the docs"
    wrong = [
        f"{statement} on {engine}: {got}"
        for statement, expected in DIALECTS.items()
        for engine, want, got in zip(ENGINES, expected, dialects[statement], strict=True)
        if want is not None and not _matches(got, want)
    ]
    assert not wrong, "\n".join(wrong)


def _answer(queries: Any, statement: str) -> Result | str:
    try:
        return queries.answer(statement)
    except ConfigError as exc:
        return str(exc)


def _matches(got: Result | str, expected: Any) -> bool:
    if isinstance(expected, Fails):
        return isinstance(got, str) and expected.text in got
    return isinstance(got, Result) and (got.names, got.rows) == (expected[0], expected[1])


def _counts(capsys, argv: list[str]) -> dict[str, int]:
    """`cdc sql` run in this process: its one JSON line."""
    assert cli.main(argv) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_reads_at_a_tick_on_both_engines(conn, dsn, spark, tmp_path: Path, capsys) -> None:
    """--at-tick N: every table as the batch ending at tick N left it; --consistent: the last
    finished batch's; the same on DataFusion and on Spark, whose catalog target is pinned too."""
    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()
    for name in ("a", "b"):
        conn.execute(f"create table {name} (id int primary key, v text)")
        capture.attach(conn, f"public.{name}", CaptureOptions(queue="q"))
    conf = tmp_path / "pipeline.toml"
    conf.write_text(
        f"[source]\ndsn = '{dsn}'\nqueue = 'q'\nconsumer = 'delta'\n"
        f"[target]\npath = '{tmp_path / 'delta'}'\n"
        "[[tables]]\nsource = 'public.a'\ntarget = 'a'\n"
        "[[tables]]\nsource = 'public.b'\ntarget = 'shop.b'\n"
    )
    from cdc import config

    pipe = config.load(conf)
    ticks = []
    for first, last in ((1, 3), (4, 5)):
        for name in ("a", "b"):
            conn.execute(
                f"insert into {name} select g, 'v' from generate_series({first}, {last}) g"
            )
        with Drain(pipe, spark) as drain:
            drain.run()
        found = at_tick.last_consistent_tick(pipe)
        assert found is not None
        ticks.append(found[0])
    count_a = "select count(*) as n from a"
    both = "select (select count(*) from a) as a, (select count(*) from shop.b) as b"
    base = ["--config", str(conf), "--format", "json"]
    for engine in ("datafusion", "spark"):
        at_first = _counts(
            capsys, ["sql", count_a, *base, "--engine", engine, "--at-tick", str(ticks[0])]
        )
        assert at_first == {"n": 3}, engine
        last = _counts(capsys, ["sql", count_a, *base, "--engine", engine, "--consistent"])
        assert last == {"n": 5}, engine
    assert _counts(capsys, ["sql", both, *base, "--at-tick", str(ticks[0])]) == {"a": 3, "b": 3}
    assert _counts(capsys, ["sql", both, *base]) == {"a": 5, "b": 5}  # the pinned view is gone


def test_datafusion_reads_targets_in_object_storage(object_store, tmp_path: Path, capsys) -> None:
    """Targets in an S3 store, reached with the pipeline's S3A settings: auto takes DataFusion
    (a local master, no JVM), which reads them; no database is asked (its DSN is unused)."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from cdc.targets.delta import object_store as options

    root = object_store.bucket() + "/replica"
    settings = object_store.spark_settings()
    options.configure(settings)
    for target, rows in (("orders", 3), ("sales/items", 2)):
        url = f"{root}/{target}"
        table = pa.table({"id": list(range(rows))})
        write_deltalake(url, table, storage_options=options.storage_options(url))
    conf = tmp_path / "pipeline.toml"
    conf.write_text(
        "[source]\ndsn = 'host=/nonexistent dbname=unused'\nqueue = 'q'\nconsumer = 'c'\n"
        f"[target]\npath = '{root}'\n"
        "[[tables]]\nsource = 'public.orders'\ntarget = 'orders'\n"
        "[[tables]]\nsource = 'public.items'\ntarget = 'sales/items'\n"
        "[spark]\n" + "".join(f'"{k}" = "{v}"\n' for k, v in settings.items())
    )
    query = "select (select count(*) from orders) as o, (select count(*) from sales_items) as i"
    assert cli.main(["-v", "sql", query, "--config", str(conf), "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == {"o": 3, "i": 2}
    assert "cdc sql: engine datafusion: every table is a path delta-rs reads" in err
