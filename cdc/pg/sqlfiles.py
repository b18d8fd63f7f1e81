"""The SQL files the package reads: the SQL that runs inside PostgreSQL (``triggers/``) and
the package's own runtime queries (``cdc/pg/queries/``).

``triggers/`` is a top-level folder of the repository, shipped inside the package
(cdc.shipped). ``install.sql`` only includes its pieces with psql's ``\\ir``; ``expand()``
inlines them so the whole script can be sent in one transaction.

Runtime queries live under ``-- name:`` headers in ``queries.sql`` (``queries_pgq.sql`` for a
real PgQ, ``queries_status.sql``, ``queries_reading.sql``) and are looked up by name. They
are the Python code's SQL, not SQL installed in PostgreSQL, so they stay beside the code that
reads them.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path, PurePosixPath

from cdc import shipped

_INCLUDE = re.compile(r"^\\ir\s+(\S+)\s*$")
_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$")
QUERIES = Path(__file__).resolve().parent / "queries"


def read(path: str) -> str:
    """Text of a file under triggers/, e.g. ``queue/install.sql``."""
    return shipped.folder("triggers").joinpath(path).read_text(encoding="utf-8")


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
    """Named queries of a file of cdc/pg/queries/: the text below each ``-- name: x`` header."""
    named: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in QUERIES.joinpath(path).read_text(encoding="utf-8").splitlines():
        m = _NAME.match(line)
        if m:
            current = named.setdefault(m.group(1), [])
        elif current is not None and not line.startswith("--"):
            current.append(line)
    return {name: "\n".join(lines).strip() for name, lines in named.items()}


def query(name: str) -> str:
    """One named query of queries.sql."""
    return queries()[name]
