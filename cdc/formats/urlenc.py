"""The urlenc format (PgQ's ``logutriga``): the whole row as ``name=value&...``.

ev_type ``I:<pkey>``, ``U:<pkey>``, ``D:<pkey>`` (the op, a colon, the key columns as the
trigger was given them), ``R`` without a colon for a TRUNCATE; ev_data the row (NEW, OLD for
a DELETE) url-encoded, a NULL value as the bare name (``id=2&name&val``), ``''`` for a
TRUNCATE (docs/event-format.md §0, §3.6). Decoded inside the JVM (``str_to_map``, then
``try_url_decode`` of each name and value: ``+`` is a space, ``%XX`` a byte of UTF-8); a bare
name maps to NULL.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cdc.formats.spec import Format, Matches, first_letter

if TYPE_CHECKING:
    from pyspark.sql import Column


def jvm_map(ev_data: Column) -> Column:
    """The url-encoded pairs as column -> text, names and values decoded."""
    from pyspark.sql import functions as F

    pairs = F.str_to_map(ev_data, F.lit("&"), F.lit("="))
    keys_decoded = F.transform_keys(pairs, lambda k, _: F.try_url_decode(k))
    return F.transform_values(keys_decoded, lambda _, v: F.try_url_decode(v))


FORMAT = Format(
    name="urlenc",
    pgq_trigger="pgq.logutriga",
    ev_type=Matches("^[IUD]:"),
    full_row=True,
    op=first_letter,
    truncate_type="R",
    jvm_map=jvm_map,
)
