"""The SQL that ships in the package (``cdc/sql/``), read with importlib.resources.

``install.sql`` only includes its pieces with psql's ``\\ir``; ``expand()`` inlines them so
the whole script can be sent in one transaction. Runtime queries live under ``-- name:``
headers in ``queries.sql`` (``queries_pgq.sql`` for a real PgQ) and are looked up by name.
"""

from __future__ import annotations

import re
from functools import cache
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import PurePosixPath

_INCLUDE = re.compile(r"^\\ir\s+(\S+)\s*$")
_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$")


def _root() -> Traversable:
    return files("cdc").joinpath("sql")


def read(path: str) -> str:
    """Text of a file under cdc/sql/, e.g. ``queue/install.sql``."""
    return _root().joinpath(path).read_text(encoding="utf-8")


def expand(path: str) -> str:
    """A script with its ``\\ir`` includes inlined, recursively."""
    base = PurePosixPath(path).parent
    out: list[str] = []
    for line in read(path).splitlines():
        m = _INCLUDE.match(line)
        if m:
            out.append(expand(str(base / m.group(1))))
        else:
            out.append(line)
    return "\n".join(out) + "\n"


@cache
def queries(path: str = "queries.sql") -> dict[str, str]:
    """Named queries of a file: the text below each ``-- name: x`` header."""
    named: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in read(path).splitlines():
        m = _NAME.match(line)
        if m:
            current = named.setdefault(m.group(1), [])
        elif current is not None and not line.startswith("--"):
            current.append(line)
    return {name: "\n".join(lines).strip() for name, lines in named.items()}


def query(name: str) -> str:
    """One named query of queries.sql."""
    return queries()[name]
