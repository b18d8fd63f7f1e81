"""The registered capture formats, and the classifiers made from them.

Classification is written once, here: which format an event is in comes from the formats'
``ev_type`` shapes, in registry order (the first that matches), and every classifier is
generated from that:

- ``formats_of``: Arrow, the formats of the row events in a batch read with COPY;
- their Spark counterparts, rendered in cdc.engines.spark.formats: ``format_flags`` (Spark
  aggregates, the same for a batch read through JDBC), ``format_of`` and ``op_of`` (each
  event's format and op, for decoding).

A TRUNCATE written as a bare ev_type that several formats share (``R``: urlenc and sql) gets
op ``R`` and no format; it counts for no format in ``formats_of`` / ``format_flags``, whose
purpose is to say which decoders a batch needs (a TRUNCATE needs none). So does the marker a
table gets when it takes the name of a dropped table (ev_type ``RECREATED``, written by
cdc._cap_succeed in any format's queue): op ``X``, which empties a mirror target as a
TRUNCATE does (``RESET_OPS``): the events before it belong to the dropped table.

Adding a format: one module holding its ``FORMAT`` (see cdc.formats.spec), one entry in
``FORMATS``; a new kind of op rule or JVM decoder also its case in cdc.engines.spark.formats.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cdc.formats import json, sql, urlenc
from cdc.formats.spec import Format

if TYPE_CHECKING:
    import pyarrow as pa

FORMATS: tuple[Format, ...] = (json.FORMAT, urlenc.FORMAT, sql.FORMAT)
NAMES: tuple[str, ...] = tuple(f.name for f in FORMATS)
# the ev_types that are a TRUNCATE whatever the format (formats' own truncate_type)
TRUNCATE_TYPES: tuple[str, ...] = tuple(
    sorted({f.truncate_type for f in FORMATS if f.truncate_type is not None})
)
RECREATED = "cdc.recreated"  # ev_type of the marker of a table re-created under its name
RECREATED_OP = "X"  # its op
RESET_OPS: tuple[str, ...] = ("R", RECREATED_OP)  # the ops that empty a mirror target
FULL_ROW: tuple[str, ...] = tuple(f.name for f in FORMATS if f.full_row)


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


def full_row(fmt: Any) -> Any:
    """Whether each event of this format carries every column (an UPDATE included):
    ``fmt.isin`` of the FULL_ROW names, for a column of format names (a Spark Column: only
    its method is called, nothing of Spark imported)."""
    return fmt.isin(*FULL_ROW)
