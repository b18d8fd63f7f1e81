"""Test databases: created (optionally from a template) and dropped by a superuser DSN."""

from __future__ import annotations

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

TEMPLATE = "cdc_test_template"


def create_database(admin_dsn: str, name: str, template: str | None = None) -> str:
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(name))
        )
        stmt = sql.SQL("create database {}").format(sql.Identifier(name))
        if template:
            stmt = sql.SQL("{} template {}").format(stmt, sql.Identifier(template))
        conn.execute(stmt)
    return make_conninfo(admin_dsn, dbname=name)


def drop_database(admin_dsn: str, name: str) -> None:
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(name))
        )
