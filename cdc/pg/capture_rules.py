"""Capture rules: attach every table whose name matches a glob, now and when created later.

A rule (``cdc.add_capture_rule``) is stored in PostgreSQL with its owner, the login role that
added it; ``cdc.sync_captures`` / ``cdc.sync_capture_rule`` attach the matching tables there
now, and an event trigger (a superuser cdc owner) those created later, in their creating
transaction. Everything that decides which table is attached, and on whose authority, runs in
PostgreSQL (triggers/capture/functions/cdc.capture_rules.sql); this module only checks the
pattern and the options first, so that a mistake is reported before anything is stored.

Invariants:
- ``add`` with ``dry_run`` records nothing and attaches nothing: the rule is added, previewed
  (``dry_run`` sync: the generator checks each table, nothing is created) and rolled back in
  one transaction.
- Without ``dry_run``, the rule and the attaches of the tables there now commit together;
  a table that cannot be attached is a ``skipped`` row with its reason, never an exception.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import dict_row

from cdc import errors, globs
from cdc.pg import sqlfiles
from cdc.pg.capture import CaptureOptions, rule_options_json

ATTACHED = "attached"
WOULD_ATTACH = "would attach"
SKIPPED = "skipped"
CAPTURED = "captured"
NO_KEY = "no primary key and no usable unique index"


@dataclass(frozen=True)
class SyncRow:
    """What a sync did (or would do) with one table matched by a rule."""

    table: str  # schema.table, each part quoted where needed
    queue: str
    action: str  # ATTACHED, WOULD_ATTACH, SKIPPED or CAPTURED
    reason: str | None

    @property
    def keyless(self) -> bool:
        """Skipped only for want of a key (a listing, not a failure)."""
        return self.action == SKIPPED and (self.reason or "").startswith(NO_KEY)


@dataclass(frozen=True)
class RuleResult:
    """A rule added (or previewed: rule_id None) and what its first sync did."""

    rule_id: int | None
    rows: list[SyncRow]


def is_pattern(text: str) -> bool:
    """Whether a table argument is a pattern (a wildcard in its schema or table part)."""
    if globs.WILDCARDS.isdisjoint(text):
        return False  # a table name, parsed as before (cdc.pg.capture.parse_table_name)
    schema, table = globs.split(text)
    return globs.is_pattern(schema) or globs.is_pattern(table)


def _rows(cur: psycopg.Cursor[Any]) -> list[SyncRow]:
    return [SyncRow(*row) for row in cur.fetchall()]


def add(
    conn: psycopg.Connection,
    pattern: str,
    opts: CaptureOptions,
    exclude: tuple[str, ...] = (),
    *,
    dry_run: bool = False,
) -> RuleResult:
    """Record a rule for pattern (``schema.table`` globs) and sync it now; with dry_run,
    only what it would do."""
    schema, table = globs.split(pattern)
    for item in exclude:
        globs.split(item, default_schema=None)
    params = {
        "schema": schema,
        "table": table,
        "queue": opts.queue,
        "options": json.dumps(rule_options_json(opts)),
        "exclude": list(exclude),
    }
    try:
        with conn.transaction():
            rule_id = conn.execute(sqlfiles.query("add_capture_rule"), params).fetchone()[0]
            rows = _rows(
                conn.execute(
                    sqlfiles.query("sync_capture_rule"), {"rule": rule_id, "dry_run": dry_run}
                )
            )
            if dry_run:
                raise psycopg.Rollback()  # the block ends without an error, nothing recorded
    except psycopg.Error as exc:
        raise errors.translate(exc) from exc
    return RuleResult(None if dry_run else rule_id, rows)


def sync(conn: psycopg.Connection, queue: str | None, *, dry_run: bool = False) -> list[SyncRow]:
    """Apply the stored rules (of one queue, or all) to the tables there now."""
    try:
        with conn.transaction():
            cur = conn.execute(
                sqlfiles.query("sync_captures"), {"queue": queue, "dry_run": dry_run}
            )
            return _rows(cur)
    except psycopg.Error as exc:
        raise errors.translate(exc) from exc


def remove(conn: psycopg.Connection, rule_id: int) -> None:
    """Remove a rule (its owner or a superuser); the tables it attached stay captured."""
    try:
        with conn.transaction():
            conn.execute(sqlfiles.query("remove_capture_rule"), {"rule": rule_id})
    except psycopg.Error as exc:
        raise errors.translate(exc) from exc


def rules(conn: psycopg.Connection) -> list[dict[str, Any]]:
    """Every capture rule: id, globs, excludes, queue, options, owner, created."""
    try:
        return conn.cursor(row_factory=dict_row).execute(sqlfiles.query("capture_rules")).fetchall()
    except psycopg.Error as exc:
        raise errors.translate(exc) from exc
