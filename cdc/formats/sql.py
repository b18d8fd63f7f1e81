"""sqltriga's ev_data, parsed with sqlglot into column -> text value.

The three shapes (docs/event-format.md §5):

- INSERT ``(c1,c2) values ('1',null)``: every column;
- UPDATE ``c1='x',c2=NULL where k='1'``: the changed columns, and the key from the WHERE;
- DELETE ``k='1' and k2='2'``: the key only.

Values are the columns' text output, as quote_literal wrote it; NULL is None.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp


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


def parse(op: str, data: str) -> dict[str, str | None]:
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
