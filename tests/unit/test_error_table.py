"""The error table of docs/queue.md is the one cdc/errors.py generates (no server)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cdc import errors, shipped

DOC = Path(__file__).parents[2] / "docs" / "queue.md"
SQL = shipped.folder("triggers")


def test_docs_error_table_is_the_generated_one():
    """docs/queue.md holds exactly markdown_table() between its markers."""
    text = DOC.read_text(encoding="utf-8")
    assert errors.with_table(text) == text, "run: python -m cdc.errors docs/queue.md"


def test_table_has_one_row_per_engine_error():
    """Every QueueError subclass is a row, with its SQLSTATE, class name and a `when`."""
    rows = errors.markdown_table().splitlines()[2:]
    classes = errors.QueueError.__subclasses__()
    assert len(rows) == len(classes)
    for cls in classes:
        assert cls.when, f"{cls.__name__} does not say when it is raised"
        assert f"| {cls.sqlstate} | `{cls.__name__}` | {cls.when} |" in rows


def test_every_documented_code_is_raised_by_the_sql():
    """No row documents a code that nothing raises (as QC013 once was)."""
    raised: set[str] = set()
    for path in SQL.rglob("*.sql"):
        raised |= set(re.findall(r"errcode = '+(QC\d{3})'", path.read_text(encoding="utf-8")))
    assert {cls.sqlstate for cls in errors.QueueError.__subclasses__()} == raised


def test_with_table_replaces_only_the_marked_block():
    """Text around the markers is kept; the stale table between them is replaced."""
    doc = f"intro\n{errors.TABLE_BEGIN}\n| stale |\n{errors.TABLE_END}\noutro\n"
    out = errors.with_table(doc)
    assert out.startswith(f"intro\n{errors.TABLE_BEGIN}\n| SQLSTATE |")
    assert out.endswith(f"{errors.TABLE_END}\noutro\n")
    assert "stale" not in out


def test_with_table_refuses_a_document_without_markers():
    """A document without the markers is an error, not silently left alone."""
    with pytest.raises(ValueError, match="markers"):
        errors.with_table("| SQLSTATE | no markers |\n")
