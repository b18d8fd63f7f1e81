"""Catalog targets without Spark: where their files live, which names are refused, which
targets of a pipeline are catalog names; and the statement splitter of `cdc sql`."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cdc import config
from cdc.errors import ConfigError
from cdc.targets import catalog
from cdc.targets.table import TableRef

BASE = {
    "source": {"dsn": "postgresql://x/y", "queue": "q", "consumer": "c"},
    "target": {"path": "/data/delta"},
    "tables": [
        {"source": "public.orders", "target": "orders"},
        {"source": "public.reviews", "target": "uxdb.reviews"},
    ],
}


@pytest.mark.parametrize(
    ("base", "name", "folder"),
    [
        ("/data/delta", "uxdb.reviews", "/data/delta/_spark_warehouse/uxdb.db/reviews"),
        ("/data/delta", "default.ux_reviews", "/data/delta/_spark_warehouse/ux_reviews"),
        ("/data/delta/", "UXDB.Reviews", "/data/delta/_spark_warehouse/uxdb.db/reviews"),
        ("/data/delta", "main.uxdb.reviews", "/data/delta/_spark_warehouse/main/uxdb.db/reviews"),
        ("/data/delta", "main.default.r", "/data/delta/_spark_warehouse/main/default.db/r"),
        ("s3a://bucket/lake", "uxdb.reviews", "s3a://bucket/lake/_spark_warehouse/uxdb.db/reviews"),
        ("relative", "db.t", "relative/_spark_warehouse/db.db/t"),
    ],
)
def test_a_catalog_target_lives_in_the_warehouse_layout_under_target_path(
    base: str, name: str, folder: str
) -> None:
    """db.table is <base>/_spark_warehouse/db.db/table (default: no db folder), lower case."""
    assert catalog.location(base, name) == folder
    assert TableRef.of(base, name) == TableRef(folder, name)


@pytest.mark.parametrize(
    ("name", "is_name"),
    [("orders", False), ("a/b.c", False), ("db.t", True), ("c.db.t", True), ("v1.2", True)],
)
def test_a_catalog_name_holds_a_dot_and_no_slash(name: str, is_name: bool) -> None:
    """The one rule that tells a catalog name from a path."""
    assert catalog.is_name(name) is is_name


@pytest.mark.parametrize("target", ["a..b", ".b", "a.", "a.b.c.d", "a. b"])
def test_bad_catalog_names_are_refused_with_the_key(target: str) -> None:
    """An empty part, spaces around one, or more than three parts: one line naming the key."""
    data = {**BASE, "tables": [{"source": "public.orders", "target": target}]}
    with pytest.raises(ConfigError, match=r"tables\[1\]\.target must be a catalog name"):
        config.parse(data)


def test_a_bad_catalog_quarantine_is_refused() -> None:
    """target.quarantine is checked as a target name is."""
    data = {**BASE, "target": {"path": "/d", "quarantine": "a.b.c.d"}}
    with pytest.raises(
        ConfigError, match=r"target\.quarantine must be a catalog name .*, not 'a\.b\.c\.d'"
    ):
        config.parse(data)


def test_the_catalog_names_of_a_pipeline_include_its_own_tables() -> None:
    """The tables' catalog targets; with a catalog quarantine, its failing marks and snapshot
    progress too; path targets are not among them."""
    assert catalog.names(config.parse(BASE)) == ["uxdb.reviews"]
    data = {**BASE, "target": {"path": "/d", "quarantine": "ops.quarantine"}}
    pipeline = config.parse(data)
    assert catalog.names(pipeline) == [
        "uxdb.reviews",
        "ops.quarantine",
        "ops.quarantine_failing",
        "ops.quarantine_snapshots",
    ]
    assert pipeline.table(pipeline.failing_table).location == (
        "/d/_spark_warehouse/ops.db/quarantine_failing"
    )


def test_quoted_names_double_backticks() -> None:
    """Each part is quoted on its own."""
    assert catalog.quoted("a`b.c") == "`a``b`.`c`"


def test_catalog_imports_without_pyspark() -> None:
    """The configuration resolves catalog targets with no Spark imported."""
    code = (
        "import sys, cdc.targets.catalog, cdc.config, cdc.spark;"
        " assert 'pyspark' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(
    ("text", "statements", "rest"),
    [
        ("select 1;", ["select 1"], ""),
        ("select 1; select 2;\n", ["select 1", "select 2"], ""),
        ("select 1", [], "select 1"),
        ("select ';' as s; sel", ["select ';' as s"], " sel"),
        ('select "a;b", `c;d`;', ['select "a;b", `c;d`'], ""),
        ("select 'it\\'s;'; x", ["select 'it\\'s;'"], " x"),
        ("select 'a''b;c';", ["select 'a''b;c'"], ""),
        ("-- a comment; still\nselect 1;", ["-- a comment; still\nselect 1"], ""),
        ("/* ; */ select 1 /* ; */;", ["/* ; */ select 1 /* ; */"], ""),
        ("-- only a comment\n;;  ;\n", [], ""),
        ("select 'open;\n", [], "select 'open;\n"),
        ("select 1; /* open;\n", ["select 1"], " /* open;\n"),
    ],
)
def test_statements_end_at_semicolons_outside_quotes_and_comments(
    text: str, statements: list[str], rest: str
) -> None:
    """`cdc sql`'s interactive mode runs each ;-terminated statement; the rest waits."""
    from cdc.ops import query

    assert query.split(text) == (statements, rest)
