"""The json format (PgQ's ``jsontriga``): the whole row as a JSON object.

ev_type ``{"op":"INSERT","table":["<schema>","<table>"],"pkey":["<col>",...]}`` (op INSERT,
UPDATE, DELETE or TRUNCATE); ev_data the row (NEW, OLD for a DELETE) as a JSON object, ``{}``
for a TRUNCATE (docs/event-format.md §0, §3.6, §4). The trigger writes integers and booleans
bare, NULL as ``null``, every other value as a JSON string of its text output. Decoded inside
the JVM (``from_json`` into a string map): a string as its content, a bare value as its JSON
text.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from cdc.formats.spec import Format, KvMap, StartsWith, Undecided

if TYPE_CHECKING:
    from pyspark.sql import Column

# PostgreSQL values reach 1 GB; Jackson's default stops strings at 20 MB
MAX_STRING_LEN = 2**31 - 1


def op(ev_type: Column) -> Column:
    """I, U, D from the first letter of the JSON ``op``; R for TRUNCATE."""
    from pyspark.sql import functions as F

    json_op = F.get_json_object(ev_type, "$.op")
    return F.when(json_op == "TRUNCATE", F.lit("R")).otherwise(F.substring(json_op, 1, 1))


def jvm_map(ev_data: Column) -> Column:
    """The JSON object as column -> text; null when it is not a JSON object."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import MapType, StringType

    return F.from_json(
        ev_data, MapType(StringType(), StringType()), {"maxStringLen": str(MAX_STRING_LEN)}
    )


OPS = {"INSERT": "I", "UPDATE": "U", "DELETE": "D", "TRUNCATE": "R"}


def _object(text: str) -> dict[str, Any]:
    """A JSON object as Python's json reads it, refusing what Spark's parser (Jackson) might
    read otherwise: NaN and Infinity, non-integral numbers (Jackson writes them back in its
    own form), repeated names, trailing text, anything but an object."""

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        found = dict(items)
        if len(found) != len(items):
            raise Undecided("a name repeats in a JSON object")
        return found

    def refuse(token: str) -> None:
        raise Undecided(f"JSON number {token[:20]!r}")

    try:
        found = json.loads(text, object_pairs_hook=pairs, parse_constant=refuse, parse_float=refuse)
    except (ValueError, TypeError) as exc:  # JSONDecodeError, too many digits
        raise Undecided(f"not JSON as Python reads it: {exc}") from None
    if not isinstance(found, dict):
        raise Undecided("not a JSON object")
    return found


def _text(value: Any) -> str | None:
    """A JSON value as from_json's string map holds it: a string's content, null as null,
    true, false and an integer as their JSON text; anything else is undecided."""
    if value is None:
        return None
    if isinstance(value, str):
        return _utf8(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and -(2**63) <= value < 2**63:
        return str(value)  # a longer one may pass Jackson's number length limit
    raise Undecided(f"a JSON {type(value).__name__} value")


def _utf8(text: str) -> str:
    """text, when it has a UTF-8 form (a JSON escape may make a lone surrogate, \\ud800)."""
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise Undecided("a JSON string holds a lone surrogate") from None
    return text


def driver_op(ev_type: str) -> str:
    """op on the driver: I, U, D from the ``op`` INSERT, UPDATE, DELETE; R for TRUNCATE."""
    op = _object(ev_type).get("op")
    found = OPS.get(op) if isinstance(op, str) else None
    if found is None:
        raise Undecided("a json ev_type without a known op")
    return found


def driver_map(op: str, ev_data: str) -> KvMap:
    """jvm_map on the driver: the JSON object as column -> text."""
    return {_utf8(name): _text(value) for name, value in _object(ev_data).items()}


FORMAT = Format(
    name="json",
    pgq_trigger="pgq.jsontriga",
    ev_type=StartsWith("{"),
    full_row=True,
    op=op,
    jvm_map=jvm_map,
    driver_op=driver_op,
    driver_map=driver_map,
)
