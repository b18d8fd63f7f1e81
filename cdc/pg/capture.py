"""Attaching capture triggers to tables: options, expression checks, attach / detach / list.

The trigger code itself is generated inside PostgreSQL (``cdc.capture_sql``), so that an event
trigger can regenerate it when the table changes. This module checks what a user gives before
any DDL runs:

- every option names real columns;
- ``when`` / ``extra`` / ``ev_type`` expressions are parsed with sqlglot: exactly one
  expression, no subquery, only the table's columns, bare (the row: NEW, or OLD on DELETE)
  or as ``NEW.col`` / ``OLD.col``;
- the server then type-checks them against the table (``when`` must be boolean).

Expressions are stored rewritten: a bare column becomes ``"__cdc_row"."col"``, which the
generator binds to NEW or OLD.

These checks are for good messages; they are not the security boundary. ``cdc.attach`` checks
again inside PostgreSQL, whoever calls it: the session's login role must be a member of the
table's owner role (QC025), and each expression must be one expression over the row using
only built-in functions without side effects, checked without running it (QC026; see
``triggers/capture/functions/cdc.capture_ddl.sql``). The type check here runs the query with
the caller's own rights, over no rows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

import psycopg
import sqlglot
from psycopg import sql
from sqlglot import exp
from sqlglot.errors import ParseError

from cdc import errors, formats
from cdc.pg import sqlfiles

Format = str  # one of cdc.formats.NAMES
Mode = Literal["row", "statement"]
ROW_ALIAS = "__cdc_row"
BOOL_OID = 16


@dataclass(frozen=True)
class CaptureOptions:
    """What ``cdc attach`` takes, with PgQ's meaning."""

    queue: str
    format: Format = "json"
    ignore: tuple[str, ...] = ()
    pkey: tuple[str, ...] = ()
    backup: bool = False
    when: str | None = None
    extra: dict[int, str] = field(default_factory=dict)
    ev_type: str | None = None
    skip: bool = False
    deny: bool = False
    mode: Mode = "row"

    def __post_init__(self) -> None:
        if self.format not in formats.NAMES:
            names = ", ".join(formats.NAMES[:-1]) + " or " + formats.NAMES[-1]
            raise errors.ConfigError(f"format must be {names}, not {self.format!r}")
        if self.mode not in ("row", "statement"):
            raise errors.ConfigError(f"mode must be row or statement, not {self.mode!r}")
        if self.mode == "statement" and (self.skip or self.deny):
            raise errors.ConfigError(
                "skip and deny act on each row: use them with mode 'row', not 'statement'"
            )
        bad = [n for n in self.extra if n not in (1, 2, 3, 4)]
        if bad:
            raise errors.ConfigError(f"extra fields are numbered 1 to 4, not {bad}")
        if self.skip and self.deny:
            raise errors.ConfigError("skip and deny exclude each other: choose one")


@dataclass(frozen=True)
class Table:
    schema: str
    name: str
    oid: int
    columns: tuple[str, ...]

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"


def parse_table_name(text: str) -> tuple[str, str]:
    """``schema.table`` (or ``table``, meaning public) as written on a command line; quoted
    parts keep their case, unquoted ones are lower-cased as PostgreSQL does."""
    try:
        parsed = sqlglot.parse_one(text, read="postgres", into=exp.Table)
    except ParseError as exc:
        raise errors.ConfigError(f"{text!r} is not a table name: {exc}") from exc
    assert isinstance(parsed, exp.Table)

    def part(ident: exp.Identifier | None, default: str) -> str:
        if ident is None:
            return default
        return ident.name if ident.quoted else ident.name.lower()

    return part(parsed.args.get("db"), "public"), part(parsed.this, "")


def describe(conn: psycopg.Connection, table: str) -> Table:
    """The table's oid and live columns; ConfigError when it does not exist."""
    schema, name = parse_table_name(table)
    row = conn.execute(
        sqlfiles.query("describe_table"), {"schema": schema, "name": name}
    ).fetchone()
    if row is None:
        raise errors.ConfigError(f"table {schema}.{name} does not exist")
    oid, columns = row
    return Table(schema, name, oid, tuple(columns))


def rewrite_expression(text: str, columns: tuple[str, ...] | None, what: str) -> str:
    """Check an option expression and rewrite its column references (see module doc).
    columns None (a capture rule: no table yet) binds any name; the server checks it
    against each table the rule attaches."""
    try:
        statements = sqlglot.parse(text, read="postgres")
    except ParseError as exc:
        raise errors.InvalidExpression(f"{what}: cannot parse {text!r}: {exc}") from exc
    statements = [s for s in statements if s is not None]
    if len(statements) != 1:
        raise errors.InvalidExpression(
            f"{what}: {text!r} must be one expression, not {len(statements)}"
        )
    tree = statements[0]
    if isinstance(tree, exp.Query | exp.Command | exp.DDL | exp.DML) or tree.find(exp.Query):
        raise errors.InvalidExpression(
            f"{what}: {text!r} must be an expression, without subqueries"
        )
    unknown: list[str] = []

    def bind(node: exp.Expression) -> exp.Expression:
        if not isinstance(node, exp.Column):
            return node
        ident = node.this
        name = ident.name if ident.quoted else ident.name.lower()
        qualifier = node.table.upper()
        if qualifier not in ("", "NEW", "OLD") or node.args.get("db"):
            raise errors.InvalidExpression(
                f"{what}: {node.sql(dialect='postgres')} is not allowed: write a column of the "
                "table, bare (the row) or as NEW.col / OLD.col"
            )
        if columns is not None and name not in columns:
            unknown.append(name)
            return node
        row = (
            exp.to_identifier(ROW_ALIAS, quoted=True)
            if not qualifier
            else exp.to_identifier(qualifier)
        )
        return exp.Column(this=exp.to_identifier(name, quoted=True), table=row)

    tree = tree.transform(bind)
    if unknown:
        raise errors.InvalidExpression(
            f"{what}: unknown column(s) {', '.join(sorted(set(unknown)))} in {text!r}; "
            f"the table has: {', '.join(columns)}"
        )
    return tree.sql(dialect="postgres")


