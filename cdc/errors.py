"""Typed exceptions, one class per SQLSTATE the queue engine raises (class ``QC``).

``translate()`` turns a psycopg error into the matching class; errors with other SQLSTATEs
are returned unchanged. Every ``CdcError`` carries ``sqlstate`` and, when it came from the
server, psycopg's ``diag``.

The error table of docs/queue.md is generated from the ``QueueError`` subclasses (their
``sqlstate`` and ``when``): ``python -m cdc.errors`` prints it, ``python -m cdc.errors
docs/queue.md`` rewrites it between its markers, and a unit test fails when they differ.
"""

from __future__ import annotations

import sys
from pathlib import Path
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
    """An error raised by the queue engine inside PostgreSQL. Each subclass names its SQLSTATE
    and says ``when`` the engine raises it: docs/queue.md's error table is made from them."""

    when: ClassVar[str] = ""
    hint: ClassVar[str] = ""
    """What to do, as the ``cdc`` command does it; the server's hint (SQL) when empty."""


class QueueNotFound(QueueError):
    sqlstate = "QC001"
    when = "no queue of that name"
    hint = "create it with `cdc queue create NAME`, or check the name with `cdc queue info NAME`"


class ConsumerNotFound(QueueError):
    sqlstate = "QC002"
    when = "consumer not registered on the queue"
    hint = (
        "`cdc consumer list QUEUE` lists its consumers; `cdc consumer register QUEUE NAME`"
        " registers one (a drain registers its own)"
    )


class BatchNotFound(QueueError):
    sqlstate = "QC003"
    when = "batch finished already, or never opened"


class TickNotFound(QueueError):
    sqlstate = "QC004"
    when = "`register_consumer_at` a tick that is gone"


class InvalidName(QueueError):
    sqlstate = "QC005"
    when = "NULL, empty, over 63 bytes, or control characters"


class InvalidArgument(QueueError):
    sqlstate = "QC006"
    when = "a NULL argument, unknown setting or bad value"


class PerTxLimitExceeded(QueueError):
    sqlstate = "QC007"
    when = "more events in one transaction than `per_tx_limit`"


class InsertDisabled(QueueError):
    sqlstate = "QC008"
    when = "the queue has `disable_insert`"
    hint = "enable them with `cdc queue config QUEUE disable_insert=false`"


class QueueInUse(QueueError):
    sqlstate = "QC009"
    when = "`drop_queue` with consumers, without force"
    hint = (
        "unregister them first (`cdc consumer unregister QUEUE NAME`), or drop it with its"
        " consumers: `cdc queue drop QUEUE --force`"
    )


class EventNotInBatch(QueueError):
    sqlstate = "QC010"
    when = "retry or dead-letter of an event outside the batch"


class TickerNotAllowed(QueueError):
    sqlstate = "QC011"
    when = "ticking a paused queue or one with an external ticker"
    hint = (
        "`cdc queue config QUEUE` shows its settings;"
        " `cdc queue config QUEUE ticker_paused=false external_ticker=false` ticks it here"
    )


class WrongIsolation(QueueError):
    sqlstate = "QC012"
    when = "ticking or rotating outside READ COMMITTED"


class NotConsumerRole(QueueError):
    """The session may not act for this consumer: it belongs to another role (the one that
    registered it), and the session's login role is neither a member of it nor of cdc_admin."""

    sqlstate = "QC014"
    when = 'acting for a consumer that another role registered (see "Who may act for a consumer")'


class AdminOnly(QueueError):
    """A call that only cdc_admin members (and the owner of schema cdc) may make, such as
    the external ticker, by a session whose login role is neither."""

    sqlstate = "QC015"
    when = (
        "the external `ticker(queue, tick_id, time, event_seq)` by a login role that is not a"
        " `cdc_admin` member"
    )


class NoPrimaryKey(QueueError):
    """The table to capture has no primary key and no --pkey was given."""

    sqlstate = "QC020"
    when = "capturing a table without a primary key and without `pkey`"


class UnknownColumn(QueueError):
    sqlstate = "QC021"
    when = "`pkey` names a column the table does not have"


class ChangeDenied(QueueError):
    """A change to a table captured with deny."""

    sqlstate = "QC022"
    when = "a change to a table captured with `deny`"


class NotCaptured(QueueError):
    sqlstate = "QC023"
    when = "detaching a table that is not captured (into that queue)"


class CaptureBroken(QueueError):
    """A change to a captured table would break its capture options (the DDL is refused)."""

    sqlstate = "QC024"
    when = "an option expression that does not fit the table, or a `when` that is not boolean"


class NotTableOwner(QueueError):
    """Capture asked (attach, detach, capture_sql) by a session whose login role is not a
    member of the role that owns the table."""

    sqlstate = "QC025"
    when = (
        "attach / capture_sql / detach by a login role that is not a member of the table's "
        "owner role"
    )


class ExpressionRefused(QueueError):
    """An option expression (when, extra1..4, ev_type) given to cdc.attach is not one plain
    expression over the row, or calls a function, operator or type outside what capture
    allows (see the capture security notes in README.md)."""

    sqlstate = "QC026"
    when = (
        "an option expression that is not one plain expression, or uses what capture does not "
        'allow (README, "Capture security")'
    )


class UnknownMagicColumn(QueueError):
    """The table has a column named like PgQ's magic columns (``_pgq_ev_`` then a suffix)
    that is not one of them."""

    sqlstate = "QC027"
    when = (
        "capturing a table with a column `_pgq_ev_<x>` that is not `_pgq_ev_type`, "
        "`_pgq_ev_data` or `_pgq_ev_extra1..4`"
    )


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
    hint = cls.hint or exc.diag.message_hint
    if hint:
        message = f"{message} (hint: {hint})"
    return cls(message, exc.diag)


TABLE_BEGIN = (
    "<!-- errors table: generated from cdc/errors.py by `python -m cdc.errors docs/queue.md` -->"
)
TABLE_END = "<!-- end of errors table -->"


def markdown_table() -> str:
    """The docs' error table: one row per engine SQLSTATE, in code order."""
    rows = ["| SQLSTATE | Python (`cdc.errors`) | when |", "|---|---|---|"]
    rows += [
        f"| {code} | `{cls.__name__}` | {cls.when} |" for code, cls in sorted(_BY_SQLSTATE.items())
    ]
    return "\n".join(rows) + "\n"


def with_table(doc: str) -> str:
    """doc with the text between its table markers replaced by ``markdown_table()``."""
    head, sep, rest = doc.partition(TABLE_BEGIN + "\n")
    _, sep2, tail = rest.partition(TABLE_END)
    if not sep or not sep2:
        raise ValueError(f"the markers {TABLE_BEGIN!r} and {TABLE_END!r} are missing")
    return head + TABLE_BEGIN + "\n" + markdown_table() + TABLE_END + tail


def main(argv: list[str]) -> None:
    """Print the table, or with a file name, rewrite the table between its markers there."""
    if not argv:
        print(markdown_table(), end="")
        return
    path = Path(argv[0])
    path.write_text(with_table(path.read_text(encoding="utf-8")), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
