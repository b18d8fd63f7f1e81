"""``spark.readStream.format("cdc")``: the queue as a Spark streaming source (Spark 4's Python
data source API).

``CdcSource`` is the data source (its ``name`` is the format's, its rows cdc.stream.events'
``SCHEMA``); ``CdcStreamReader`` answers Spark's calls with the driver's ``Feed``
(cdc.stream.feed) and reads each partition (an ev_id range of the open queue batch) on an
executor (cdc.stream.reading). Spark keeps one reader on the driver for the query's life,
and sends a pickled copy to the executors: the feed's connection stays on the driver.

Micro-batch ``n`` is one queue batch of the stream's consumer: ``latestOffset`` opens it,
``partitions`` reads it, and it is finished once Spark has committed it (its next
``latestOffset`` or ``commit``): cdc.stream.offsets says how a restart from the checkpoint
settles the queue.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from cdc.stream import events
from cdc.stream.feed import Feed, Slice
from cdc.stream.offsets import Offset
from cdc.stream.options import StreamOptions, parse
from cdc.stream.reading import read_slice

__all__ = ["CdcSource", "CdcStreamReader", "EventSlice"]


class EventSlice(InputPartition):
    """A Spark partition: one ev_id range of the micro-batch's queue batch (its ``value``)."""

    def __init__(self, part: Slice) -> None:
        super().__init__(part)


class CdcSource(DataSource):
    """The queue's events as a stream (options: cdc.stream.options)."""

    base_dir: str | None = None  # the driver's folder (cdc.stream.register), for a relative config

    @classmethod
    def name(cls) -> str:
        return "cdc"

    def schema(self) -> str:
        return events.SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return CdcStreamReader(parse(self.options, self.base_dir))


class CdcStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Spark's calls, answered by the driver's feed; partitions read on the executors."""

    def __init__(self, options: StreamOptions) -> None:
        self.options = options
        self._feed: Feed | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options, "_feed": None}  # the connection stays on the driver

    @property
    def feed(self) -> Feed:
        if self._feed is None:
            self._feed = Feed(self.options)
        return self._feed

    def initialOffset(self) -> dict:
        return self.feed.start().as_dict()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        # a micro-batch is one queue batch (up to max_events): the read limit is the queue's
        return self.feed.latest(Offset.of(start)).as_dict()

    def prepareForTriggerAvailableNow(self) -> None:
        self.feed.prepare_available_now()

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        return [EventSlice(part) for part in self.feed.slices(Offset.of(start), Offset.of(end))]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        return read_slice(self.options, partition.value)

    def commit(self, end: dict) -> None:
        self.feed.settle(Offset.of(end))

    def stop(self) -> None:
        if self._feed is not None:
            self._feed.close()
