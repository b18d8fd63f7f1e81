"""The stream's offsets (ticks) and the rule that settles the queue where Spark's checkpoint
stands (cdc.stream.offsets), without a server."""

from __future__ import annotations

import json

import pytest

from cdc.errors import CdcError
from cdc.stream.offsets import ConsumerState, Offset, Step, settle_step


def test_an_offset_goes_through_json_and_back():
    """What Spark's offset log stores reads back as the same offset, with or without an
    incarnation."""
    for offset in (Offset(7, 16384), Offset(0)):
        assert Offset.of(json.loads(json.dumps(offset.as_dict()))) == offset
    assert Offset(7).as_dict() == {"tick": 7}


@pytest.mark.parametrize(
    "found",
    [{}, {"tick": "7"}, {"tick": -1}, {"tick": True}, {"tick": 7, "partition": 1}, [7]],
)
def test_a_foreign_offset_is_refused(found):
    """An offset of another source (another checkpoint) is refused with what it should be."""
    with pytest.raises(CdcError, match=r"not a cdc stream offset|JSON object"):
        Offset.of(found)


def test_a_checkpoint_of_an_earlier_queue_is_refused():
    """A queue dropped and created again has a new incarnation: its tick ids are new ones."""
    Offset(5, 1).check_queue(1, "q")
    Offset(5).check_queue(2, "q")  # written where the engine tells no incarnation
    Offset(5, 1).check_queue(None, "q")
    with pytest.raises(CdcError, match="dropped and created again"):
        Offset(5, 1).check_queue(2, "q")


def test_a_consumer_at_the_offset_stays():
    """Already where the checkpoint stands, open batch or not: nothing to do."""
    assert settle_step(ConsumerState(5), 5) is Step.NOTHING
    assert settle_step(ConsumerState(5, 11, 9), 5) is Step.NOTHING


def test_the_committed_batch_is_finished():
    """Spark committed the micro-batch (5, 9] but the queue batch is still open (a crash
    between the two, or Spark's lazy commit): it is finished, never delivered again."""
    assert settle_step(ConsumerState(5, 11, 9), 9) is Step.FINISH


@pytest.mark.parametrize(
    "state",
    [
        ConsumerState(5),  # behind, no batch open
        ConsumerState(5, 11, 7),  # behind, a batch ending elsewhere
        ConsumerState(12),  # ahead of the checkpoint (an older checkpoint)
        ConsumerState(12, 13, 14),
    ],
)
def test_anywhere_else_the_checkpoint_wins(state):
    """The consumer is moved to the checkpoint's tick."""
    assert settle_step(state, 9) is Step.MOVE
