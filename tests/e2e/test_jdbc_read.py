"""Spark's JDBC source connects with the settings cdc.pg.jdbc makes from a host-less DSN and
libpq's environment (PGHOST/PGPORT/PGUSER/PGPASSWORD), to a role that must give its password."""

from __future__ import annotations

import pytest

from cdc.pg.source import jdbc_url
from tests.support.tcpserver import tcp_server


def test_spark_reads_over_jdbc_from_a_dsn_without_host(spark, monkeypatch: pytest.MonkeyPatch):
    """dbname=postgres plus the libpq variables: a JDBC read of a query returns its row."""
    for name in ("PGPASSFILE", "PGSERVICE", "PGSSLMODE", "PGTARGETSESSIONATTRS"):
        monkeypatch.delenv(name, raising=False)
    with tcp_server() as server:
        monkeypatch.setenv("PGHOST", server.host)
        monkeypatch.setenv("PGPORT", str(server.port))
        monkeypatch.setenv("PGUSER", server.role)
        monkeypatch.setenv("PGPASSWORD", server.password)
        found = jdbc_url("dbname=postgres")
        assert found is not None
        url, props = found
        query = "(select 1 as one, current_user::text as who) s"
        rows = spark.read.jdbc(url, query, properties=props).collect()
    assert [(r.one, r.who) for r in rows] == [(1, server.role)]
