"""The sessions that read source tables' rows: a snapshot's chunks (``cdc snapshot``, the
drain's snapshots, ``cdc resync``; cdc.pipeline.chunks, its Spark JDBC partitions too) and
verify's source pass (cdc.pipeline.verify). They run as the drain's or verify's role over
tables that other roles own, and no code of a table's owner runs in them:

- ``row_security = off`` (``SETTINGS``): a table whose row-level security applies to the
  reading role is refused by PostgreSQL instead of filtered. A policy is an expression of
  the owner's choosing: it would copy only the rows it lets through, and run its functions
  with the reader's rights. ``check`` refuses such a table first, under the table's lock, with
  the fix (``RowSecurityRefused``: a failure of that table only);
- ``search_path = pg_catalog, pg_temp``: the operators and functions of the reading queries
  (key comparisons, ``format``, ``isfinite``...) are the built-in ones, never an operator a
  user made for their own type in a schema of the role's path (an exact match for an enum or
  a domain wins over the built-in polymorphic one);
- a column whose type has a cast to text made by a user's function (``text_by_output``) is
  read as its type's output (``output_text``), as the capture triggers write it, never
  through the cast (casts are found whatever the search_path);
- the reads are SELECT and COPY TO of a table, and a lock: no trigger fires, no column
  default or generated expression is computed (they run on writes), no index expression or
  partial index predicate is evaluated (an index gives its stored values), no rule or view
  runs (``check`` refuses anything but a table).

A table's partitions and inheritance children are read through it, under its own row-level
security: theirs applies only to reads that name them.
"""

from __future__ import annotations

import psycopg
from psycopg import sql

from cdc.errors import TableUnappliable
from cdc.pg import sqlfiles

__all__ = [
    "SETTINGS",
    "RowSecurityRefused",
    "SourceUnreadable",
    "check",
    "output_text",
    "prepare",
    "refusal",
    "text_by_output",
]

SETTINGS = "set row_security = off; set search_path = pg_catalog, pg_temp"
TABLE_KINDS = ("r", "p")  # an ordinary or a partitioned table
RLS_MARKER = "row-level security"  # in PostgreSQL's refusal (42501) under row_security = off


class SourceUnreadable(TableUnappliable):
    """A source relation the readers refuse (a failure of that table only: its snapshot
    fails, verify reports it); the message names it and says what to do."""

    def __init__(self, table: str, reason: str) -> None:
        super().__init__(table, reason)
        self.args = (reason,)  # the reason names the table and the fix


class RowSecurityRefused(SourceUnreadable):
    """A source table's row-level security applies to the role that reads it."""


def _queries() -> dict[str, str]:
    return sqlfiles.queries("queries_reading.sql")


def prepare(conn: psycopg.Connection) -> None:
    """Puts the session in the reading settings (``SETTINGS``); in a transaction, they hold
    until it ends."""
    conn.execute(SETTINGS)


def fix(role: str, table: str, owner: bool) -> str:
    """What makes a table with row-level security readable by role, in full."""
    unforce = (
        f"; or, since {role} owns it, have row-level security not forced on its owner"
        f" (alter table {table} no force row level security)"
        if owner
        else ""
    )
    return (
        f"give {role} the BYPASSRLS attribute (as a superuser: alter role"
        f" {sql.Identifier(role).as_string()} bypassrls), or have the table's owner drop the"
        f" policy for it (alter table {table} disable row level security){unforce}"
    )


def _applies(table: str, role: str, forced: bool, owner: bool, policies: list[str]) -> str:
    """Why a table with row-level security that applies to role is not read, and the fix."""
    return (
        f"source table {table} has row-level security that applies to role {role}"
        + (" (forced on its owner too)" if forced else "")
        + f", policies: {', '.join(policies) or 'none (every row hidden)'}: reading it would"
        " copy only the rows the policies let through and run their functions with this"
        " role's rights, so snapshot, resync and verify refuse to read it. Fix: "
        + fix(role, table, owner)
    )


def check(conn: psycopg.Connection, schema: str, table: str) -> None:
    """Takes the table's own ACCESS SHARE lock (its row-level security cannot change until
    the transaction ends; its partitions are locked by the read, which needs no privilege on
    them), then raises ``RowSecurityRefused`` when that security applies to the
    session's role, and SourceUnreadable when the relation is not a table."""
    name = sql.Identifier(schema, table)
    conn.execute(sql.SQL("lock table only {} in access share mode").format(name))
    row = conn.execute(_queries()["row_security"], {"schema": schema, "table": table}).fetchone()
    if row is None:
        return  # gone: the read that follows says so
    kind, applies, forced, owner, policies = row
    shown = name.as_string(conn)
    if kind not in TABLE_KINDS:
        raise SourceUnreadable(
            shown,
            f"source {shown} is not a table (relkind {kind}): only tables are read, since"
            " reading a view would run its owner's code with this role's rights",
        )
    if applies:
        role = conn.execute("select current_user").fetchone()[0]
        raise RowSecurityRefused(shown, _applies(shown, role, forced, owner, policies))


def grant_notes(conn: psycopg.Connection, role: str, tables: list[tuple[str, str]]) -> list[str]:
    """For ``cdc grant ROLE --as drain|verify``: one line per table of the list that has
    row-level security, saying whether the role's reads get past it and, when they are
    refused, the fix."""
    args = {"schemas": [s for s, _ in tables], "tables": [t for _, t in tables], "role": role}
    notes = []
    for table, forced, bypasses, owner, policies in conn.execute(
        _queries()["row_security_of_role"], args
    ):
        if bypasses:
            notes.append(
                f"source table {table} has row-level security: role {role} bypasses it"
                " (BYPASSRLS or superuser) and reads every row"
            )
        elif owner and not forced:
            notes.append(
                f"source table {table} has row-level security: role {role} owns it and it is"
                " not forced, so it reads every row"
            )
        else:
            notes.append(_applies(table, role, forced, owner, policies))
    return notes


def refusal(exc: BaseException, table: str) -> RowSecurityRefused | None:
    """PostgreSQL's own refusal of a read under ``row_security = off`` (``check`` comes first,
    so only a session that skipped it meets one), as RowSecurityRefused; None otherwise."""
    if not isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return None
    message = exc.diag.message_primary or ""
    if RLS_MARKER not in message:
        return None
    return RowSecurityRefused(
        table,
        f"source table {table}: {message}; reading it would copy only the rows its policies"
        " let through, so it is not read. Fix: give the reading role BYPASSRLS, or have the"
        " table's owner disable its row level security",
    )


def text_by_output(conn: psycopg.Connection, schema: str, table: str) -> frozenset[str]:
    """The table's columns to read as their type's output rather than through ``::text``:
    those whose type has a cast to text made by a user's function (see queries_reading.sql)."""
    rows = conn.execute(_queries()["text_by_output"], {"schema": schema, "table": table})
    return frozenset(name for (name,) in rows)


def output_text(column: sql.Composable) -> sql.Composed:
    """A value's text by its type's output function (``concat`` calls it, as ``format('%s')``
    does, with no placeholder to escape), NULL for NULL: num_nonnulls counts the value itself,
    so a composite whose fields are all NULL is not NULL."""
    return sql.SQL(
        "case when pg_catalog.num_nonnulls({0}) > 0 then pg_catalog.concat({0}) end"
    ).format(column)
