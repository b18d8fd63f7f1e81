"""Spark's JDBC source connects with the settings cdc.pg.jdbc makes from a host-less DSN and
libpq's environment (PGHOST/PGPORT/PGUSER/PGPASSWORD), to a role that must give its password;
and, for a DSN over the unix socket, at the URL the pipeline file gives (source.jdbc_url)."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from cdc.pg import capture, install, pgtypes
from cdc.pg.capture import CaptureOptions
from cdc.pg.jdbc import DRIVER
from cdc.pg.queue import Queue
from cdc.pg.source import jdbc_url, source_jdbc
from cdc.pipeline import chunks, compare, snapshot
from cdc.pipeline.drain import Drain
from tests.support import drainkit
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


def test_a_socket_dsn_with_a_jdbc_url_has_the_executors_read(spark, tmp_path, monkeypatch):
    """A DSN over the unix socket (no JDBC URL of its own) and source.jdbc_url: a snapshot's
    chunks and a large batch are read over JDBC at that URL, as the DSN's role with the DSN's
    password (which this role must give over TCP); the targets equal the source."""
    for name in ("PGHOST", "PGPORT", "PGUSER", "PGPASSWORD", "PGPASSFILE", "PGSERVICE"):
        monkeypatch.delenv(name, raising=False)
    chunk_urls: list[str] = []
    read_jdbc = chunks.ChunkReader.read_jdbc

    def recording(self, spark, after, plan, url, props):
        chunk_urls.append(url)
        return read_jdbc(self, spark, after, plan, url, props)

    monkeypatch.setattr(chunks.ChunkReader, "read_jdbc", recording)
    with tcp_server() as server:
        with psycopg.connect(server.admin_dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("alter role {} superuser").format(sql.Identifier(server.role)))
        dsn = make_conninfo(server.admin_dsn, user=server.role, password=server.password)
        install.install(dsn)
        url = f"jdbc:postgresql://{server.host}:{server.port}/postgres"
        tables = [{"source": "public.s", "target": "s"}]
        pipe = drainkit.pipeline(dsn, str(tmp_path), tables, jdbc_url=url, jdbc_min_events=100)
        assert jdbc_url(dsn) is None  # the DSN alone: COPY
        assert source_jdbc(pipe.source) == (
            url,
            {"driver": DRIVER, "user": server.role, "password": server.password},
        )
        with psycopg.connect(dsn, autocommit=True) as conn:
            Queue(conn, "q").create()
            conn.execute("create table s (id int primary key, v text, n numeric(10,2))")
            conn.execute("insert into s select g, 'v' || g, g / 4.0 from generate_series(1, 600) g")
            capture.attach(conn, "public.s", CaptureOptions(queue="q"))
            loader = snapshot.Snapshot(pipe, spark, False, chunk_rows=250)
            loader.jdbc_min_rows = 0
            loader.on_driver = False  # as on a cluster: read by the executors
            assert loader.run("public.s").rows == 600
            assert chunk_urls and set(chunk_urls) == {url}
            conn.execute("update s set v = v || 'x', n = -n where id % 2 = 0")
            conn.execute("delete from s where id % 5 = 0")
            conn.execute("insert into s select g, 'new', g from generate_series(601, 700) g")
            seen = []
            with Drain(pipe, spark) as drain:
                drain.run(on_batch=seen.append)
            read = [(s.read, s.read_rule) for s in seen if s.events]
            assert [route for route, _ in read] == ["jdbc"]
            assert "jdbc_min_events 100 (source.jdbc_min_events)" in read[0][1]
            cols = pgtypes.columns(conn, "public", "s")
            expected = compare.source_rows(conn, "public", "s")
        assert compare.delta_rows(spark, pipe.location("s"), cols) == expected
