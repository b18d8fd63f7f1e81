"""Which engine answers `cdc sql` (cdc.ops.query_engine): datafusion for path targets on a
local master, Spark for catalog targets, clusters, stores delta-rs is not set up for and
Spark's own statements; the command line of ``cdc sql`` parsed without the other commands."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys

import pytest

from cdc import cli, config
from cdc.config import Pipeline
from cdc.errors import ConfigError
from cdc.ops import query_engine
from cdc.ops.query_engine import AUTO, DATAFUSION, SPARK, Pins, choose


def pipeline(path: str, *targets: str) -> Pipeline:
    return config.parse(
        {
            "source": {"dsn": "dbname=unused", "queue": "q", "consumer": "c"},
            "target": {"path": path},
            "tables": [{"source": f"public.t{n}", "target": t} for n, t in enumerate(targets)],
        }
    )


LOCAL = {"spark.master": "local[2]"}


@pytest.mark.parametrize("path", ["/data/lake", "file:///data/lake", "s3a://bucket/lake"])
def test_path_targets_on_a_local_master_take_datafusion(path: str) -> None:
    """Local paths and S3 URLs are delta-rs' to read; no master given is local[2]."""
    found = choose(pipeline(path, "orders", "sales/items"), AUTO, {})
    assert found.engine == DATAFUSION
    assert "master is local[2]" in found.reason


@pytest.mark.parametrize(
    ("path", "targets", "conf", "why"),
    [
        ("/lake", ("orders", "shop.items"), LOCAL, "shop.items is a catalog target"),
        ("abfss://c@a.dfs.core.windows.net/lake", ("orders",), LOCAL, "abfss:// URL"),
        ("/lake", ("orders",), {"spark.master": "spark://h:7077"}, "master is spark://h:7077"),
    ],
)
def test_spark_answers_what_delta_rs_does_not_reach_here(
    path: str, targets: tuple[str, ...], conf: dict[str, str], why: str
) -> None:
    """A catalog target, a store delta-rs is not set up for, a cluster: Spark, and why."""
    found = choose(pipeline(path, *targets), AUTO, conf)
    assert found.engine == SPARK and why in found.reason, found


@pytest.mark.parametrize(
    "statement",
    [
        "describe detail orders",
        "DESC HISTORY orders",
        "  show tblproperties orders",
        "select * from orders version as of 3",
        "select * from orders TIMESTAMP  AS OF '2026-01-01'",
        "select count(*) from delta.`/lake/orders`",
    ],
)
def test_spark_sql_of_its_own_takes_spark(statement: str) -> None:
    """Delta's statements, time travel and path tables are Spark SQL only."""
    found = choose(pipeline("/lake", "orders"), AUTO, LOCAL, statement)
    assert found.engine == SPARK and "the statement is Spark's own" in found.reason
    assert choose(pipeline("/lake", "orders"), AUTO, LOCAL, "select 1").engine == DATAFUSION


def test_an_engine_asked_for_is_taken() -> None:
    """--engine spark and --engine datafusion are taken as given; another name is refused."""
    p = pipeline("/lake", "shop.items")
    assert choose(p, SPARK, LOCAL).engine == SPARK
    assert choose(p, DATAFUSION, LOCAL).engine == DATAFUSION
    assert query_engine.unreachable(p) == {
        "shop.items": "shop.items is a catalog target (its name is Spark's catalog's)"
    }
    with pytest.raises(ConfigError, match="--engine must be one of auto, datafusion, spark"):
        choose(p, "duckdb", LOCAL)


def test_no_tick_asked_pins_nothing() -> None:
    """Without --at-tick or --consistent every table is read at its latest version."""
    assert query_engine.pins(pipeline("/lake", "orders"), None, False) is None


def test_pins_describe_the_tick_and_each_version() -> None:
    """The log line of a read at a tick: the tick, its time, each table's version."""
    pins = Pins(42, {"orders": 7, "items": None}, dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC))
    assert pins.describe() == "tick 42 (2026-01-02 03:04:05 UTC): items@empty, orders@7"


def test_sql_is_parsed_without_the_other_commands() -> None:
    """`cdc sql` (after -v) builds its parser alone; its options are those of the full one."""
    assert cli.parser.fast_command(["-v", "sql", "select 1"]) == "sql"
    assert cli.parser.fast_command(["drain", "--config", "sql"]) is None
    assert cli.parser.fast_command(["--help"]) is None
    argv = ["sql", "select 1", "--config", "p.toml", "--engine", "spark", "--at-tick", "9"]
    alone = cli.build_parser("sql").parse_args(argv)
    full = cli.build_parser().parse_args(argv)
    assert vars(alone).keys() == vars(full).keys()
    assert (alone.engine, alone.at_tick, alone.consistent) == ("spark", 9, False)
    with pytest.raises(SystemExit):
        cli.build_parser("sql").parse_args([*argv, "--consistent"])


def test_cdc_sql_on_datafusion_imports_nothing_of_spark(tmp_path) -> None:
    """The datafusion path of `cdc sql` (its pins at a tick too) imports no pyspark or py4j."""
    import pyarrow as pa
    from deltalake import write_deltalake

    write_deltalake(str(tmp_path / "orders"), pa.table({"id": [1, 2, 3]}))
    conf = tmp_path / "p.toml"
    conf.write_text(
        "[source]\ndsn = 'dbname=unused'\nqueue = 'q'\nconsumer = 'c'\n"
        f"[target]\npath = '{tmp_path}'\n[[tables]]\nsource = 'public.orders'\ntarget = 'orders'\n"
    )
    code = (
        "import sys\nfrom cdc.cli import main\nimport cdc.ops.at_tick  # --at-tick's pins\n"
        f"code = main(['sql', 'select sum(id) as s from orders', '--config', {str(conf)!r},"
        " '--format', 'csv'])\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j')))\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["s", "6", "[]"]
