"""The stream's offsets, and the one rule that keeps the queue in step with Spark's checkpoint.

An offset is a tick of the queue (``Offset``): a micro-batch from offset ``s`` to offset ``e``
is the queue batch ``(s, e)`` of the stream's consumer, the events of the transactions that
committed between the two ticks. The queue's incarnation rides along (``cdc.pg.source.
incarnation``), so that a checkpoint of a queue dropped and created again (whose tick ids
start again at 1) is refused instead of read as the new queue's ticks.

Spark's checkpoint is the source of truth. Whenever Spark names an offset it has committed
(the start of the next micro-batch, or ``commit(end)``), the consumer is brought there
(``settle_step``):

- already there: nothing;
- its open batch ends there (the micro-batch committed by the sink, the queue batch not yet
  finished: a crash in between, or Spark's lazy ``commit``): the batch is finished, so that
  its events are not delivered again;
- anywhere else (ahead of the checkpoint: an older checkpoint; behind with another open
  batch): the consumer is moved to the offset (``register_consumer_at``), which drops its
  open batch; the checkpoint wins.

A micro-batch that Spark planned but did not commit is read again from the same open queue
batch: ``next_batch`` returns it with the same events until it is finished.

Plain values, no PostgreSQL and no Spark: tests/unit/test_stream_offsets.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from cdc.errors import CdcError

__all__ = ["ConsumerState", "Offset", "Step", "settle_step"]


@dataclass(frozen=True, order=True)
class Offset:
    """A tick of the queue, as Spark's offset log stores it (``as_dict``)."""

    tick: int
    incarnation: int | None = None  # the queue's incarnation; None where the engine has none

    def as_dict(self) -> dict[str, int]:
        found = {"tick": self.tick}
        if self.incarnation is not None:
            found["incarnation"] = self.incarnation
        return found

    @classmethod
    def of(cls, found: Mapping[str, Any]) -> Offset:
        """The offset of a dict Spark gives back; CdcError naming what is wrong with it."""
        if not isinstance(found, Mapping):
            raise CdcError(f"a cdc stream offset is a JSON object, not {found!r}")
        unknown = sorted(set(found) - {"tick", "incarnation"})
        tick, incarnation = found.get("tick"), found.get("incarnation")
        if unknown or not _whole(tick) or not (incarnation is None or _whole(incarnation)):
            raise CdcError(
                f"not a cdc stream offset: {dict(found)!r} (expected"
                ' {"tick": <tick id>, "incarnation": <queue incarnation>}): was the checkpoint'
                " written by another source?"
            )
        return cls(tick, incarnation)

    def check_queue(self, incarnation: int | None, queue: str) -> None:
        """CdcError when the offset belongs to an earlier queue of the same name."""
        if None not in (self.incarnation, incarnation) and self.incarnation != incarnation:
            raise CdcError(
                f"queue {queue} was dropped and created again since this checkpoint was"
                f" written (incarnation {self.incarnation}, now {incarnation}): its ticks are"
                " another queue's. Start the stream with a new checkpoint location"
            )


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


@dataclass(frozen=True)
class ConsumerState:
    """Where the consumer stands: its last finished tick, and its open batch (id and end
    tick), None when it has none."""

    position: int
    batch_id: int | None = None
    batch_end: int | None = None


class Step(Enum):
    """What brings the consumer to a committed offset (``settle_step``)."""

    NOTHING = "nothing"
    FINISH = "finish"  # finish the open batch: it ends at the offset
    MOVE = "move"  # register_consumer_at the offset (dropping any open batch)


def settle_step(state: ConsumerState, tick: int) -> Step:
    """What brings the consumer to ``tick``, the end of a micro-batch Spark has committed
    (see the module docstring)."""
    if state.position == tick:
        return Step.NOTHING
    if state.position < tick and state.batch_id is not None and state.batch_end == tick:
        return Step.FINISH
    return Step.MOVE
