"""Pure functions: error mapping and the SQL file loader (no database)."""

from __future__ import annotations

import re
from importlib.resources import files

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
    for part in ("queue", "capture"):
        for path in files("cdc").joinpath("sql").joinpath(part, "functions").iterdir():
            raised |= set(re.findall(r"errcode = '+(QC\d{3})'", path.read_text()))
    assert raised <= set(codes)


def test_translate_leaves_other_errors_alone():
    """A psycopg error with another SQLSTATE is returned unchanged."""
    exc = psycopg.errors.DivisionByZero("x")
    assert errors.translate(exc) is exc


def test_install_script_includes_every_function_file():
    """install.sql includes every file under functions/, so nothing ships uninstalled."""
    script = sqlfiles.read("queue/install.sql")
    included = set(re.findall(r"^\\ir functions/(\S+)$", script, re.M))
    shipped = {
        p.name
        for p in files("cdc").joinpath("sql").joinpath("queue/functions").iterdir()
        if p.name.endswith(".sql")
    }
    assert included == shipped


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
