"""Installing, upgrading and removing the engine (queue and capture) in a database.

``install()`` runs ``triggers/install.sql``, its ``\\ir`` includes inlined, in one transaction:
all or nothing, and safe to run again over an older install (it upgrades in place and keeps
the data). ``uninstall()`` runs ``triggers/queue/uninstall.sql``.
"""

from __future__ import annotations

import logging

import psycopg
from psycopg import sql

from cdc.errors import CdcError
from cdc.pg import sqlfiles

log = logging.getLogger(__name__)

ROLES = ("cdc_admin", "cdc_reader", "cdc_writer")
_LOCK_KEY = 0x63646301  # advisory lock: one install or uninstall at a time per database


def installed_version(conn: psycopg.Connection) -> str | None:
    """The version installed in the database, None when the cdc schema is missing."""
    row = conn.execute(sqlfiles.query("installed_version")).fetchone()
    if row is None or row[0] is None:
        return None
    return conn.execute("select inst_version from cdc.installed").fetchone()[0]


def install(dsn: str) -> str:
    """Install or upgrade the engine; returns the installed version."""
    script = sqlfiles.expand("install.sql")
    with psycopg.connect(dsn) as conn:
        conn.add_notice_handler(_log_notice)
        try:
            with conn.transaction():
                conn.execute("select pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
                before = installed_version(conn)
                conn.execute(script)
                after = installed_version(conn)
        except psycopg.Error as exc:
            raise CdcError(f"install failed, nothing was changed: {exc}", exc.diag) from exc
    # the caller says the result (cdc install prints it): here a debug line only
    log.debug("cdc %s %s", after, "installed" if before is None else f"upgraded from {before}")
    return after or ""


def uninstall(dsn: str, drop_roles: bool = True) -> list[str]:
    """Remove the engine from the database; returns the roles that were dropped.

    Roles are cluster-wide: each is dropped only when nothing in any database still
    depends on it, and only when this role may drop roles; otherwise it is kept.
    """
    dropped: list[str] = []
    with psycopg.connect(dsn) as conn:
        conn.add_notice_handler(_log_notice)
        with conn.transaction():
            conn.execute("select pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
            conn.execute(sqlfiles.read("queue/uninstall.sql"))
            if drop_roles:
                for role in ROLES:
                    if _try_drop_role(conn, role):
                        dropped.append(role)
    return dropped


def _try_drop_role(conn: psycopg.Connection, role: str) -> bool:
    if conn.execute("select 1 from pg_roles where rolname = %s", (role,)).fetchone() is None:
        return False
    members = conn.execute(sqlfiles.query("role_outside_members"), {"role": role}).fetchall()
    if members:
        names = ", ".join(m[0] for m in members)
        log.info("kept role %s: roles %s are still members of it", role, names)
        return False
    try:
        with conn.transaction():
            conn.execute(sql.SQL("drop role {}").format(sql.Identifier(role)))
    except (psycopg.errors.DependentObjectsStillExist, psycopg.errors.InsufficientPrivilege) as exc:
        log.info("kept role %s: %s", role, exc.diag.message_primary)
        return False
    return True


def _log_notice(diag: psycopg.errors.Diagnostic) -> None:
    """Server notices at their own level: WARNING as a warning, NOTICE as info, but the
    "already exists, skipping" / "does not exist, skipping" of every install and upgrade
    (the script's ``if [not] exists``) as debug lines."""
    if diag.severity_nonlocalized == "WARNING":
        level = logging.WARNING
    elif (diag.message_primary or "").endswith(", skipping"):
        level = logging.DEBUG
    else:
        level = logging.INFO
    log.log(level, "%s", diag.message_primary)
