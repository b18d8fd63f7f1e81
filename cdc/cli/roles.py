"""``cdc grant ROLE --as drain|verify|writer|admin``: gives a role exactly what its part
needs (``cdc.pg.privileges.KINDS``), in one transaction; ``--print`` shows the statements
without running them.

- the group role (``cdc_reader``, ``cdc_writer``, ``cdc_admin``) when the granting role may
  grant it (a superuser; the role that created it, or one given it WITH ADMIN OPTION; before
  PostgreSQL 16 any CREATEROLE role). Otherwise, as a second database's owner usually is (the
  cluster-wide roles were made by another database's install), EXECUTE on each function of
  that group in this database, granted directly: the same privileges, which a later
  ``cdc install`` that adds functions needs granted again (run ``cdc grant`` again);
- for ``drain`` and ``verify``: USAGE on the schemas and SELECT on the source tables
  (``--tables``; by default every table captured into ``--queue``, or into any queue); and a
  note for each of those tables with row-level security: whether the role gets past it, and
  if not the fix (its reads refuse such a table, cdc.pg.reading).
"""

from __future__ import annotations

import argparse
import logging

import psycopg
from psycopg import sql

from cdc import errors
from cdc.cli.common import dsn
from cdc.config import parse_table_name
from cdc.pg import privileges, reading, sqlfiles

log = logging.getLogger(__name__)


def cmd_grant(args: argparse.Namespace) -> int:
    with psycopg.connect(dsn(args)) as conn:
        statements, notes = grant_statements(conn, args.role, args.kind, args.tables, args.queue)
        for note in notes:
            log.warning("%s", note)
        for stmt in statements:
            print(f"{stmt.as_string(conn)};")
        if args.print:
            return 0
        run(conn, statements)
    print(f"role {args.role} may now {privileges.KINDS[args.kind].does}")
    return 0


def run(conn: psycopg.Connection, statements: list[sql.Composed]) -> None:
    """Runs the statements in one transaction: all or nothing."""
    try:
        with conn.transaction():
            for stmt in statements:
                conn.execute(stmt)
    except psycopg.errors.InsufficientPrivilege as exc:
        raise errors.CdcError(
            f"nothing was granted: {exc.diag.message_primary} (running"
            f" {stmt.as_string(conn)}); run `cdc grant` as the database owner, or as a role"
            " that owns the tables or was given them WITH GRANT OPTION"
        ) from None


def grant_statements(
    conn: psycopg.Connection,
    role: str,
    kind: str,
    tables: list[str] | None = None,
    queue: str | None = None,
) -> tuple[list[sql.Composed], list[str]]:
    """The statements that give ``role`` what ``kind`` needs, and notes on what they cannot
    give (granted directly instead of through the group role)."""
    if kind not in privileges.KINDS:
        raise errors.ConfigError(f"--as takes one of {', '.join(privileges.KINDS)}, not {kind}")
    if conn.execute("select to_regrole(%s)", (role,)).fetchone()[0] is None:
        raise errors.ConfigError(
            f"role {role} does not exist: create it first (create role ... login password ...)"
        )
    if conn.execute("select to_regnamespace('cdc')").fetchone()[0] is None:
        raise errors.NotInstalled("cdc is not installed in this database: run `cdc install`")
    need = privileges.KINDS[kind]
    if (tables or queue) and not need.reads_tables:
        raise errors.ConfigError(f"--tables and --queue are for --as drain or verify, not {kind}")
    grantee = sql.Identifier(role)
    statements: list[sql.Composed] = []
    notes: list[str] = []
    if _may_grant_membership(conn, need.group):
        statements.append(sql.SQL("grant {} to {}").format(sql.Identifier(need.group), grantee))
    else:
        notes.append(
            f"{conn.info.user} may not grant role {need.group} (it belongs to the whole"
            f" cluster and was created by another role): granting EXECUTE on its functions in"
            f" this database directly; run `cdc grant` again after a `cdc install` that"
            f" upgrades, or have {need.group}'s creator run: grant {need.group} to"
            f" {conn.info.user} with admin option"
        )
        if need.group == "cdc_admin":
            notes.append(
                "without membership of cdc_admin the role may act only for consumers it"
                " registered itself (see docs/queue.md, who may act for a consumer)"
            )
        rows = conn.execute(
            sqlfiles.query("group_functions"), {"group": need.group, "names": list(need.functions)}
        ).fetchall()
        for (signature,) in rows:
            # regprocedure's own rendering of an existing function: quoted by the server
            statements.append(
                sql.SQL("grant execute on function {} to {}").format(sql.SQL(signature), grantee)
            )
    if need.reads_tables:
        names = [parse_table_name(t) for t in tables] if tables else _captured(conn, queue)
        if not names and not tables:
            notes.append("no table is captured yet: grant SELECT with --tables once they are")
        for schema in sorted({s for s, _ in names}):
            statements.append(
                sql.SQL("grant usage on schema {} to {}").format(sql.Identifier(schema), grantee)
            )
        for schema, table in names:
            statements.append(
                sql.SQL("grant select on table {} to {}").format(
                    sql.Identifier(schema, table), grantee
                )
            )
        notes.extend(reading.grant_notes(conn, role, names))
    return statements, notes


def _may_grant_membership(conn: psycopg.Connection, group: str) -> bool:
    """Whether the connected role may grant membership of group (which must exist)."""
    row = conn.execute(sqlfiles.query("may_grant_role"), {"group": group}).fetchone()
    return bool(row and row[0])


def _captured(conn: psycopg.Connection, queue: str | None) -> list[tuple[str, str]]:
    rows = conn.execute("select table_name, queue_name from cdc.get_capture_info()").fetchall()
    found = {parse_table_name(t) for t, q in rows if queue is None or q == queue}
    return sorted(found)


def add_arguments(sp: argparse.ArgumentParser) -> None:
    """The options of ``cdc grant`` (parser.py calls this)."""
    sp.add_argument("role", help="the role to grant to (it must exist)")
    sp.add_argument(
        "--as",
        dest="kind",
        required=True,
        choices=list(privileges.KINDS),
        help="drain (drain, snapshot, status), verify, writer (produce events), admin"
        " (ticker, queues)",
    )
    sp.add_argument(
        "--tables",
        nargs="+",
        metavar="SCHEMA.TABLE",
        help="drain / verify: the source tables (default: those captured into --queue, or"
        " into any queue)",
    )
    sp.add_argument("--queue", help="drain / verify: the tables captured into this queue")
    sp.add_argument("--print", action="store_true", help="print the statements, run nothing")
