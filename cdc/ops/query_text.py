"""`cdc sql`'s text, the same on both engines: a result's rows rendered as a table, JSON lines
or CSV, and the ``;``-terminated statements of interactive input. Plain values, no engine.

A result is an Arrow table (DataFusion's rows; Spark's through ``DataFrame.toArrow``) or rows
of Python values (Spark's ``collect``, for a type Arrow cannot carry): ``from_arrow`` and
``from_rows`` turn either into a ``Result`` of plain values, one form for every type:

- a timestamp as ``YYYY-MM-DD HH:MM:SS[.ffffff]``, in UTC for a timestamp with a time zone
  (both engines hand those in UTC), made by Arrow so that a year BC or past 9999 shows too
  (Python's datetime stops at 1 and 9999): ``-0043-03-15 12:00:00`` is 44 BC, as ISO 8601
  counts years; a date the same way;
- binary as ``\\x`` and its bytes in hex (PostgreSQL's form of bytea);
- a map as a JSON object, a struct as one, an array as a list; a decimal, a time or an
  interval as its text where the output is text (JSON: a string).
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cdc.errors import ConfigError

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "FORMATS",
    "MORE",
    "PROMPT",
    "QUIT",
    "Result",
    "check_format",
    "from_arrow",
    "from_rows",
    "plain",
    "render",
    "split",
    "view_name",
]

FORMATS = ("table", "json", "csv")
QUIT = "\\q"
PROMPT, MORE = "cdc> ", "  -> "


def view_name(target: str) -> str:
    """The name a path target is queried by: its target name, ``/`` (and anything else but
    letters, digits and ``_``) as ``_``."""
    return re.sub(r"[^A-Za-z0-9_]", "_", target)


def check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise ConfigError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")


@dataclass(frozen=True)
class Result:
    """A statement's columns and rows, each value plain (see the module doc)."""

    names: list[str]
    rows: list[tuple[Any, ...]]


def from_arrow(table: pa.Table) -> Result:
    """An Arrow table's rows as plain values."""
    columns = [
        [plain(v) for v in _shown(column.combine_chunks()).to_pylist(maps_as_pydicts="lossy")]
        for column in table.columns
    ]
    return Result(list(table.column_names), list(zip(*columns, strict=True)))


def from_rows(names: Sequence[str], rows: Iterable[Sequence[Any]]) -> Result:
    """Rows of Python values (Spark's Rows among them) as plain values."""
    return Result(list(names), [tuple(plain(v) for v in row) for row in rows])


def _shown(array: pa.Array) -> pa.Array:
    """The array with its dates and timestamps (nested ones too) as their text."""
    import pyarrow as pa

    kind = array.type
    if pa.types.is_timestamp(kind) or pa.types.is_date(kind):
        import pyarrow.compute as pc  # here only: its import is a tenth of a second

        if pa.types.is_date(kind):
            return pc.cast(array, pa.string())
        text = pc.strftime(array, "%Y-%m-%d %H:%M:%S")  # in the type's zone; %S has a fraction
        return pc.replace_substring_regex(text, r"\.0+$", "")
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        shape = pa.ListArray if pa.types.is_list(kind) else pa.LargeListArray
        return shape.from_arrays(array.offsets, _shown(array.values), mask=array.is_null())
    if pa.types.is_struct(kind):
        fields = [_shown(child) for child in array.flatten()]
        names = [kind.field(i).name for i in range(kind.num_fields)]
        return pa.StructArray.from_arrays(fields, names=names, mask=array.is_null())
    return array


def plain(value: Any) -> Any:
    """A Python value in its plain form: binary as ``\\x`` hex, a Row as a dict, nested
    values likewise; a date or datetime as its text."""
    import datetime as dt

    if isinstance(value, bytes | bytearray | memoryview):
        return "\\x" + bytes(value).hex()
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if hasattr(value, "asDict"):  # pyspark's Row
        return {k: plain(v) for k, v in value.asDict(recursive=False).items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, dt.datetime):
        return str(value.replace(tzinfo=None))
    if isinstance(value, dt.date):
        return value.isoformat()
    return value


def render(result: Result, fmt: str) -> str:
    """The rows as text; nothing for a statement without columns (DDL, SET)."""
    names, rows = result.names, result.rows
    if not names:
        return ""
    if fmt == "json":
        return "\n".join(json.dumps(dict(zip(names, r, strict=True)), default=str) for r in rows)
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(names)
        writer.writerows([[_csv_cell(v) for v in r] for r in rows])
        return out.getvalue().rstrip("\n")
    cells = [[_cell(v) for v in r] for r in rows]
    widths = [max([len(n), *(len(c[i]) for c in cells)]) for i, n in enumerate(names)]
    lines = ["  ".join(n.ljust(w) for n, w in zip(names, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    lines.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, dict | list):
        return json.dumps(value, default=str, ensure_ascii=False)
    return str(value)


def _csv_cell(value: Any) -> Any:
    return "" if value is None else _cell(value)


def split(text: str, backslash: bool = True) -> tuple[list[str], str]:
    """The complete ``;``-terminated statements of text (quotes and comments respected;
    statements holding only comments left out), and the unfinished rest. backslash: a
    backslash escapes the next character in quotes (Spark SQL; DataFusion's quotes have no
    escapes but a doubled quote)."""
    done: list[str] = []
    start, i, quote, content = 0, 0, "", False
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\" and quote != "`" and backslash:
                i += 2
                continue
            if c == quote:
                quote = ""
        elif text.startswith("--", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:  # open until a later line closes it
                return done, text[start:]
            i = end + 2
            continue
        elif c == ";":
            if content:
                done.append(text[start:i].strip())
            start, content = i + 1, False
        elif not c.isspace():
            content = True
            quote = c if c in "'\"`" else ""
        i += 1
    return done, text[start:] if content or quote else ""
