"""The registered capture formats, and the classifiers made from them.

Classification is written once, here: which format an event is in comes from the formats'
``ev_type`` shapes, in registry order (the first that matches), and every classifier is
generated from that:

- ``formats_of``: Arrow, the formats of the row events in a batch read with COPY;
- ``format_flags``: Spark aggregates, the same for a batch read through JDBC;
- ``format_of`` and ``op_of``: Spark, each event's format and op, for decoding.

A TRUNCATE written as a bare ev_type that several formats share (``R``: urlenc and sql) gets
op ``R`` and no format; it counts for no format in ``formats_of`` / ``format_flags``, whose
purpose is to say which decoders a batch needs (a TRUNCATE needs none). So does the marker a
table gets when it takes the name of a dropped table (ev_type ``RECREATED``, written by
cdc._cap_succeed in any format's queue): op ``X``, which empties a mirror target as a
TRUNCATE does (``RESET_OPS``): the events before it belong to the dropped table.

Adding a format: one module holding its ``FORMAT`` (see cdc.formats.spec), one entry in
``FORMATS``.
"""

from __future__ import annotations

from functools import reduce
from typing import TYPE_CHECKING

from cdc.formats import json, sql, urlenc
from cdc.formats.spec import Format

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column

FORMATS: tuple[Format, ...] = (json.FORMAT, urlenc.FORMAT, sql.FORMAT)
NAMES: tuple[str, ...] = tuple(f.name for f in FORMATS)
# the ev_types that are a TRUNCATE whatever the format (formats' own truncate_type)
TRUNCATE_TYPES: tuple[str, ...] = tuple(
    sorted({f.truncate_type for f in FORMATS if f.truncate_type is not None})
)
RECREATED = "cdc.recreated"  # ev_type of the marker of a table re-created under its name
RECREATED_OP = "X"  # its op
RESET_OPS: tuple[str, ...] = ("R", RECREATED_OP)  # the ops that empty a mirror target


def by_name(name: str) -> Format:
    """The registered format called ``name``."""
    for f in FORMATS:
        if f.name == name:
            return f
    raise KeyError(f"no capture format {name!r}: one of {', '.join(NAMES)}")


def formats_of(ev_type: pa.Array | pa.ChunkedArray) -> set[str]:
    """The formats among these ev_types (Arrow strings), a shared TRUNCATE counting for none:
    the decoders a batch needs."""
    import pyarrow.compute as pc

    return {f.name for f in FORMATS if pc.any(f.ev_type.arrow(ev_type)).as_py()}


def format_flags(ev_type: Column | None = None) -> list[Column]:
    """Per format, whether a group of raw events holds an event of it: boolean aggregates
    named after the formats, the Spark counterpart of formats_of."""
    from pyspark.sql import functions as F

    col = F.col("ev_type") if ev_type is None else ev_type
    return [F.max(f.ev_type.spark(col)).alias(f.name) for f in FORMATS]


def format_of(ev_type: Column) -> Column:
    """The format name of each event's ev_type; null for a shared TRUNCATE and for an
    ev_type that no format writes."""
    from pyspark.sql import functions as F

    first, *rest = FORMATS
    case = F.when(first.ev_type.spark(ev_type), F.lit(first.name))
    return reduce(lambda c, f: c.when(f.ev_type.spark(ev_type), F.lit(f.name)), rest, case)


def op_of(ev_type: Column, fmt: Column) -> Column:
    """I, U, D, R or X of each event, given its format (``format_of``); null when unknown."""
    from pyspark.sql import functions as F

    case = F.when(ev_type.isin(*TRUNCATE_TYPES), F.lit("R")).when(
        ev_type == RECREATED, F.lit(RECREATED_OP)
    )
    return reduce(lambda c, f: c.when(fmt == f.name, f.op(ev_type)), FORMATS, case)


def full_row(fmt: Column) -> Column:
    """Whether each event of this format carries every column (an UPDATE included)."""
    return fmt.isin(*[f.name for f in FORMATS if f.full_row])
