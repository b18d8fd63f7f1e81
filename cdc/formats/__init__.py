"""The capture formats (json, urlenc, sql), each a registered value: the ev_type shape its
events are recognised by, its capability flags, its decoder of ``ev_data`` into column ->
text value.

- ``spec``: what a format is (``Format``, the ev_type shapes);
- ``json``, ``urlenc``, ``sql``: one module per format, each holding its ``FORMAT``;
- ``registry``: the formats (``FORMATS``), and every classifier made from them (Arrow for a
  batch read with COPY, Spark for one read through JDBC and for decoding).

Importing this package, the names and the flags needs neither pyspark nor pyarrow.
"""

from cdc.formats.registry import (
    FORMATS,
    NAMES,
    RECREATED,
    RECREATED_OP,
    RESET_OPS,
    TRUNCATE_TYPES,
    by_name,
    format_flags,
    format_of,
    formats_of,
    full_row,
    op_of,
)
from cdc.formats.spec import Format

__all__ = [
    "FORMATS",
    "NAMES",
    "RECREATED",
    "RECREATED_OP",
    "RESET_OPS",
    "TRUNCATE_TYPES",
    "Format",
    "by_name",
    "format_flags",
    "format_of",
    "formats_of",
    "full_row",
    "op_of",
]
