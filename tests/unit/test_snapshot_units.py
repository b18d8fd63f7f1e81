"""The pure parts of chunked snapshots: when a tick covers a chunk's snapshot, a chunk's key
ranges, progress rows, and which saved states resume."""

from __future__ import annotations

import datetime as dt

from cdc.config import TableMap
from cdc.pipeline.chunks import ChunkPlan
from cdc.pipeline.snapshot import new_states, resumable
from cdc.pipeline.snapshot_runner import covers
from cdc.targets import snapshots
from cdc.targets.snapshots import Progress


def test_a_later_tick_covers_the_chunk_snapshot() -> None:
    """Taken after the chunk's snapshot: every transaction it saw is visible."""
    assert covers("105:110:107", "100:105:101,103")
    assert covers("100:105:101,103", "100:105:101,103")  # the same snapshot


def test_an_earlier_tick_does_not_cover_the_chunk_snapshot() -> None:
    """A tick whose xmax is below the chunk's, or that still runs a transaction the chunk saw
    committed, was taken before it."""
    assert not covers("100:104:101", "100:105:101")
    assert not covers("100:106:102", "100:105:101")  # 102 committed for the chunk


def test_a_transaction_running_at_both_does_not_matter() -> None:
    """A transaction in progress for the chunk and still for the tick is invisible to both."""
    assert covers("101:120:101", "100:105:101")


def test_chunk_ranges_follow_the_bounds() -> None:
    """Each range runs from the previous bound (or the last key copied) to its own."""
    plan = ChunkPlan(30, (("10",), ("20",), ("30",)))
    assert plan.last_key == ("30",)
    assert plan.ranges(None) == [(None, ("10",)), (("10",), ("20",)), (("20",), ("30",))]
    assert plan.ranges(("5",))[0] == (("5",), ("10",))
    assert ChunkPlan(0, ()).last_key is None


def test_progress_rows_round_trip() -> None:
    """A saved state reads back as it was, its last key as text values."""
    at = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    state = Progress(
        "t", "public.t", snapshots.RUNNING, ("a", "1"), 10, 2, "1:2:", 2, at, 5, 7, None, at, at, 3
    )
    names = [n for n, _ in snapshots.SCHEMA]
    assert Progress.of_row(dict(zip(names, state.row(), strict=True))) == state
    assert (
        snapshots.latest([dict(zip(names, s.row(), strict=True)) for s in (state.next(), state)])[
            "t"
        ].seq
        == 4
    )


def test_only_running_states_at_one_point_resume() -> None:
    """A snapshot resumes when every target's state is running at the same chunk; a copied,
    failed or diverging one starts again, with a seq after the old one."""
    maps = [TableMap("public.t", "a"), TableMap("public.t", "b")]
    a = Progress("a", "public.t", snapshots.RUNNING, ("5",), 5, 1, seq=4)
    b = Progress("b", "public.t", snapshots.RUNNING, ("5",), 5, 1, seq=4)
    assert resumable(maps, {"a": a, "b": b}) == [a, b]
    assert resumable(maps, {"a": a}) is None
    assert resumable(maps, {"a": a, "b": b.next(chunks=2)}) is None
    assert resumable(maps, {"a": a, "b": b.next(state=snapshots.COPIED)}) is None
    fresh = new_states(maps, {"a": a}, tick_id=9)
    assert [(s.target, s.seq, s.tick_id, s.chunks) for s in fresh] == [
        ("a", 5, 9, 0),
        ("b", 0, 9, 0),
    ]
