"""A throwaway PostgreSQL 15 cluster reached over local TCP and over its unix socket, with one
login role that must give its password (scram) over TCP: what the tests of the JDBC settings
(``cdc.pg.jdbc``) connect to. Everyone else is trusted, as in every test cluster."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from tests.support import servers
from tests.support.servers import PG15_BIN

__all__ = ["TcpServer", "tcp_server"]


@dataclass(frozen=True)
class TcpServer:
    host: str  # 127.0.0.1
    port: int
    socket_dir: str
    role: str  # must give `password` over TCP
    password: str
    admin_dsn: str  # superuser over the socket

    def dsn(self, **params: object) -> str:
        """A DSN of the password role over TCP on database postgres, without the password."""
        base = {"host": self.host, "port": self.port, "user": self.role, "dbname": "postgres"}
        return make_conninfo(**{**base, **params})


@contextmanager
def tcp_server() -> Iterator[TcpServer]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = {
        **servers.FAST,
        "listen_addresses": "127.0.0.1",
        "port": str(port),
        "password_encryption": "scram-sha-256",
    }
    with servers.cluster(PG15_BIN, settings) as socket_dsn:
        admin_dsn = make_conninfo(socket_dsn, port=port)  # the socket file carries the port
        role = f"jdbc_{uuid.uuid4().hex[:8]}"
        password = f"pw {uuid.uuid4().hex[:8]} ' \\ x"  # quotes, backslash, space: passed as is
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("create role {} login password {}").format(
                    sql.Identifier(role), sql.Literal(password)
                )
            )
            hba = Path(conn.execute("show hba_file").fetchone()[0])
            rule = f"host all {role} 127.0.0.1/32 scram-sha-256\n"
            hba.write_text(rule + hba.read_text())  # first match wins: before the trust lines
            socket_dir = conn.execute("show unix_socket_directories").fetchone()[0]
        servers.restart(admin_dsn, PG15_BIN)  # waits until the server runs with the new rule
        yield TcpServer("127.0.0.1", port, socket_dir, role, password, admin_dsn)
