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
from functools import partial
from typing import TYPE_CHECKING
from urllib.parse import unquote_plus

from cdc.formats.spec import (
    FirstLetter,
    Format,
    KvMap,
    Matches,
    Shape,
    Undecided,
    UrlEncoded,
    driver_first_letter,
    re2_literal,
)

if TYPE_CHECKING:
    import pyarrow as pa

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


def driver_shape(ev_data: str) -> Shape | None:
    """The Shape of the url-encoded rows with this one's names, in its order and spelling:
    each name, then ``=`` and its value (no ``&`` in it) or nothing (NULL)."""
    names, spelled = [], []
    for pair in ev_data.split("&"):
        name = pair.partition("=")[0]
        try:
            names.append(_decoded(name))
        except Undecided:
            return None
        spelled.append(name)
    if not all(spelled) or len(set(names)) != len(names):
        return None
    pairs = [re2_literal(name) + f"(?P<g{k}>=[^&]*)?" for k, name in enumerate(spelled)]
    return Shape("^" + "&".join(pairs) + "$", tuple(names), partial(_read, tuple(spelled)))


def _read(spelled: tuple[str, ...], ev_data: pa.Array | pa.ChunkedArray) -> list[pa.Array]:
    """Shape.read: rows of the shape split at ``&`` (their values hold none), the pieces of
    one name each its own column, the spelled name cut off its front (leaving ``=value``,
    or nothing for NULL), made texts."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    pieces = pc.list_flatten(pc.split_pattern(ev_data, "&"))
    if isinstance(pieces, pa.ChunkedArray):
        pieces = pieces.combine_chunks()
    rows = np.arange(len(ev_data), dtype=np.int64) * len(spelled)
    return [
        texts(pc.utf8_slice_codeunits(pieces.take(pa.array(rows + k)), len(name)))
        for k, name in enumerate(spelled)
    ]


# a value whose escapes are all of ASCII characters, each a % and two hex digits
ASCII_ESCAPES = "^(?:[^%]|%[0-7][0-9A-Fa-f])*$"
ASCII_ESCAPE = re.compile("[0-7][0-9A-Fa-f]")


def texts(tokens: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Captured ``=value`` tokens as driver_map's texts: an empty token (a bare name) is
    NULL; ``+`` is a space and ``%XX`` the ASCII character XX, replaced column-wise, one
    escape at a time (``%25``, the ``%``, last); a value with any other escape (UTF-8 bytes
    of a non-ASCII character, a malformed one) is decoded one by one."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(tokens, pa.ChunkedArray):
        tokens = tokens.combine_chunks()
    values = pc.utf8_slice_codeunits(tokens, 1)
    out = pc.replace_substring(values, "+", " ")
    escaped = pc.match_substring(values, "%")
    if pc.any(escaped).as_py():
        pieces = pc.list_flatten(pc.list_slice(pc.split_pattern(values.filter(escaped), "%"), 1))
        for escape in sorted(set(pc.utf8_slice_codeunits(pieces, 0, 2).unique().to_pylist())):
            if ASCII_ESCAPE.fullmatch(escape) and escape != "25":
                out = pc.replace_substring(out, "%" + escape, _decoded("%" + escape))
        out = pc.replace_substring(out, "%25", "%")
        # the others, and the malformed ones (their replacement above is undone here)
        alone = pc.and_(escaped, pc.invert(pc.match_substring_regex(values, ASCII_ESCAPES)))
        if pc.any(alone).as_py():
            read = [_decoded(value) for value in values.filter(alone).to_pylist()]
            out = pc.replace_with_mask(out, alone, pa.array(read, pa.string()))
    return pc.if_else(pc.equal(tokens, ""), pa.scalar(None, pa.string()), out)


FORMAT = Format(
    name="urlenc",
    pgq_trigger="pgq.logutriga",
    ev_type=Matches("^[IUD]:"),
    full_row=True,
    op=FirstLetter(),
    truncate_type="R",
    jvm_map=UrlEncoded("&", "="),
    driver_op=driver_first_letter,
    driver_map=driver_map,
    driver_shape=driver_shape,
)
