"""Helpers for the drain tests: pipelines, and source and Delta rows in one comparable form."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from cdc import config
from cdc.config import Pipeline
from tests.support import servers
from tests.support.servers import PG15_BIN

TYPES_DDL = """
create type mood as enum ('happy', 'so sad', 'Qu''ote');
create domain dint as int;
create table {name} (
    id int primary key,
    "Mixed Case" int2,
    i8 int8,
    num numeric(12,3),
    f4 float4,
    f8 float8,
    t text,
    vc varchar(20),
    ch char(5),
    b bool,
    d date,
    tm time,
    ttz timetz,
    ts timestamp,
    tstz timestamptz,
    iv interval,
    ba bytea,
    u uuid,
    j json,
    jb jsonb,
    ia int[],
    ta text[],
    m mood,
    di dint,
    ip inet
)
"""

SPECIAL_ROWS = [
    "(1, 1, 9223372036854775807, 12.5, 1.5, 'NaN', 'a b&c=d%e+f', 'tab\tnl\nx', 'ab', true,"
    " '2024-02-29', '13:14:15.5', '13:14:15+02', '2024-03-05 13:14:15.123456',"
    " '2024-03-05 13:14:15.5+00', '1 year 2 mons 3 days 04:05:06.7', '\\xdeadbeef',"
    ' \'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11\', \'{"a": 1, "b":"x\\"y"}\','
    ' \'{"b":"x\\"y", "a": 1}\', \'{1,2,NULL}\', \'{"x y","q\\"t",NULL,""}\', \'so sad\', 42,'
    " '192.168.0.1/24')",
    "(2, -32768, -9223372036854775808, -0.001, 'Infinity', '-Infinity', '', 'é ü 中', 'x', false,"
    " '1999-12-31', '00:00:00', '23:59:59-05:30', '2000-01-01 00:00:00',"
    " '2024-06-30 21:30:00-02:30', '-1 days', '\\x', '00000000-0000-0000-0000-000000000000',"
    " '\"str\"', '[]', '{}', '{}',"
    " 'Qu''ote', null, '::1')",
    "(3, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null,"
    " null, null, null, null, null, null, null, null, null)",
    "(4, 7, 7, 7, 0.1, 1e300, 'back\\slash ''quote''', 'v', 'abcde', true, '2024-01-01', '12:00',"
    " '12:00+00', '2024-01-01 12:00', '2024-01-01 12:00+05:45', '00:00:01', '\\x00ff',"
    " 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12', 'null', '{\"k\": [1, 2]}', '{-1}', '{a}', 'happy', 0,"
    " '10.0.0.0/8')",
]


def pipeline(dsn: str, path: str, tables: list[dict[str, str]], **source: Any) -> Pipeline:
    return config.parse(
        {
            "source": {"dsn": dsn, "queue": "q", "consumer": "delta", **source},
            "target": {"path": path},
            "tables": tables,
        }
    )


@contextmanager
def tcp_cluster() -> Iterator[str]:
    """A throwaway PostgreSQL 15 cluster listening on a free local TCP port (Spark's JDBC
    reader cannot use a unix socket); yields its DSN, the queue engine installed."""
    from cdc.pg import install

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = {**servers.FAST, "listen_addresses": "127.0.0.1", "port": str(port)}
    with servers.cluster(PG15_BIN, settings):
        dsn = f"host=127.0.0.1 port={port} user=postgres dbname=postgres"
        install.install(dsn)
        yield dsn
