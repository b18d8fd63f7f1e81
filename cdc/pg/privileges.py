"""What each role needs, checked before any work starts (and before any JVM).

The roles the docs name, by what they do (``KINDS``):

- ``drain``: the drain, the snapshot and status. EXECUTE on the consumer's functions
  (``READER_FUNCTIONS``, all granted to ``cdc_reader``), USAGE on the source tables' schemas
  and SELECT on the tables (their catalog types; the snapshot reads their rows);
- ``verify``: the same; verify takes its consistent point without locking the tables
  (``cdc.pipeline.verify``), so no write privilege on them;
- ``writer``: a producer (``cdc_writer``'s functions); the application's roles need nothing
  for captured tables, whose triggers write through SECURITY DEFINER functions;
- ``admin``: the ticker and queue management (``cdc_admin``).

``check(conn, kind, tables=...)`` raises ``MissingPrivilege``, one line that names what is
missing and the ``cdc grant`` command that grants it (``cdc.cli.roles`` builds those
statements from the same lists). It asks the catalog (``has_function_privilege`` and
friends), so that a grant made directly or through a role membership counts the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import psycopg
from psycopg import sql

from cdc import errors
from cdc.errors import CdcError
from cdc.pg import sqlfiles

if TYPE_CHECKING:
    from cdc.config import Pipeline

__all__ = [
    "ADMIN_FUNCTIONS",
    "KINDS",
    "READER_FUNCTIONS",
    "WRITER_FUNCTIONS",
    "MissingPrivilege",
    "Requirement",
    "check",
    "check_pipeline",
    "missing",
]

# What cdc_reader is granted (queue/grants.sql); a test keeps the two lists equal.
READER_FUNCTIONS = (
    "register_consumer",
    "register_consumer_at",
    "unregister_consumer",
    "next_batch",
    "next_batch_info",
    "next_batch_custom",
    "get_batch_events",
    "open_batch_cursor",
    "finish_batch",
    "event_retry",
    "batch_retry",
    "event_dead",
    "batch_event_tables",
    "batch_event_sql",
    "event_retry_raw",
    "ticker",
    "force_tick",
    "get_capture_aliases",
    "get_capture_info",
    "next_batch_ticks",
    "queue_has_new_events",
    "get_tick_snapshot",
    "get_dead_letter_counts",
    "tick_at_snapshot",
    "consumer_owner",
    "get_consumer_status",
)
WRITER_FUNCTIONS = ("insert_event", "current_event_table", "insert_event_raw")
# what the ticker and queue management call; cdc_admin may execute every public function
ADMIN_FUNCTIONS = (
    "create_queue",
    "drop_queue",
    "set_queue_config",
    "ticker",
    "maint_retry_events",
    "maint_rotate_tables_step1",
    "maint_rotate_tables_step2",
    "maint_operations",
    "maint_tables_to_vacuum",
    "tune_storage",
    "grant_perms",
    "upgrade_schema",
    "seq_getval",
    "seq_setval",
    "find_tick_helper",
)


@dataclass(frozen=True)
class Requirement:
    """What one kind of role needs: its group role, the cdc functions it calls, and whether
    it reads the source tables."""

    group: str
    functions: tuple[str, ...]
    reads_tables: bool
    does: str  # for the messages


KINDS: dict[str, Requirement] = {
    "drain": Requirement("cdc_reader", READER_FUNCTIONS, True, "drain, snapshot and status"),
    "verify": Requirement("cdc_reader", READER_FUNCTIONS, True, "verify"),
    "writer": Requirement("cdc_writer", WRITER_FUNCTIONS, False, "produce events"),
    "admin": Requirement("cdc_admin", ADMIN_FUNCTIONS, False, "tick and manage queues"),
}
# the commands that check, and the kind of role each needs
COMMANDS = {"drain": "drain", "snapshot": "drain", "status": "drain", "verify": "verify"}


class MissingPrivilege(CdcError):
    """The connected role lacks a privilege a command needs (exit code COULD_NOT_RUN)."""


_FUNCTIONS_SQL = """
select n, p.oid::regprocedure::text, has_function_privilege(p.oid, 'execute')
  from unnest(%(names)s::text[]) n
  left join pg_proc p on p.proname = n and p.pronamespace = to_regnamespace('cdc')
 order by 1, 2
