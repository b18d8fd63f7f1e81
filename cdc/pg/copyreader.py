"""COPY ... TO STDOUT in CSV form, parsed into Arrow as the bytes arrive.

Shared by the drain (a batch's events, ``cdc.pg.batch``) and the snapshot (a table's rows as
text). One pass, no Python object per value: Arrow's CSV reader reads the COPY stream
directly. The CSV conventions are PostgreSQL's: NULL is written as nothing and the empty
string as ``""``; values may hold newlines inside quotes.

Errors are not translated here: each caller says what a failed read means to it.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.csv as pacsv
from psycopg import sql

__all__ = ["CopyStream", "read_table", "record_batches"]


class CopyStream(io.RawIOBase):
    """A COPY TO STDOUT as a readable binary stream, for Arrow's CSV reader."""

    def __init__(self, copy: psycopg.Copy) -> None:
        self._copy = copy
        self._pending = memoryview(b"")
        self._done = False

    def readable(self) -> bool:
        return True

    def peek(self) -> bool:
        """Whether any byte comes (reads the first chunk, which read() then returns)."""
        if not self._pending and not self._done:
            chunk = self._copy.read()
            if chunk:
                self._pending = memoryview(bytes(chunk))
            else:
                self._done = True
        return bool(self._pending)

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        filled = 0
        while filled < len(view):
            if not self._pending:
                if self._done:
                    break
                chunk = self._copy.read()
                if not chunk:
                    self._done = True
                    break
                self._pending = memoryview(bytes(chunk))
            n = min(len(view) - filled, len(self._pending))
            view[filled : filled + n] = self._pending[:n]
            self._pending = self._pending[n:]
            filled += n
        return filled


def _options(
    schema: pa.Schema, block: int | None
) -> tuple[pacsv.ReadOptions, pacsv.ParseOptions, pacsv.ConvertOptions]:
    read = pacsv.ReadOptions(column_names=schema.names)
    if block is not None:
        read.block_size = block
    return (
        read,
        # values may hold newlines (inside quotes)
        pacsv.ParseOptions(newlines_in_values=True),
        pacsv.ConvertOptions(
            column_types=schema,
            null_values=[""],  # COPY writes NULL as nothing, and "" as ""
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,
        ),
    )


def record_batches(
    conn: psycopg.Connection, query: sql.Composable, schema: pa.Schema, block: int
) -> Iterator[pa.RecordBatch]:
    """The non-empty record batches of a COPY query (``copy (...) to stdout with (format
    csv)``), its columns typed by ``schema``, parsed in blocks of ``block`` bytes: memory
    stays bounded by the block. A row larger than the block raises ``pa.ArrowInvalid``
    ("straddling"). Nothing for an empty result."""
    with conn.cursor() as cur, cur.copy(query) as copy:
        stream = CopyStream(copy)
        if not stream.peek():
            return  # an empty result: Arrow's reader refuses an empty file
        read, parse, convert = _options(schema, block)
        reader = pacsv.open_csv(
            stream, read_options=read, parse_options=parse, convert_options=convert
        )
        for record_batch in reader:
            if record_batch.num_rows:
                yield record_batch


def read_table(
    conn: psycopg.Connection, query: sql.Composable, schema: pa.Schema
) -> pa.Table | None:
    """The whole result of a COPY query as one Arrow table, its columns typed by ``schema``;
    None for an empty result."""
    with conn.cursor() as cur, cur.copy(query) as copy:
        stream = CopyStream(copy)
        if not stream.peek():
            return None
        read, parse, convert = _options(schema, None)
        return pacsv.read_csv(
            stream, read_options=read, parse_options=parse, convert_options=convert
        )
