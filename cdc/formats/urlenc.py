"""The urlenc format (PgQ's ``logutriga``): the whole row as ``name=value&...``.

ev_type ``I:<pkey>``, ``U:<pkey>``, ``D:<pkey>`` (the op, a colon, the key columns as the
trigger was given them), ``R`` without a colon for a TRUNCATE; ev_data the row (NEW, OLD for
a DELETE) url-encoded, a NULL value as the bare name (``id=2&name&val``), ``''`` for a
TRUNCATE (docs/event-format.md §0, §3.6). Decoded inside the JVM (``str_to_map``, then
``try_url_decode`` of each name and value: ``+`` is a space, ``%XX`` a byte of UTF-8); a bare
name maps to NULL.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING
from urllib.parse import unquote_plus

from cdc.formats.spec import Format, KvMap, Matches, Undecided, driver_first_letter, first_letter

if TYPE_CHECKING:
    from pyspark.sql import Column


def jvm_map(ev_data: Column) -> Column:
    """The url-encoded pairs as column -> text, names and values decoded."""
    from pyspark.sql import functions as F

    pairs = F.str_to_map(ev_data, F.lit("&"), F.lit("="))
    keys_decoded = F.transform_keys(pairs, lambda k, _: F.try_url_decode(k))
    return F.transform_values(keys_decoded, lambda _, v: F.try_url_decode(v))


# a % not followed by two hex digits: Java's URLDecoder refuses it, Python's keeps it
BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


def _decoded(text: str) -> str:
    """try_url_decode on the driver: + is a space, runs of %XX are UTF-8; undecided for a
    malformed escape or bytes that are not UTF-8 (Java would put U+FFFD in their place)."""
    if BAD_ESCAPE.search(text):
        raise Undecided("a malformed % escape")
    try:
        return unquote_plus(text, encoding="utf-8", errors="strict")
    except UnicodeDecodeError:
        raise Undecided("escaped bytes that are not UTF-8") from None


def driver_map(op: str, ev_data: str) -> KvMap:
    """jvm_map on the driver: the url-encoded pairs as column -> text (a bare name: NULL)."""
    found: KvMap = {}
    for pair in ev_data.split("&"):
        name, equals, text = pair.partition("=")
        if not name:
            raise Undecided("an empty name in a url-encoded row")
        key = _decoded(name)
        if key in found:
            raise Undecided(f"name {key!r} repeats in a url-encoded row")
        found[key] = _decoded(text) if equals else None
    return found


FORMAT = Format(
    name="urlenc",
    pgq_trigger="pgq.logutriga",
    ev_type=Matches("^[IUD]:"),
    full_row=True,
    op=first_letter,
    truncate_type="R",
    jvm_map=jvm_map,
    driver_op=driver_first_letter,
    driver_map=driver_map,
)
