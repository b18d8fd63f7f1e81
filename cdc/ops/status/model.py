"""What ``cdc status`` reports, as plain values, and the health judged from them.

**Health.** The pipeline is *unhealthy* when its consumer has pending events older than the
threshold (``--max-pending-age``, 900 s by default) and no drain is at work on them, when a
table is failing, when a snapshot failed, or when the configuration refuses a table a rule
matches (cdc.pipeline.tables: its target would be another source's table). Idle time is not a
symptom: no tick for an hour with nothing pending is healthy (between scheduled drains, after a
snapshot).

- A *pending* event is committed, visible to the consumer, and not yet in a batch it finished
  (``cdc.get_consumer_status``): a rolled-back transaction's events never count.
- Its age runs from the later of its time (its transaction's start) and the consumer's last
  finished tick: it cannot have been waiting, committed, for longer.
- *Draining*: a session holds the consumer's drain lock (a drain applying a batch, a snapshot
  copying a chunk): old pending events are being worked on, which is healthy.
- With a real PgQ (no ``get_consumer_status``) pending events are PgQ's count by sequence
  values (rolled-back events included) and their age the consumer's lag.

Other consumers of the queue with pending events older than the threshold are *orphans*: they
hold back the rotation of the queue's event tables (the oldest table is emptied only once every
consumer is past it). They are listed, and do not change the pipeline's health.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from cdc.targets import snapshots

MAX_PENDING_AGE = 900.0  # seconds: the default threshold of "unhealthy"

OK, DRAINING, UNHEALTHY = "ok", "draining", "unhealthy"


@dataclass
class QueueState:
    queue: str
    last_tick_id: int | None
    ticker_lag_s: float | None  # age of the last tick: idle time, not a symptom
    events_per_s: float | None
    ticker_paused: bool
    external_ticker: bool


@dataclass
class ConsumerState:
    consumer: str
    registered: bool
    lag_s: float | None = None  # age of the last finished tick
    last_seen_s: float | None = None
    last_tick: int | None = None
    current_batch: int | None = None
    pending_events: int | None = None  # committed, not yet in a finished batch
    pending_age_s: float | None = None  # how long the oldest has waited; None: none pending
    pending_exact: bool = True  # False: PgQ's count by sequence values
    dead_letters: int | None = None  # None: not known (PgQ)
    dead_by_table: dict[str, int] = field(default_factory=dict)  # ev_extra1 -> count
    draining: bool = False  # a session holds its drain lock


@dataclass
class TableState:
    source: str
    target: str
    mode: str
    location: str
    exists: bool
    delta_version: int | None = None
    last_tick: int | None = None  # the drain's idempotent-write version in the Delta log
    rows: int | None = None  # live rows: deleted rows (deletion vectors) are not counted
    quarantined: int = 0
    dead_letters: int | None = None
    failing: bool = False  # its events go to the quarantine until `cdc resync`
    failing_reason: str | None = None
    failing_since_tick: int | None = None
    snapshot: str | None = None  # running, copied, done or failed (cdc.targets.snapshots)
    snapshot_rows: int | None = None  # rows copied so far
    snapshot_reason: str | None = None  # why it failed
    column_mapping: bool = False  # its column names are mapped (cdc.targets.readers)
    mapping_unneeded: bool = False  # mapped, though none of its column names needs it
    # a column was widened with Delta's typeWidening feature (cdc.targets.schema_changes)
    type_widening: bool = False
    readers: dict[str, str] = field(default_factory=dict)  # reader -> safe, refuses, wrong


@dataclass
class Health:
    state: str  # ok, draining or unhealthy
    reasons: list[str]  # why unhealthy, one line each
    max_pending_age_s: float


@dataclass
class RefusedTable:
    """A table a rule matches that the configuration does not replicate (its target would be
    another source's table: cdc.pipeline.tables); its events go to the quarantine."""

    source: str
    target: str
    reason: str
    quarantined: int = 0


@dataclass
class Status:
    queue: QueueState
    consumer: ConsumerState
    tables: list[TableState] = field(default_factory=list)
    refused: list[RefusedTable] = field(default_factory=list)
    quarantined_other: int = 0  # quarantined events of tables not in the configuration
    orphans: list[ConsumerState] = field(default_factory=list)  # other consumers, stuck
    # the last consistent tick: the consumer's last finished tick, as of which every table can
    # be read (cdc.ops.at_tick), and the time of that tick (ISO 8601, UTC); None before any
    consistent_tick: int | None = None
    consistent_tick_time: str | None = None
    health: Health = field(default_factory=lambda: Health(OK, [], MAX_PENDING_AGE))

    @property
    def failing(self) -> list[TableState]:
        return [t for t in self.tables if t.failing]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def health(status: Status, max_pending_age: float) -> Health:
    """The pipeline's health from its status (see the module's docstring)."""
    c = status.consumer
    reasons: list[str] = []
    old = c.pending_age_s is not None and c.pending_age_s > max_pending_age
    if old and not c.draining:
        reasons.append(
            f"{c.pending_events:,} pending event(s), the oldest waiting {c.pending_age_s:,.0f} s"
            f" (over {max_pending_age:,.0f} s) and no drain at work: run `cdc drain`, or check"
            " that its schedule runs"
        )
    for t in status.failing:
        reasons.append(f"table {t.target} is failing")
    for r in status.refused:
        reasons.append(f"table {r.source} is not replicated: the configuration refuses it")
    for t in status.tables:
        if t.snapshot == snapshots.FAILED:
            reasons.append(f"the snapshot of {t.target} failed")
    state = UNHEALTHY if reasons else DRAINING if c.draining else OK
    return Health(state, reasons, max_pending_age)
