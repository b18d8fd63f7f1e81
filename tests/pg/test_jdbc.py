"""The JDBC settings of a DSN follow libpq (cdc.pg.jdbc, re-exported by cdc.pg.source): host,
port, role and password from PGHOST/PGPORT/PGUSER/PGPASSWORD or .pgpass reach the URL and
properties; a connection over the unix socket has none, and a caller that needs one is told
what to set. The role of these tests must give its password over TCP (scram)."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from cdc.errors import ConfigError
from cdc.pg.source import jdbc_url, require_jdbc
from tests.support.tcpserver import TcpServer, tcp_server

LIBPQ_ENV = (
    "PGHOST", "PGHOSTADDR", "PGPORT", "PGUSER", "PGPASSWORD", "PGPASSFILE", "PGDATABASE",
    "PGSSLMODE", "PGSERVICE", "PGSERVICEFILE", "PGTARGETSESSIONATTRS",
)  # fmt: skip


@pytest.fixture(scope="module")
def server() -> Iterator[TcpServer]:
    """A cluster on local TCP whose test role must give its password."""
    with tcp_server() as found:
        yield found


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No libpq variable from the surroundings leaks into a test."""
    for name in LIBPQ_ENV:
        monkeypatch.delenv(name, raising=False)


def test_a_dsn_without_host_takes_host_port_role_and_password_from_the_environment(
    server: TcpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """dbname=postgres with PGHOST/PGPORT/PGUSER/PGPASSWORD/PGSSLMODE: all of them reach JDBC."""
    monkeypatch.setenv("PGHOST", server.host)
    monkeypatch.setenv("PGPORT", str(server.port))
    monkeypatch.setenv("PGUSER", server.role)
    monkeypatch.setenv("PGPASSWORD", server.password)
    monkeypatch.setenv("PGSSLMODE", "disable")
    found = jdbc_url("dbname=postgres")
    assert found is not None
    url, props = found
    assert url == f"jdbc:postgresql://{server.host}:{server.port}/postgres"
    assert props["user"] == server.role
    assert props["password"] == server.password
    assert props["sslmode"] == "disable"


def test_a_password_from_the_pgpass_file_reaches_the_properties(
    server: TcpServer, monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    """A password libpq found in PGPASSFILE (none in the DSN) is the JDBC password."""
    escaped = server.password.replace("\\", "\\\\").replace(":", "\\:")
    passfile = tmp_path / "pgpass"
    passfile.write_text(f"{server.host}:{server.port}:*:{server.role}:{escaped}\n")
    passfile.chmod(0o600)
    monkeypatch.setenv("PGPASSFILE", str(passfile))
    dsn = server.dsn(application_name="cdc test")
    with psycopg.connect(dsn) as conn:  # connects: the password was needed and found
        url, props = jdbc_url(dsn, conn)
    assert props["password"] == server.password
    assert props["ApplicationName"] == "cdc test"
    assert url == f"jdbc:postgresql://{server.host}:{server.port}/postgres"


def test_a_unix_socket_dsn_has_no_jdbc_url(server: TcpServer) -> None:
    """A DSN naming the socket folder gives None: the caller reads with COPY."""
    assert jdbc_url(server.admin_dsn) is None


def test_a_caller_without_fallback_is_told_what_to_set(
    server: TcpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host-less DSN that libpq resolves to the socket (PGHOST): the error names the socket
    folder and says to give the DSN a host."""
    monkeypatch.setenv("PGHOST", server.socket_dir)
    monkeypatch.setenv("PGPORT", str(server.port))
    with pytest.raises(ConfigError) as caught:
        require_jdbc("user=postgres dbname=postgres", purpose="the snapshot's JDBC reader")
    message = str(caught.value)
    assert server.socket_dir in message
    assert "the snapshot's JDBC reader cannot reach" in message
    assert "host=" in message
