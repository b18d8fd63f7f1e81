"""cdc.progress: done / total, rate and ETA that never go back, lines at most every few
seconds, one summary (a clock passed in stands for the time)."""

from __future__ import annotations

import logging

import pytest

from cdc.progress import Progress


class Clock:
    """Seconds that the test moves on."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "cdc.progress"]


def test_done_never_goes_back(clock: Clock) -> None:
    """An update below what was shown keeps the shown value; add only adds."""
    p = Progress("snapshot of s.t", "rows", 3_000, clock=clock)
    p.update(1_875)
    p.update(0)
    assert p.done == 1_875
    p.add(-5)
    assert p.done == 1_875
    p.add(125)
    assert p.done == 2_000


def test_total_never_below_done(clock: Clock) -> None:
    """An estimate that was too low grows with the work; the line never shows done > total."""
    p = Progress("snapshot of s.t", "rows", 1_000, clock=clock)
    p.update(1_500)
    assert p.total == 1_500
    assert "1,500/1,500 rows (100%)" in p.line()


def test_rate_and_eta(clock: Clock) -> None:
    """The rate is this run's work over its time; the ETA is the rest at that rate."""
    p = Progress("drain", "events", 10_000, clock=clock)
    clock.now += 4
    p.update(2_000)
    assert p.rate == 500
    assert p.eta == 16
    assert p.line() == "drain: 2,000/10,000 events (20%), 500 events/s, ETA 16 s"


def test_resumed_work_counts_apart_from_the_rate(clock: Clock) -> None:
    """start (what an earlier run did) is shown in the counts, not in the rate."""
    p = Progress("snapshot of s.t", "rows", 3_000, start=1_000, clock=clock)
    clock.now += 10
    p.update(2_000)
    assert p.rate == 100
    assert p.eta == 10
    assert p.summary() == "snapshot of s.t: done, 1,000 rows (1,000 before) in 10 s, 100 rows/s"


def test_no_total_no_eta(clock: Clock) -> None:
    """Without a total the line shows the count and the rate only."""
    p = Progress("drain", "events", clock=clock)
    clock.now += 2
    p.add(300)
    assert p.eta is None
    assert p.line() == "drain: 300 events, 150 events/s"


def test_no_time_no_rate(clock: Clock) -> None:
    """At the start (no time passed) there is no rate and no ETA, not a division by zero."""
    p = Progress("maintain", "tables", 4, clock=clock)
    p.add(1)
    assert p.rate is None and p.eta is None
    assert p.line() == "maintain: 1/4 tables (25%)"


def test_a_line_at_most_every_few_seconds(clock: Clock, caplog: pytest.LogCaptureFixture) -> None:
    """Updates within `every` seconds of the last line log nothing; the next one after does."""
    caplog.set_level(logging.INFO, logger="cdc.progress")
    p = Progress("drain", "events", 1_000, every=5, clock=clock)
    for _ in range(4):
        clock.now += 1
        p.add(10)
    assert lines(caplog) == []
    clock.now += 1
    p.add(10)
    assert lines(caplog) == ["drain: 50/1,000 events (5%), 10.0 events/s, ETA 1 min 35 s"]
    clock.now += 1
    p.add(10)
    assert len(lines(caplog)) == 1


def test_summary_once(clock: Clock, caplog: pytest.LogCaptureFixture) -> None:
    """finish logs the summary once, with the extra text, however often it is called."""
    caplog.set_level(logging.INFO, logger="cdc.progress")
    p = Progress("drain", "events", 50, clock=clock)
    clock.now += 2.5
    p.add(50)
    p.extra = "2 batch(es)"
    p.finish()
    p.finish()
    assert lines(caplog) == ["drain: done, 50 events, 2 batch(es) in 2.5 s, 20.0 events/s"]


def test_summary_of_nothing(clock: Clock) -> None:
    """Nothing done: the summary says so without a rate."""
    p = Progress("drain", "events", 0, clock=clock)
    clock.now += 0.3
    assert p.finish() == "drain: done, 0 events in 0.3 s"


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(3.24, "3.2 s"), (48.4, "48 s"), (725, "12 min 5 s"), (7_385, "2 h 3 min")],
)
def test_eta_durations(clock: Clock, seconds: float, shown: str) -> None:
    """ETAs read as seconds, minutes or hours."""
    p = Progress("x", "rows", 1, clock=clock)
    clock.now += seconds
    assert p.summary() == f"x: done, 0 rows in {shown}"


def test_no_line_at_the_total(clock: Clock, caplog: pytest.LogCaptureFixture) -> None:
    """Done reaching the total logs no progress line (the summary says it), and the line
    comes back when the total grows (new events pending)."""
    caplog.set_level(logging.INFO, logger="cdc.progress")
    p = Progress("drain", "events", 100, every=5, clock=clock)
    clock.now += 6
    p.update(100)
    assert lines(caplog) == []
    clock.now += 6
    p.update(100, total=300)
    assert lines(caplog) == ["drain: 100/300 events (33%), 8.3 events/s, ETA 24 s"]
