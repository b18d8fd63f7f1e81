"""A batch's events held within the drain's memory budget: in Arrow while they fit, in
Parquet files past that.

A batch is one tick or more, and one transaction is never split between ticks: a single
``UPDATE big SET ...`` of millions of rows is one batch whatever ``max_events`` says. Read
with COPY (cdc.pg.batch: pieces of about ``copyreader.BLOCK`` bytes), its events are kept in
memory while their Arrow size stays within ``memory_budget / EXPANSION``: the driver's
decode, fold and delta-rs MERGE of a batch in memory peak at about ``EXPANSION`` times that
size (the Arrow events, each table's share of them, the decoded values, the folded rows and
delta-rs' own buffers). Past it, the events read so far and the rest of the COPY go to a
Parquet file in a spill folder, one piece at a time, and Spark reads the file: its
executors decode, fold and MERGE the batch, spilling to their own disks as Spark does, and
each target still gets one commit marked with the batch's tick. The driver then holds one
COPY piece at a time, whatever the batch's size.

The spill folder must be one that Spark's executors read: on a local master the
default temporary folder is; on a cluster it is ``drain.spill_dir`` (a folder every node
mounts). Without one, a cluster reads such a batch again through Spark's JDBC source
(cdc.pipeline.reader). The folder is removed once the batch is applied (``remove``).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from cdc.pg.batch import EVENT_SCHEMA

__all__ = ["EXPANSION", "Overflow", "Spool"]

log = logging.getLogger("cdc.drain")

# The driver path's peak memory over a batch's Arrow events: 7 to 9 for one transaction of
# 1 KB json events (7.1 at 1M events, 9.4 at 50,000: docs/benchmarks.md, "One huge
# transaction"), with room for the process's own resting size (about 270 MB with Spark's
# gateway) within the budget.
EXPANSION = 12
SPILL_FILE = "events.parquet"


class Overflow(Exception):
    """The batch outgrew the memory budget and there is no spill folder to put it in."""


class Spool:
    """Record batches of a batch's events, kept in memory up to ``limit`` bytes, then written
    to ``<folder>/cdc-spill-*/events.parquet`` (``folder`` None: raise ``Overflow``
    instead)."""

    def __init__(self, limit: int, folder: str | None) -> None:
        self.limit = limit
        self.folder = folder
        self.held: list[pa.RecordBatch] = []
        self.bytes = 0  # Arrow bytes of every event added
        self.path: Path | None = None  # the spill folder, once spilled
        self._writer: pq.ParquetWriter | None = None

    @property
    def spilled(self) -> bool:
        return self.path is not None

    def add(self, events: pa.RecordBatch) -> None:
        self.bytes += events.nbytes
        if self._writer is not None:
            self._writer.write_batch(events)
            return
        self.held.append(events)
        if self.bytes > self.limit:
            self._spill()

    def _spill(self) -> None:
        if self.folder is None:
            raise Overflow(f"{self.bytes:,} bytes of events, over the limit of {self.limit:,}")
        Path(self.folder).mkdir(parents=True, exist_ok=True)
        self.path = Path(tempfile.mkdtemp(prefix="cdc-spill-", dir=self.folder))
        self._writer = pq.ParquetWriter(self.path / SPILL_FILE, EVENT_SCHEMA)
        for events in self.held:
            self._writer.write_batch(events)
        self.held.clear()

    def close(self) -> None:
        """Ends the writing (a spilled batch's file is complete from then on)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def table(self) -> pa.Table:
        """The events held in memory (not spilled), as one table."""
        if self.spilled:
            raise ValueError("the batch was spilled: read its Parquet file")
        return pa.Table.from_batches(self.held, schema=EVENT_SCHEMA)

    def uri(self) -> str:
        """The spilled Parquet file, as Spark names it."""
        if self.path is None:
            raise ValueError("the batch was not spilled")
        return (self.path / SPILL_FILE).resolve().as_uri()

    def remove(self) -> None:
        """Drops what is held, and the spill folder with its file."""
        self.close()
        self.held.clear()
        if self.path is not None:
            shutil.rmtree(self.path, ignore_errors=True)
            self.path = None
