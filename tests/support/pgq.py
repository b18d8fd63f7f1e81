"""PgQ 3.5 beside our engine: a throwaway PostgreSQL 15 cluster that has Debian's PgQ
extension, for the tests that compare with PgQ or consume a real PgQ queue.

The cluster is separate from the run's main server (``servers.start``): PgQ's package exists
for Debian's PostgreSQL 15 only. Its databases are made and dropped with the helpers of
``tests.support.databases``; each test drops what it made.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support import servers
from tests.support.servers import PG15_BIN

__all__ = ["INSTALL_HINT", "PGQ_CONTROL", "pgq_cluster"]

PGQ_CONTROL = Path("/usr/share/postgresql/15/extension/pgq.control")
INSTALL_HINT = "apt-get install postgresql-15 postgresql-15-pgq3"


@contextmanager
def pgq_cluster() -> Iterator[str]:
    """Superuser DSN of a throwaway PostgreSQL 15 cluster that has PgQ's extension; the test
    fails (it does not skip) when PostgreSQL 15 or PgQ is missing."""
    missing = [str(p) for p in (PG15_BIN / "postgres", PGQ_CONTROL) if not p.exists()]
    if missing:
        pytest.fail(
            f"the PgQ tests need PostgreSQL 15 with PgQ ({', '.join(missing)} missing):"
            f" run `{INSTALL_HINT}`",
            pytrace=False,
        )
    with servers.cluster(PG15_BIN, servers.FAST) as dsn:
        yield dsn
