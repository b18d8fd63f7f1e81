"""The json format (PgQ's ``jsontriga``): the whole row as a JSON object.

ev_type ``{"op":"INSERT","table":["<schema>","<table>"],"pkey":["<col>",...]}`` (op INSERT,
UPDATE, DELETE or TRUNCATE); ev_data the row (NEW, OLD for a DELETE) as a JSON object, ``{}``
for a TRUNCATE (docs/event-format.md §0, §3.6, §4). The trigger writes integers and booleans
bare, NULL as ``null``, every other value as a JSON string of its text output. Decoded inside
the JVM (``from_json`` into a string map): a string as its content, a bare value as its JSON
text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cdc.formats.spec import Format, StartsWith

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


FORMAT = Format(
    name="json",
    pgq_trigger="pgq.jsontriga",
    ev_type=StartsWith("{"),
    full_row=True,
    op=op,
    jvm_map=jvm_map,
)
