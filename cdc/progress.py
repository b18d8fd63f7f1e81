"""The progress of long work (a catch-up drain, a snapshot, maintenance): done / total, rate,
ETA, as a log line at most every few seconds and a summary at the end.

One reporter per piece of work::

    progress = Progress("snapshot public.orders", "rows", total=estimate)
    for chunk in chunks:
        ...
        progress.update(rows_so_far)         # or progress.add(rows_of_this_chunk)
    progress.finish()

Lines (logger ``cdc.progress``, INFO, in the one log format of cdc.logs)::

    snapshot public.orders: 600,000/2,000,000 rows (30%), 41,000 rows/s, ETA 34 s
    snapshot public.orders: done, 2,000,000 rows in 48.8 s, 41,000 rows/s

What it shows never goes back: ``done`` only grows (an update below what was shown keeps
the shown value), ``total`` is never below ``done`` (an estimate that was too low grows
with the work; one too high is replaced by ``done`` at the end). The rate counts only the
work of this run (``start``: what an earlier run had done, e.g. a resumed snapshot), the
ETA is the rest at that rate. No line is logged while done has reached the total (the
summary follows, or nothing is pending). ``clock`` is the time source (seconds, monotonic).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger("cdc.progress")

EVERY = 5.0  # seconds between two progress lines


class Progress:
    """done / total of one piece of work, its rate and ETA; log lines (see the module)."""

    def __init__(
        self,
        label: str,
        unit: str,
        total: int | None = None,
        *,
        start: int = 0,
        every: float = EVERY,
        clock: Callable[[], float] = time.monotonic,
        logger: logging.Logger = log,
    ) -> None:
        self.label, self.unit = label, unit
        self.start = self.done = max(start, 0)
        self._total = total
        self.every, self.clock, self.logger = every, clock, logger
        self.started = clock()
        self._last_line: float | None = None
        self.extra = ""  # shown after the counts: "3 batches", "table 2/5"
        self.finished = False

    # ------------------------------------------------------------------ figures

    @property
    def total(self) -> int | None:
        """The total, never below done (None: unknown)."""
        return None if self._total is None else max(self._total, self.done)

    @property
    def elapsed(self) -> float:
        return max(self.clock() - self.started, 0.0)

    @property
    def rate(self) -> float | None:
        """Units per second of this run's work (None before any time has passed)."""
        elapsed = self.elapsed
        return (self.done - self.start) / elapsed if elapsed > 0 else None

    @property
    def eta(self) -> float | None:
        """Seconds left at the current rate (None: no total, or no rate yet)."""
        total, rate = self.total, self.rate
        if total is None or not rate:
            return None
        return (total - self.done) / rate

    # ------------------------------------------------------------------ updates

    def update(self, done: int | None = None, total: int | None = None) -> None:
        """New figures: done so far (a lower value than shown keeps the shown one), the total
        (None: unchanged). Logs a line when the last is EVERY seconds old."""
        if done is not None:
            self.done = max(self.done, done)
        if total is not None:
            self._total = total
        now = self.clock()
        if self._last_line is None:
            self._last_line = self.started
        complete = self._total is not None and self.done >= self._total
        if now - self._last_line >= self.every and not complete:
            self._last_line = now  # (complete: the summary says it, or nothing is left to do)
            self.logger.info("%s", self.line())

    def add(self, amount: int, total: int | None = None) -> None:
        """amount more done (see update)."""
        self.update(self.done + max(amount, 0), total)

    def finish(self) -> str:
        """Logs the summary (once) and returns it."""
        summary = self.summary()
        if not self.finished:
            self.finished = True
            self.logger.info("%s", summary)
        return summary

    # ------------------------------------------------------------------ text

    def line(self) -> str:
        """``label: done/total unit (pct), rate unit/s, ETA n s``."""
        total = self.total
        counts = f"{self.done:,}" if total is None else f"{self.done:,}/{total:,}"
        parts = [f"{counts} {self.unit}"]
        if total:
            parts[0] += f" ({100 * self.done // total}%)"
        if self.extra:
            parts.append(self.extra)
        rate = self.rate
        if rate is not None:
            parts.append(f"{_number(rate)} {self.unit}/s")
        eta = self.eta
        if eta is not None:
            parts.append(f"ETA {_duration(eta)}")
        return f"{self.label}: " + ", ".join(parts)

    def summary(self) -> str:
        """``label: done, n unit in s, rate unit/s``."""
        this_run = self.done - self.start
        earlier = f" ({self.start:,} before)" if self.start else ""
        text = f"{self.label}: done, {this_run:,} {self.unit}{earlier}"
        if self.extra:
            text += f", {self.extra}"
        text += f" in {_duration(self.elapsed)}"
        rate = self.rate
        if rate is not None and this_run:
            text += f", {_number(rate)} {self.unit}/s"
        return text


def _number(value: float) -> str:
    """A rate: 41,000 / 12.5 / 0.25."""
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if value >= 1 else f"{value:.2f}"


def _duration(seconds: float) -> str:
    """3.2 s, 48 s, 12 min 5 s, 2 h 3 min."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"
