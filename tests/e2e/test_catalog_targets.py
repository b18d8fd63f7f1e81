"""Catalog targets (``db.table``) through every command, as a user runs them: snapshot, drain,
verify, status, sql and maintain from the command line, each its own process, in an empty
working directory that stays empty. The table's files live at target.path/_spark_warehouse/
uxdb.db/reviews and every command finds it there; ``cdc sql`` names it uxdb.reviews.

The same with a Hive metastore server (tests/support/metastore.py) named in [spark], the
names kept there for every process: `cdc sql` and another team's Spark job beside a running
drain, another pipeline's table of the same name refused.

Also `cdc sql`'s errors (one line, exit 1) and its interactive mode (many statements, one
session), run in this process on the tests' session."""

from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from cdc import config
from cdc.cli import exitcodes, main
from cdc.errors import ConfigError
from cdc.ops import query
from cdc.pg import capture
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Queue
from cdc.targets import catalog
from cdc.targets.table import TableRef
from tests.support.metastore import Metastore

pytestmark = pytest.mark.spark

TARGET = "uxdb.reviews"


def cdc(work: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cdc.cli", *args],
        cwd=work,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def ok(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == exitcodes.OK, proc.stderr[-3000:]
    return proc.stdout


def write_conf(tmp_path: Path, dsn: str, target: str = TARGET, extra: str = "") -> Path:
    conf = tmp_path / "pipeline.toml"
    conf.write_text(
        f"[source]\ndsn = '{dsn}'\nqueue = 'q'\nconsumer = 'delta'\n"
        f"[target]\npath = '{tmp_path / 'delta'}'\n"
        f"[[tables]]\nsource = 'public.reviews'\ntarget = '{target}'\n{extra}"
    )
    return conf


@pytest.fixture
def source(conn: psycopg.Connection) -> psycopg.Connection:
    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()
    conn.execute("create table reviews (id int primary key, stars int, body text)")
    capture.attach(conn, "public.reviews", CaptureOptions(queue="q"))
    conn.execute("insert into reviews select g, g % 5, 'r' || g from generate_series(1, 40) g")
    return conn


@pytest.mark.timeout(1800)  # six processes, each starting its own JVM
def test_a_catalog_target_through_every_command(
    source: psycopg.Connection, dsn: str, tmp_path: Path
) -> None:
    """uxdb.reviews (its database created as needed): snapshot, drain, verify, status, sql
    (describe detail, show tblproperties) and maintain all find the one table; nothing is
    written to the working directory."""
    conf = write_conf(tmp_path, dsn)
    work = tmp_path / "work"
    work.mkdir()
    folder = tmp_path / "delta" / "_spark_warehouse" / "uxdb.db" / "reviews"

    ok(cdc(work, "snapshot", "public.reviews", "--config", str(conf)))
    source.execute("update reviews set stars = 5 where id <= 10")
    source.execute("delete from reviews where id > 35")
    source.execute("insert into reviews values (41, 1, 'late')")
    ok(cdc(work, "drain", "--config", str(conf)))
    assert (folder / "_delta_log").is_dir()

    ok(cdc(work, "verify", "--config", str(conf)))

    status = cdc(work, "status", "--config", str(conf), "--json")
    assert status.returncode != exitcodes.COULD_NOT_RUN, status.stderr
    (table,) = json.loads(status.stdout)["tables"]
    assert (table["target"], table["exists"], table["rows"]) == (TARGET, True, 36)
    assert Path(table["location"]) == folder

    statements = (
        f"describe detail {TARGET};\n"
        f"show tblproperties {TARGET};\n"
        f"select count(*) as n, sum(stars) as s from {TARGET};\n"
    )
    out = ok(cdc(work, "sql", "--config", str(conf), "--format", "json", stdin=statements))
    detail, *rest = [json.loads(line) for line in out.splitlines()]
    assert Path(detail["location"].removeprefix("file:")) == folder
    assert detail["format"] == "delta"
    properties = {r["key"]: r["value"] for r in rest if "key" in r}
    assert "delta.columnMapping.mode" not in properties  # plain names: every reader reads it
    expected = source.execute("select count(*), sum(stars) from reviews").fetchone()
    assert [(r["n"], r["s"]) for r in rest if "n" in r] == [expected]

    out = ok(cdc(work, "maintain", "--config", str(conf)))
    assert TARGET in out

    assert list(work.iterdir()) == []


def test_a_name_the_session_holds_elsewhere_is_taken_over_only_when_session_only(
    spark, tmp_path: Path
) -> None:
    """In Spark's in-memory catalog a name registered at another path (another pipeline in this
    session) is moved to the pipeline's table; the old table's files stay."""
    for n, base in enumerate((tmp_path / "one", tmp_path / "two")):
        ref = TableRef.of(str(base), "movedb.t")
        spark.range(n + 1).write.format("delta").save(ref.location)
        catalog.register_table(spark, ref)
        assert spark.table("movedb.t").count() == n + 1
    assert (tmp_path / "one" / "_spark_warehouse" / "movedb.db" / "t" / "_delta_log").is_dir()


def test_sql_errors_are_one_line_and_exit_1(
    source: psycopg.Connection, dsn: str, tmp_path: Path, spark, capsys
) -> None:
    """A syntax error, an unknown table: `cdc: error: ...` on one line, exit code 1."""
    conf = write_conf(tmp_path, dsn)
    assert main(["sql", "--config", str(conf), "selec 1"]) == exitcodes.COULD_NOT_RUN
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("cdc: error: [PARSE_SYNTAX_ERROR]"), err
    assert "fix the statement's syntax" in err[0]

    assert main(["sql", "--config", str(conf), "select * from nowhere"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "TABLE_OR_VIEW_NOT_FOUND" in err[0], err
    assert "tables here: none yet" in err[0]


def test_interactive_sql_runs_statements_in_one_session(
    source: psycopg.Connection,
    dsn: str,
    tmp_path: Path,
    spark,
    capsys,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Statements from stdin run one after the other in one session (a view the first makes is
    there for the second); a bad one is one line and the next still runs; \\q stops."""
    conf = write_conf(tmp_path, dsn)
    stdin = (
        "create or replace temporary view cdc_answer as\n  select 41 + 1 as x;\n"
        "selec oops;\n"
        "select x from cdc_answer; select 'a;b' as y\n;\n"
        "\\q\n"
        "select 'never' as z;\n"
    )
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    assert main(["sql", "--config", str(conf), "--format", "csv"]) == exitcodes.COULD_NOT_RUN
    captured = capsys.readouterr()
    assert captured.out.splitlines() == ["x", "42", "y", "a;b"], captured.out
    errors = captured.err.strip().splitlines()
    assert len(errors) == 1 and "PARSE_SYNTAX_ERROR" in errors[0], errors


def test_path_targets_are_tables_of_the_session_in_sql(
    source: psycopg.Connection, dsn: str, tmp_path: Path, spark
) -> None:
    """A path target is named by its target name and answers describe detail too."""
    pipeline = config.load(write_conf(tmp_path, dsn, target="plain/reviews"))
    spark.range(3).write.format("delta").save(pipeline.location("plain/reviews"))
    names = query.register(pipeline, spark)
    assert names == ["plain_reviews"]
    out = query.execute(spark, "describe detail plain_reviews", 0, "json", names)
    assert json.loads(out)["location"].endswith("plain/reviews")
    with pytest.raises(ConfigError) as error:
        query.execute(spark, "select * from nothere", 0, "json", names)
    assert "\n" not in str(error.value)
    assert "TABLE_OR_VIEW_NOT_FOUND" in str(error.value) and "plain_reviews" in str(error.value)


READER = """
import json, sys
from cdc import spark as spark_module
spark = spark_module.session("another-team", json.loads(sys.argv[1]))
database, name = sys.argv[2].split(".")
tables = [t.name for t in spark.catalog.listTables(database)]
row = spark.sql(f"select count(*) as n, sum(stars) as s from {sys.argv[2]}").first()
print(json.dumps({"tables": tables, "rows": [row.n, row.s]}))
"""


def delta_rows(folder: Path) -> tuple[int, int] | None:
    """The table's (count, sum of stars) read by delta-rs; None before its first commit."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        stars = DeltaTable(str(folder)).to_pyarrow_table(columns=["stars"]).column("stars")
    except TableNotFoundError:
        return None
    return len(stars), sum(stars.to_pylist())


@pytest.mark.timeout(1800)  # six processes, each starting its own JVM, two at a time
def test_a_metastore_server_keeps_the_name_for_every_process_and_refuses_another_table(
    source: psycopg.Connection, dsn: str, tmp_path: Path, metastore: Metastore
) -> None:
    """With a Hive metastore server in [spark] (tests/support/metastore.py), the snapshot that
    creates the table registers it there; while a `cdc drain --follow` runs, `cdc sql` in
    another process finds it by name with the source's rows, a Spark job that knows only the
    metastore reads it, and a second pipeline naming the same table at another place stops
    before any work with one line; verify and status work after. No process writes to the
    working directory."""
    database = metastore.database()
    target = f"{database}.reviews"
    spark_section = "[spark]\n" + "".join(
        f'"{key}" = "{value}"\n' for key, value in metastore.spark_settings().items()
    )
    first = tmp_path / "first"
    first.mkdir()
    conf = write_conf(first, dsn, target=target, extra=spark_section)
    work = tmp_path / "work"
    work.mkdir()
    folder = first / "delta" / "_spark_warehouse" / f"{database}.db" / "reviews"

    ok(cdc(work, "snapshot", "public.reviews", "--config", str(conf)))
    source.execute("update reviews set stars = 5 where id <= 10")
    source.execute("delete from reviews where id > 35")
    source.execute("insert into reviews values (41, 1, 'late')")
    expected = tuple(source.execute("select count(*), sum(stars) from reviews").fetchone())

    drain_log = tmp_path / "drain.log"
    with drain_log.open("w") as log:
        drain = subprocess.Popen(
            [sys.executable, "-m", "cdc.cli", "drain", "--config", str(conf), "--follow"],
            cwd=work,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
    try:
        deadline = time.monotonic() + 300
        while delta_rows(folder) != expected:
            assert drain.poll() is None, drain_log.read_text()[-3000:]
            assert time.monotonic() < deadline, "the drain did not apply the changes in 300 s"
            time.sleep(1)

        statements = (
            f"describe table extended {target};\n"
            f"select count(*) as n, sum(stars) as s from {target};\n"
        )
        out = ok(cdc(work, "sql", "--config", str(conf), "--format", "json", stdin=statements))
        rows = [json.loads(line) for line in out.splitlines()]
        info = {r["col_name"]: r["data_type"] for r in rows if "col_name" in r}
        assert (info["Type"], info["Provider"]) == ("EXTERNAL", "delta")
        assert Path(info["Location"].removeprefix("file:")) == folder
        assert [(r["n"], r["s"]) for r in rows if "n" in r] == [expected]

        settings = json.dumps(metastore.spark_settings())
        out = ok(
            subprocess.run(
                [sys.executable, "-c", READER, settings, target],
                cwd=work,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
        )
        read = json.loads(out.splitlines()[-1])
        assert (read["tables"], tuple(read["rows"])) == (["reviews"], expected)

        other = tmp_path / "other"
        other.mkdir()
        other_conf = write_conf(other, dsn, target=target, extra=spark_section)
        refused = cdc(work, "sql", "--config", str(other_conf), "select 1")
        assert refused.returncode == exitcodes.COULD_NOT_RUN, refused.stderr[-3000:]
        (line,) = refused.stderr.strip().splitlines()
        assert f"the catalog already holds {target}" in line and "rename the target" in line
        assert str(folder) in line and not (other / "delta").exists()

        assert drain.poll() is None, drain_log.read_text()[-3000:]  # all of it beside the drain
    finally:
        drain.send_signal(signal.SIGTERM)
        try:
            drain.wait(120)
        except subprocess.TimeoutExpired:
            drain.kill()
            drain.wait()
    assert drain.returncode == exitcodes.OK, drain_log.read_text()[-3000:]

    ok(cdc(work, "verify", "--config", str(conf)))
    status = cdc(work, "status", "--config", str(conf), "--json")
    assert status.returncode != exitcodes.COULD_NOT_RUN, status.stderr
    (table,) = json.loads(status.stdout)["tables"]
    assert (table["target"], table["exists"], table["rows"]) == (target, True, expected[0])
    assert Path(table["location"]) == folder

    assert list(work.iterdir()) == []
