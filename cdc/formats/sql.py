"""The sql format (PgQ's ``sqltriga``): each event a fragment of SQL, parsed with sqlglot into
column -> text value.

ev_type the bare op ``I``, ``U``, ``D``, and ``R`` for a TRUNCATE (with ev_data ``''``);
ev_data one of three shapes (docs/event-format.md §0, §3, §5):

- INSERT ``(c1,c2) values ('1',null)``: every column;
- UPDATE ``c1='x',c2=NULL where k='1'``: the changed columns, and the key from the WHERE;
- DELETE ``k='1' and k2='2'``: the key only.

So the format is not full-row: an UPDATE leaves out the columns it did not change. Values
are the columns' text output, as quote_literal wrote it; NULL is None. Decoded in Python
(an Arrow UDF runs ``python_map`` on the sql events only).
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from cdc.formats.spec import FirstLetter, Format, KvMap, OneOf, Undecided, driver_first_letter

OPS = ("I", "U", "D")  # the ev_type of a row event is just its op


class SqlEventError(ValueError):
    """An ev_data that is not one of sqltriga's shapes."""


def _value(node: exp.Expression) -> str | None:
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Literal | exp.ByteString) and (
        isinstance(node, exp.ByteString) or node.is_string
    ):
        return str(node.this)
    raise SqlEventError(f"not a quoted literal or NULL: {node.sql('postgres')!r}")


def _name(node: exp.Expression) -> str:
    if isinstance(node, exp.Column) and not node.table:
        return node.name
    if isinstance(node, exp.Identifier):
        return node.this
    raise SqlEventError(f"not a column name: {node.sql('postgres')!r}")


def _conditions(node: exp.Expression | None) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    while isinstance(node, exp.And):
        out.update(_conditions(node.expression))
        node = node.this
    if not isinstance(node, exp.EQ):
        raise SqlEventError("the key condition is not col='value' [and ...]")
    out[_name(node.this)] = _value(node.expression)
    return out


def parse(op: str, data: str) -> KvMap:
    """Column -> text value of one sqltriga event; op is I, U or D."""
    try:
        if op == "I":
            tree = sqlglot.parse_one("insert into t " + data, dialect="postgres")
            if not isinstance(tree, exp.Insert) or not isinstance(tree.this, exp.Schema):
                raise SqlEventError("an INSERT event is (columns) values (...)")
            names = [_name(c) for c in tree.this.expressions]
            rows = tree.expression.expressions if isinstance(tree.expression, exp.Values) else []
            if len(rows) != 1 or len(rows[0].expressions) != len(names):
                raise SqlEventError("an INSERT event has one row of as many values as columns")
            return dict(zip(names, (_value(v) for v in rows[0].expressions), strict=True))
        if op == "U":
            tree = sqlglot.parse_one("update t set " + data, dialect="postgres")
            if not isinstance(tree, exp.Update) or tree.args.get("where") is None:
                raise SqlEventError("an UPDATE event is col=value[,...] where key=value")
            out = _conditions(tree.args["where"].this)
            for eq in tree.expressions:
                if not isinstance(eq, exp.EQ):
                    raise SqlEventError("an UPDATE event assigns col=value")
                out[_name(eq.this)] = _value(eq.expression)
            return out
        if op == "D":
            tree = sqlglot.parse_one("delete from t where " + data, dialect="postgres")
            if not isinstance(tree, exp.Delete) or tree.args.get("where") is None:
                raise SqlEventError("a DELETE event is key=value[ and ...]")
            return _conditions(tree.args["where"].this)
    except sqlglot.errors.SqlglotError as exc:
        raise SqlEventError(f"ev_data does not parse: {exc}") from None
    raise SqlEventError(f"unknown sql event type {op!r}")


def python_map(op: str | None, data: str | None) -> KvMap | None:
    """Column -> text value of one row event; None when it is not one of the three shapes."""
    if op not in OPS or data is None:
        return None
    try:
        return parse(op, data)
    except SqlEventError:
        return None


def driver_map(op: str, data: str) -> KvMap:
    """python_map on the driver: an event that is not one of the shapes is undecided (Spark
    quarantines it)."""
    found = python_map(op, data)
    if found is None:
        raise Undecided("not one of sqltriga's shapes")
    return found


FORMAT = Format(
    name="sql",
    pgq_trigger="pgq.sqltriga",
    ev_type=OneOf(OPS),
    full_row=False,
    op=FirstLetter(),
    truncate_type="R",
    python_map=python_map,
    driver_op=driver_first_letter,
    driver_map=driver_map,
)
