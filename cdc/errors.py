"""Typed exceptions, one class per SQLSTATE the queue engine raises (class ``QC``).

``translate()`` turns a psycopg error into the matching class; errors with other SQLSTATEs
are returned unchanged. Every ``CdcError`` carries ``sqlstate`` and, when it came from the
server, psycopg's ``diag``.
"""

from __future__ import annotations

from typing import ClassVar

import psycopg


class CdcError(Exception):
    """Base class of every error this package raises on purpose."""

    sqlstate: ClassVar[str | None] = None

    def __init__(self, message: str, diag: psycopg.errors.Diagnostic | None = None) -> None:
        super().__init__(message)
        self.diag = diag


class ConfigError(CdcError):
    """A setting or argument given to the tool is missing or wrong."""


class NotInstalled(CdcError):
    """The cdc schema is not installed in the database."""


class QueueError(CdcError):
    """An error raised by the queue engine inside PostgreSQL."""


class QueueNotFound(QueueError):
    sqlstate = "QC001"


class ConsumerNotFound(QueueError):
    sqlstate = "QC002"


class BatchNotFound(QueueError):
    sqlstate = "QC003"


class TickNotFound(QueueError):
    sqlstate = "QC004"


class InvalidName(QueueError):
    sqlstate = "QC005"


class InvalidArgument(QueueError):
    sqlstate = "QC006"


class PerTxLimitExceeded(QueueError):
    sqlstate = "QC007"


class InsertDisabled(QueueError):
    sqlstate = "QC008"


class QueueInUse(QueueError):
    sqlstate = "QC009"


class EventNotInBatch(QueueError):
    sqlstate = "QC010"


class TickerNotAllowed(QueueError):
    sqlstate = "QC011"


class WrongIsolation(QueueError):
    sqlstate = "QC012"


class NotConsumerRole(QueueError):
    """The session may not act for this consumer: it belongs to another role (the one that
    registered it), and the session's login role is neither a member of it nor of cdc_admin."""

    sqlstate = "QC014"


class NoPrimaryKey(QueueError):
    """The table to capture has no primary key and no --pkey was given."""

    sqlstate = "QC020"


class UnknownColumn(QueueError):
    sqlstate = "QC021"


class ChangeDenied(QueueError):
    """A change to a table captured with deny."""

    sqlstate = "QC022"


class NotCaptured(QueueError):
    sqlstate = "QC023"


class CaptureBroken(QueueError):
    """A change to a captured table would break its capture options (the DDL is refused)."""

    sqlstate = "QC024"


class NotTableOwner(QueueError):
    """Capture asked (attach, detach, capture_sql) by a session whose login role is not a
    member of the role that owns the table."""

    sqlstate = "QC025"


class ExpressionRefused(QueueError):
    """An option expression (when, extra1..4, ev_type) given to cdc.attach is not one plain
    expression over the row, or calls a function, operator or type outside what capture
    allows (see the capture security notes in README.md)."""

    sqlstate = "QC026"


class InvalidExpression(ConfigError):
    """A --when / --extra / --ev-type expression failed its checks."""


class TableUnappliable(CdcError):
    """One configured table cannot be applied to its target (dropped or renamed source, a
    schema Delta cannot hold, an incompatible retype, an unrepresentable key). The drain
    quarantines that table's events with ``reason``, marks it failing, and goes on with the
    other tables; ``cdc resync`` recovers it once the cause is fixed."""

    def __init__(self, table: str, reason: str) -> None:
        super().__init__(f"table {table} cannot be applied: {reason}")
        self.table = table
        self.reason = reason


_BY_SQLSTATE: dict[str, type[QueueError]] = {
    cls.sqlstate: cls for cls in QueueError.__subclasses__() if cls.sqlstate
}


def lookup(sqlstate: str) -> type[QueueError]:
    """The exception class of a queue engine SQLSTATE; KeyError for any other code."""
    return _BY_SQLSTATE[sqlstate]


def translate(exc: psycopg.Error) -> Exception:
    """The typed error for a psycopg error raised by the engine, else the error itself."""
    cls = _BY_SQLSTATE.get(exc.sqlstate or "")
    if cls is None:
        if exc.sqlstate == "3F000" or (
            exc.sqlstate == "42883" and "cdc." in (exc.diag.message_primary or "")
        ):
            return NotInstalled(
                "the cdc schema is not installed in this database: run `cdc install --dsn ...`",
                exc.diag,
            )
        return exc
    message = exc.diag.message_primary or str(exc)
    if exc.diag.message_hint:
        message = f"{message} (hint: {exc.diag.message_hint})"
    return cls(message, exc.diag)
