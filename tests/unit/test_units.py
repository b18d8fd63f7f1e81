"""Pure functions: error mapping and the SQL file loader (no database)."""

from __future__ import annotations

import re

import psycopg
import pytest

from cdc import errors, shipped
from cdc.pg import sqlfiles

TRIGGERS = shipped.folder("triggers")


@pytest.mark.parametrize(
    ("sqlstate", "cls"),
    [
        ("QC001", errors.QueueNotFound),
        ("QC003", errors.BatchNotFound),
        ("QC007", errors.PerTxLimitExceeded),
        ("QC012", errors.WrongIsolation),
    ],
)
def test_lookup_maps_sqlstate_to_class(sqlstate, cls):
    """Each engine SQLSTATE has its own exception class."""
    assert errors.lookup(sqlstate) is cls
    assert cls.sqlstate == sqlstate


def test_sqlstates_are_unique_and_all_documented():
    """Every QC code raised in the SQL has a class, and no two classes share a code."""
    codes = [c.sqlstate for c in errors.QueueError.__subclasses__()]
    assert len(codes) == len(set(codes))
    assert "QC020" in codes
    raised = set()
    for path in TRIGGERS.rglob("*.sql"):
        raised |= set(re.findall(r"errcode = '+(QC\d{3})'", path.read_text()))
    assert {"QC001", "QC014", "QC020", "QC026"} <= raised
    assert raised <= set(codes)


def test_translate_leaves_other_errors_alone():
    """A psycopg error with another SQLSTATE is returned unchanged."""
    exc = psycopg.errors.DivisionByZero("x")
    assert errors.translate(exc) is exc


@pytest.mark.parametrize(
    ("script", "folder"),
    [
        ("queue/install.sql", "functions"),
        ("capture/install.sql", "functions"),
        ("capture/install.sql", "formats"),
    ],
)
def test_install_script_includes_every_function_file(script, folder):
    """An install.sql includes every file of its functions/ (and formats/) folder, each once,
    so nothing ships uninstalled."""
    part = script.split("/")[0]
    included = re.findall(rf"^\\ir {folder}/(\S+)$", sqlfiles.read(script), re.M)
    present = {p.name for p in TRIGGERS.joinpath(part, folder).iterdir() if p.name.endswith(".sql")}
    assert present
    assert len(included) == len(set(included))
    assert set(included) == present


def test_every_sql_file_is_installed_or_read():
    """Every .sql file under triggers/ is reached from install.sql, or is uninstall.sql, so
    none is dead; beside the code, cdc/pg/queries/ holds only files of named runtime queries
    (queries*.sql, read by name)."""
    reached = {"install.sql", "queue/uninstall.sql"}
    todo = ["install.sql"]
    while todo:
        path = todo.pop()
        base = path.rsplit("/", 1)[0] + "/" if "/" in path else ""
        for inc in re.findall(r"^\\ir (\S+)$", sqlfiles.read(path), re.M):
            reached.add(base + inc)
            todo.append(base + inc)
    files = {p.relative_to(TRIGGERS).as_posix() for p in TRIGGERS.rglob("*.sql")}
    assert files == reached
    runtime = {p.name for p in sqlfiles.QUERIES.iterdir() if p.name != "__pycache__"}
    assert "queries.sql" in runtime
    assert all(re.fullmatch(r"queries(_\w+)?\.sql", name) for name in runtime), runtime


def test_every_capture_format_has_its_file_and_dispatch():
    """Each format of cdc._cap_formats() has formats/<name>.sql defining its payload and
    ev_type functions, and both dispatchers name them."""
    dispatch = sqlfiles.read("capture/functions/cdc.capture_formats.sql")
    names = re.search(r"select array\[(.*)\];", dispatch).group(1)
    formats = re.findall(r"'(\w+)'", names)
    assert formats == ["json", "urlenc", "sql"]
    present = {p.name for p in TRIGGERS.joinpath("capture", "formats").iterdir()}
    assert present == {f"{name}.sql" for name in formats}
    for name in formats:
        text = sqlfiles.read(f"capture/formats/{name}.sql")
        for func in (f"cdc._cap_{name}_payload(", f"cdc._cap_{name}_ev_type("):
            assert f"create or replace function {func}" in text
            assert f"then return {func}" in dispatch


def test_expand_inlines_includes():
    """expand() replaces every \\ir line with the file's text."""
    text = sqlfiles.expand("queue/install.sql")
    assert "\\ir " not in text
    assert "create or replace function cdc.next_batch_custom(" in text


def test_named_queries_are_found():
    """queries.sql is split by its -- name: headers."""
    q = sqlfiles.queries()
    assert q["finish_batch"] == "select cdc.finish_batch(%(batch_id)s);"
    assert all(text for text in q.values())


def test_version_matches_sql():
    """The SQL engine reports the package's version."""
    from cdc import __version__

    assert f"'{__version__}'::text" in sqlfiles.read("queue/functions/cdc.info.sql")
