"""Roles for the permission and security tests.

Login roles are cluster-wide: ``LoginRoles`` gives each one a unique name and drops it at
the end, after ``drop owned by`` in the one database it touched. ``PRECREATE_ROLES`` is what
an administrator runs before a database owner without CREATEROLE installs cdc.
"""

from __future__ import annotations

import uuid

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

__all__ = ["PRECREATE_ROLES", "LoginRoles"]

# The roles are cluster-wide and usually exist already (the template database's install).
PRECREATE_ROLES = """
do $$
begin
    if not exists (select from pg_roles where rolname = 'cdc_reader') then
        create role cdc_reader nologin;
    end if;
    if not exists (select from pg_roles where rolname = 'cdc_writer') then
        create role cdc_writer nologin;
    end if;
    if not exists (select from pg_roles where rolname = 'cdc_admin') then
        create role cdc_admin nologin in role cdc_reader, cdc_writer;
    end if;
end;
$$
"""


class LoginRoles:
    """Makes login roles connected to one database; ``cleanup`` closes their connections,
    runs ``drop owned by`` in that database (objects and privileges there, privileges on the
    database itself) and drops them."""

    def __init__(self, admin_dsn: str, dsn: str) -> None:
        self.admin_dsn = admin_dsn
        self.dsn = dsn
        self.names: list[str] = []
        self.opened: list[psycopg.Connection] = []

    def connect(self, member_of: str | None) -> psycopg.Connection:
        name = f"t_{member_of or 'plain'}_{uuid.uuid4().hex[:10]}"
        stmt = sql.SQL("create role {} login").format(sql.Identifier(name))
        if member_of:
            stmt = sql.SQL("{} in role {}").format(stmt, sql.Identifier(member_of))
        with psycopg.connect(self.admin_dsn, autocommit=True) as c:
            c.execute(stmt)
        self.names.append(name)
        conn = psycopg.connect(make_conninfo(self.dsn, user=name), autocommit=True)
        self.opened.append(conn)
        return conn

    def cleanup(self) -> None:
        for c in self.opened:
            c.close()
        with psycopg.connect(self.dsn, autocommit=True) as c:
            for name in self.names:
                c.execute(sql.SQL("drop owned by {}").format(sql.Identifier(name)))
                c.execute(sql.SQL("drop role {}").format(sql.Identifier(name)))
