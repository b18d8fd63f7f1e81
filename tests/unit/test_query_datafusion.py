"""`cdc sql`'s datafusion engine (cdc.ops.query_datafusion, cdc.targets.delta.datafusion) over
Delta tables delta-rs writes: the tables named as on Spark, names folded to lower case, the
three formats, one-line errors, versions pinned (and a table empty at a tick), a feature
QueryBuilder refuses, and interactive statements in one session. tests/e2e/test_sql_engines.py
compares its answers with Spark's over drained tables."""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from cdc import config
from cdc.config import Pipeline
from cdc.errors import ConfigError
from cdc.ops import query_shell
from cdc.ops.query_datafusion import DataFusionQueries, NotReadable, one_line
from cdc.targets.delta import datafusion


def pipeline(root: Path, *targets: str) -> Pipeline:
    return config.parse(
        {
            "source": {"dsn": "dbname=unused", "queue": "q", "consumer": "c"},
            "target": {"path": str(root)},
            "tables": [{"source": f"public.t{n}", "target": t} for n, t in enumerate(targets)],
        }
    )


@pytest.fixture
def lake(tmp_path: Path) -> Pipeline:
    """orders (two versions: 3 rows, then 5), sales/Items, a quarantine; one target absent."""
    write_deltalake(str(tmp_path / "orders"), pa.table({"id": [1, 2, 3], "Total": [10, 20, 30]}))
    more = pa.table({"id": [4, 5], "Total": [40, 50]})
    write_deltalake(str(tmp_path / "orders"), more, mode="append")
    write_deltalake(str(tmp_path / "sales" / "Items"), pa.table({"order_id": [1, 1, 2]}))
    write_deltalake(str(tmp_path / "_quarantine"), pa.table({"reason": ["bad"]}))
    return pipeline(tmp_path, "orders", "sales/Items", "not_yet")


def test_tables_are_named_as_on_spark_in_lower_case(lake: Pipeline) -> None:
    """Path targets by their target name (/ as _), the quarantine, no absent table."""
    queries = DataFusionQueries(lake)
    assert queries.names == ["orders", "sales_items", "_quarantine"]
    out = queries.run(
        'select o.id, o."Total", count(i.order_id) as n from ORDERS o'
        " left join Sales_Items i on i.order_id = o.id group by 1, 2 order by 1",
        2,
        "json",
    )
    assert [json.loads(line) for line in out.splitlines()] == [
        {"id": 1, "Total": 10, "n": 2},
        {"id": 2, "Total": 20, "n": 1},
    ]
    assert queries.run("select count(*) as n from _quarantine", 0, "csv") == "n\n1"


def test_errors_are_one_line_that_say_what_to_do(lake: Pipeline) -> None:
    """A syntax error names what DataFusion found; an unknown table lists the tables."""
    queries = DataFusionQueries(lake)
    with pytest.raises(ConfigError) as error:
        queries.run("selec 1", 0, "table")
    assert str(error.value).startswith("syntax error: Expected: an SQL statement, found: selec")
    assert "fix the statement's syntax" in str(error.value)
    with pytest.raises(ConfigError) as error:
        queries.run("select * from nope", 0, "table")
    assert "'datafusion.public.nope' not found" in str(error.value)
    assert "(tables here: orders, sales_items, _quarantine)" in str(error.value)
    with pytest.raises(ConfigError) as error:
        queries.run("select Total from orders", 0, "table")  # folded: total
    assert "\n" not in str(error.value) and "total" in str(error.value)


def test_a_table_is_read_at_its_pinned_version_or_empty(lake: Pipeline) -> None:
    """Pinned: orders at version 0 (3 rows); sales/Items empty with its columns; a target
    not pinned is read at its latest version."""
    queries = DataFusionQueries(lake, {"orders": 0, "sales/Items": None})
    assert queries.run("select count(*) as n from orders", 0, "csv") == "n\n3"
    assert queries.run("select * from sales_items", 0, "csv") == "order_id"
    assert queries.run("select count(*) as n from _quarantine", 0, "csv") == "n\n1"
    with pytest.raises(ConfigError, match="target orders: version 9 cannot be read"):
        DataFusionQueries(lake, {"orders": 9})


def test_a_feature_query_builder_refuses_is_not_readable(
    lake: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Type widening (cdc.targets.readers) makes the table NotReadable, before any query."""
    protocol = SimpleNamespace(reader_features=["typeWidening"], writer_features=["typeWidening"])
    widened = SimpleNamespace(protocol=lambda: protocol)
    assert datafusion.refusals(widened) == ["typeWidening"]
    monkeypatch.setattr(datafusion, "refusals", lambda table: ["typeWidening"])
    with pytest.raises(NotReadable, match="target orders has typeWidening"):
        DataFusionQueries(lake)


def test_limit_stops_reading(lake: Pipeline) -> None:
    """--limit: the first rows only; 0: all."""
    queries = DataFusionQueries(lake)
    assert queries.run("select id from orders order by id", 2, "csv") == "id\n1\n2"
    assert queries.run("select id from orders order by id", 0, "csv").count("\n") == 5


def test_interactive_statements_share_one_session(lake: Pipeline) -> None:
    """A view the first statement makes is there for the next; a bad one is one line on
    stderr and the next still runs; a backslash is no escape in DataFusion's quotes."""
    queries = DataFusionQueries(lake)
    out, err = io.StringIO(), io.StringIO()
    lines = [
        "create view big as\n",
        "  select id from orders where id > 3;\n",
        "selec oops;\n",
        "select count(*) as n from big; select 'a\\' as s;\n",
        "\\q\n",
        "select 'never';\n",
    ]
    failed = query_shell.interactive(queries, 0, "csv", lines, out, err)
    assert failed == 1
    assert out.getvalue().splitlines() == ["n", "2", "s", "a\\"]
    assert len(err.getvalue().splitlines()) == 1 and "syntax error" in err.getvalue()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Schema error: No field named x.\nValid fields are t.a.",
            "Schema error: No field named x. Valid fields are t.a.",
        ),
        (
            "This feature is not implemented: The context currently only supports a single SQL"
            " statement",
            "only supports a single SQL statement: give one statement",
        ),
    ],
)
def test_other_errors_are_joined_into_one_line(text: str, expected: str) -> None:
    """DataFusion's message on one line (and what to do where there is something)."""
    assert expected in one_line(text, ["t"]) and "\n" not in one_line(text, ["t"])
