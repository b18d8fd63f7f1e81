"""COPY ... TO STDOUT in CSV form, parsed into Arrow.

Shared by the drain (a batch's events, ``cdc.pg.batch``) and the snapshot (a table's rows as
text). No Python object per value: the rows' bytes are gathered into pieces of about a block
and each piece is parsed by Arrow's CSV reader (in its threads). PostgreSQL sends a COPY's
rows one message each, so a piece always ends at a row's end and a row larger than the block
is a piece of its own: memory stays bounded by the block and the largest row. The CSV
conventions are PostgreSQL's: NULL is written as nothing and the empty string as ``""``;
values may hold newlines inside quotes.

Errors are not translated here: each caller says what a failed read means to it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import psycopg
import pyarrow as pa
import pyarrow.csv as pacsv
from psycopg import sql

__all__ = ["BLOCK", "read_table", "record_batches"]

BLOCK = 16 << 20  # bytes of CSV gathered and parsed at a time
PARSE_BLOCK = 1 << 20  # Arrow's block within a piece: the unit of its parallel parse
MAX_PARSE_BLOCK = (1 << 31) - 1  # Arrow's largest block: holds a 1 GB value, quoted


def _pieces(rows: Iterable[memoryview], block: int) -> Iterator[tuple[bytes, int]]:
    """The COPY's rows joined into pieces of about block bytes, each with its largest
    row's size."""
    gathered: list[bytes] = []
    append = gathered.append
    size = 0
    for row in rows:
        # a copy: holding psycopg's own buffers until the join costs three times as much
        data = bytes(row)
        append(data)
        size += len(data)
        if size >= block:
            yield b"".join(gathered), max(map(len, gathered))
            gathered.clear()
            size = 0
    if gathered:
        yield b"".join(gathered), max(map(len, gathered))


def _parse(piece: bytes, largest: int, schema: pa.Schema) -> pa.Table:
    """One piece of whole rows as an Arrow table typed by schema."""
    read = pacsv.ReadOptions(column_names=schema.names)
    # a row must fit in one of Arrow's blocks
    read.block_size = min(max(PARSE_BLOCK, 2 * largest + 1024), MAX_PARSE_BLOCK)
    return pacsv.read_csv(
        pa.py_buffer(piece),
        read_options=read,
        # values may hold newlines (inside quotes)
        parse_options=pacsv.ParseOptions(newlines_in_values=True),
        convert_options=pacsv.ConvertOptions(
            column_types=schema,
            null_values=[""],  # COPY writes NULL as nothing, and "" as ""
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,
        ),
    )


def record_batches(
    conn: psycopg.Connection, query: sql.Composable, schema: pa.Schema, block: int = BLOCK
) -> Iterator[pa.RecordBatch]:
    """The non-empty record batches of a COPY query (``copy (...) to stdout with (format
    csv)``), its columns typed by ``schema``, parsed in pieces of about ``block`` bytes.
    Nothing for an empty result."""
    with conn.cursor() as cur, cur.copy(query) as copy:
        for piece, largest in _pieces(copy, block):
            for record_batch in _parse(piece, largest, schema).to_batches():
                if record_batch.num_rows:
                    yield record_batch


def read_table(
    conn: psycopg.Connection, query: sql.Composable, schema: pa.Schema
) -> pa.Table | None:
    """The whole result of a COPY query as one Arrow table, its columns typed by ``schema``;
    None for an empty result."""
    with conn.cursor() as cur, cur.copy(query) as copy:
        tables = [_parse(piece, largest, schema) for piece, largest in _pieces(copy, BLOCK)]
    if not tables:
        return None
    return tables[0] if len(tables) == 1 else pa.concat_tables(tables)