def _check_types(conn: psycopg.Connection, table: Table, options: dict[str, Any]) -> None:
    """Let the server type-check the rewritten expressions against the table's row type."""
    src = sql.SQL("(select * from {} limit 0)").format(sql.Identifier(table.schema, table.name))
    rows = sql.SQL("{src} as {row}, {src} as new, {src} as old").format(
        src=src, row=sql.Identifier(ROW_ALIAS)
    )
    checks = [("when", options.get("when"))] + [
        (key, options.get(key)) for key in ("extra1", "extra2", "extra3", "extra4", "ev_type")
    ]
    for key, expr in checks:
        if expr is None:
            continue
        query = sql.SQL("select ({}) from {}").format(sql.SQL(expr), rows)  # expr: checked above
        try:
            with conn.transaction():
                cur = conn.execute(query)
        except psycopg.Error as exc:
            raise errors.InvalidExpression(f"{key}: {exc.diag.message_primary}") from exc
        if key == "when" and cur.description[0].type_code != BOOL_OID:
            raise errors.InvalidExpression("when: the expression must be boolean (true/false)")


def _as_text(expr: str) -> str:
    """An expression's value as its type's text output (bool t/f, as PgQ writes it), NULL
    staying NULL."""
    return f"case when ({expr}) is not null then format('%s', ({expr})) end"


def options_json(conn: psycopg.Connection, table: Table, opts: CaptureOptions) -> dict[str, Any]:
    """The options as cdc.attach() takes them, every name and expression checked."""
    for what, names in (("ignore", opts.ignore), ("pkey", opts.pkey)):
        missing = [n for n in names if n not in table.columns]
        if missing:
            raise errors.ConfigError(
                f"{what} names columns that {table.qualified} does not have: {', '.join(missing)}"
            )
    out = _options(opts, table.columns)
    _check_types(conn, table, out)
    return out


def rule_options_json(opts: CaptureOptions) -> dict[str, Any]:
    """The options of a capture rule as cdc.add_capture_rule() takes them: expressions
    parsed and rewritten, their columns checked by the server against each table."""
    return _options(opts, None)


def _options(opts: CaptureOptions, columns: tuple[str, ...] | None) -> dict[str, Any]:
    out: dict[str, Any] = {"format": opts.format}
    if opts.mode != "row":
        out["mode"] = opts.mode
    if opts.ignore:
        out["ignore"] = list(opts.ignore)
    if opts.pkey:
        out["pkey"] = list(opts.pkey)
    for flag in ("backup", "skip", "deny"):
        if getattr(opts, flag):
            out[flag] = True
    if opts.when is not None:
        out["when"] = rewrite_expression(opts.when, columns, "when")
    for n, text in sorted(opts.extra.items()):
        out[f"extra{n}"] = _as_text(rewrite_expression(text, columns, f"extra{n}"))
    if opts.ev_type is not None:
        out["ev_type"] = _as_text(rewrite_expression(opts.ev_type, columns, "ev_type"))
    if opts.mode == "statement":
        for key in ("when", "extra1", "extra2", "extra3", "extra4", "ev_type"):
            if key in out and ('NEW."' in out[key] or 'OLD."' in out[key]):
                raise errors.InvalidExpression(
                    f"{key}: NEW.col / OLD.col need mode 'row'; in statement mode write the "
                    "bare column (the new row, the old one on DELETE)"
                )
    return out


def _run_generator(conn: psycopg.Connection, table: str, opts: CaptureOptions, query: str) -> str:
    """Check the options, then call the generator (``attach`` runs its SQL, ``capture_sql``
    only returns it); one transaction."""
    with conn.transaction():
        t = describe(conn, table)
        payload = options_json(conn, t, opts)
        params = {"table": t.oid, "queue": opts.queue, "options": json.dumps(payload)}
        try:
            return conn.execute(sqlfiles.query(query), params).fetchone()[0]
        except psycopg.Error as exc:
            raise errors.translate(exc) from exc


def attach(conn: psycopg.Connection, table: str, opts: CaptureOptions) -> str:
    """Attach capture (replacing an earlier attach to the same queue); the SQL that ran."""
    return _run_generator(conn, table, opts, "attach")


def generated_sql(conn: psycopg.Connection, table: str, opts: CaptureOptions) -> str:
    """What attach would run, without running it."""
    return _run_generator(conn, table, opts, "capture_sql")


def detach(conn: psycopg.Connection, table: str, queue: str | None = None) -> int:
    """Remove capture from a table (one queue, or all); how many captures were removed."""
    with conn.transaction():
        t = describe(conn, table)
        try:
            return conn.execute(
                sqlfiles.query("detach"), {"table": t.oid, "queue": queue}
            ).fetchone()[0]
        except psycopg.Error as exc:
            raise errors.translate(exc) from exc


def captures(conn: psycopg.Connection) -> list[dict[str, Any]]:
    """Every capture: table, queue, format, options, and whether its trigger is current."""
    cur = conn.cursor(row_factory=psycopg.rows.dict_row)
    return cur.execute(sqlfiles.query("capture_info")).fetchall()