"""


def missing(
    conn: psycopg.Connection, kind: str, tables: Iterable[tuple[str, str]] = ()
) -> tuple[list[str], list[str], list[str]]:
    """What the connected role lacks for ``kind``: functions that do not exist (an older
    install), functions it may not execute, tables (``schema.table``) it may not read."""
    need = KINDS[kind]
    absent: list[str] = []
    refused: list[str] = []
    for name, signature, allowed in conn.execute(
        _FUNCTIONS_SQL, {"names": list(need.functions)}
    ).fetchall():
        if signature is None:
            absent.append(f"cdc.{name}")
        elif not allowed:
            refused.append(signature)
    unreadable: list[str] = []
    if need.reads_tables:
        for schema, table in tables:
            row = conn.execute(sqlfiles.query("table_readable"), (schema, table)).fetchone()
            if row is not None and not row[0]:
                unreadable.append(row[1])
    return absent, refused, unreadable


def check(
    conn: psycopg.Connection,
    command: str,
    tables: Sequence[tuple[str, str]] = (),
    queue_schema: str = "cdc",
    consumer: tuple[str, str] | None = None,
) -> None:
    """Raises MissingPrivilege naming the first things the connected role lacks for
    ``command`` (drain, snapshot, verify, status, or a kind of ``KINDS``) and the
    ``cdc grant`` that fixes it. On a real PgQ (``queue_schema`` pgq) only the tables are
    checked: its own roles (pgq_reader) grant its functions. consumer: (queue, name) of a
    consumer the command acts for, which must be one this role may act for when it is
    registered already (it belongs to the role that registered it)."""
    kind = COMMANDS.get(command, command)
    need = KINDS[kind]
    absent, refused, unreadable = missing(conn, kind, tables if command != "status" else ())
    if queue_schema != "cdc":
        absent, refused = [], []
    role, installed = conn.execute(
        "select current_user, to_regnamespace('cdc') is not null"
    ).fetchone()
    if absent and not installed:
        raise errors.NotInstalled(
            "the cdc schema is not installed in this database: run `cdc install --dsn ...`"
            " as the database owner"
        )
    if absent:
        raise MissingPrivilege(
            f"the cdc install in this database is older than this package (no {absent[0]}"
            + (f" and {len(absent) - 1} more" if len(absent) > 1 else "")
            + "): run `cdc install --dsn ...` as the database owner to upgrade it"
        )
    if not refused and not unreadable:
        if consumer is not None and queue_schema == "cdc" and command != "status":
            _check_consumer(conn, role, *consumer)
        return
    lacks = []
    if refused:
        more = f" and {len(refused) - 1} more function(s)" if len(refused) > 1 else ""
        lacks.append(f"EXECUTE on {refused[0]}{more}")
    if unreadable:
        lacks.append(f"SELECT on {', '.join(unreadable)}")
    fix = f"cdc grant {_quote_arg(role)} --as {kind}"
    if unreadable:
        fix += " --tables " + " ".join(_quote_arg(t) for t in unreadable)
    raise MissingPrivilege(
        f"role {role} may not {f'run `cdc {command}`' if command in COMMANDS else need.does}:"
        f" it lacks"
        f" {'; '.join(lacks)}. As the database owner, run: {fix} (or grant {need.group}"
        f" to {role}" + (", and SELECT on those tables)" if unreadable else ")")
    )


def _check_consumer(conn: psycopg.Connection, role: str, queue: str, name: str) -> None:
    try:
        row = conn.execute(
            sqlfiles.query("consumer_owner"), {"queue": queue, "consumer": name}
        ).fetchone()
    except psycopg.Error as exc:
        raise errors.translate(exc) from exc
    if row is None or row[1]:
        return
    owner = row[0]
    if owner is None:
        fix = sql.SQL("select cdc.set_consumer_owner({}, {}, {})").format(
            sql.Literal(queue), sql.Literal(name), sql.Literal(role)
        )
        raise MissingPrivilege(
            f"role {role} may not act for consumer {name} of queue {queue}: it belongs to no"
            " role (registered before consumers had owners, or its role was dropped), so only"
            f" cdc_admin members may; have one run: {fix.as_string(conn)}"
        )
    grant = sql.SQL("grant {} to {}").format(sql.Identifier(owner), sql.Identifier(role))
    raise MissingPrivilege(
        f"role {role} may not act for consumer {name} of queue {queue}: it belongs to role"
        f" {owner}, which registered it. Run this as {owner}, or as the database owner run:"
        f" {grant.as_string(conn)}"
    )


def check_pipeline(pipeline: Pipeline, command: str) -> None:
    """``check`` for a pipeline command, on its source with its tables (pattern entries
    resolved), before the command starts any work."""
    src = pipeline.source
    with psycopg.connect(src.dsn, autocommit=True) as conn:
        tables = [(m.schema, m.name) for m in pipeline.tables]
        check(conn, command, tables, src.queue_schema, (src.queue, src.consumer))


def _quote_arg(text: str) -> str:
    """A command-line argument as a POSIX shell reads it back."""
    import shlex

    return shlex.quote(text)
