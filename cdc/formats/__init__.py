"""The capture formats (json, urlenc, sql), each a registered value: the ev_type shape its
events are recognised by, its capability flags, its decoder of ``ev_data`` into column ->
text value.

- ``spec``: what a format is (``Format``, the ev_type shapes, op rules and JVM decoders);
- ``json``, ``urlenc``, ``sql``: one module per format, each holding its ``FORMAT``;
- ``registry``: the formats (``FORMATS``), and the Arrow classifier made from them (for a
  batch read with COPY).

Formats are data and plain Python, never Spark (the layers' contract): their Spark rendering
lives in cdc.engines.spark.formats (each ev_type shape as a predicate, each op rule and JVM
decoder as an expression, and the Spark classifiers, for a batch read through JDBC and for
decoding). A new capture format is a module here and its line in ``registry.FORMATS``; a new
kind of op rule or JVM decoder (spec.py) also needs its case in cdc.engines.spark.formats.
Arrow is used here, inside the functions that need it (the driver's decoders).

Importing this package, the names and the flags needs neither Spark nor pyarrow.
"""

from cdc.formats.registry import (
    FORMATS,
    FULL_ROW,
    NAMES,
    RECREATED,
    RECREATED_OP,
    RESET_OPS,
    TRUNCATE_TYPES,
    by_name,
    formats_of,
    full_row,
)
from cdc.formats.spec import Format

__all__ = [
    "FORMATS",
    "FULL_ROW",
    "NAMES",
    "RECREATED",
    "RECREATED_OP",
    "RESET_OPS",
    "TRUNCATE_TYPES",
    "Format",
    "by_name",
    "formats_of",
    "full_row",
]
