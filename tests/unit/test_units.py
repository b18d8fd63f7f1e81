"""Pure functions: error mapping and the SQL file loader (no database)."""

from __future__ import annotations

import re
from importlib.resources import files
from importlib.resources.abc import Traversable

import psycopg
import pytest

from cdc import errors
from cdc.pg import sqlfiles


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
    for path in _sql_files(files("cdc").joinpath("sql")):
        raised |= set(re.findall(r"errcode = '+(QC\d{3})'", path.read_text()))
    assert {"QC001", "QC014", "QC020", "QC026"} <= raised
    assert raised <= set(codes)


def _sql_files(folder: Traversable) -> list[Traversable]:
    """Every .sql file under folder, at any depth."""
    found: list[Traversable] = []
    for p in folder.iterdir():
        if p.is_dir():
            found += _sql_files(p)
        elif p.name.endswith(".sql"):
            found.append(p)
    return found


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
    shipped = {
        p.name
        for p in files("cdc").joinpath("sql").joinpath(part, folder).iterdir()
        if p.name.endswith(".sql")
    }
    assert shipped
    assert len(included) == len(set(included))
    assert set(included) == shipped


def test_every_sql_file_is_installed_or_read():
    """Every .sql file under cdc/sql/ is reached from install.sql, or is uninstall.sql or a
    file of named runtime queries (queries*.sql, read by name), so none is dead."""
    root = files("cdc").joinpath("sql")
    reached = {"install.sql", "queue/uninstall.sql"}
    todo = ["install.sql"]
    while todo:
        path = todo.pop()
        base = path.rsplit("/", 1)[0] + "/" if "/" in path else ""
        for inc in re.findall(r"^\\ir (\S+)$", sqlfiles.read(path), re.M):
            reached.add(base + inc)
            todo.append(base + inc)
    shipped = {str(p).split("/cdc/sql/", 1)[1] for p in _sql_files(root)}
    runtime = {name for name in shipped if re.fullmatch(r"queries(_\w+)?\.sql", name)}
    assert "queries.sql" in runtime
    assert shipped - runtime == reached


def test_every_capture_format_has_its_file_and_dispatch():
    """Each format of cdc._cap_formats() has formats/<name>.sql defining its payload and
    ev_type functions, and both dispatchers name them."""
    dispatch = sqlfiles.read("capture/functions/cdc.capture_formats.sql")
    names = re.search(r"select array\[(.*)\];", dispatch).group(1)
    formats = re.findall(r"'(\w+)'", names)
    assert formats == ["json", "urlenc", "sql"]
    shipped = {
        p.name for p in files("cdc").joinpath("sql").joinpath("capture", "formats").iterdir()
    }
    assert shipped == {f"{name}.sql" for name in formats}
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
