"""The status for a terminal (a table, its health first) and for scripts (JSON); and the
consumers' table of ``cdc consumer list``."""

from __future__ import annotations

import json

from cdc.ops.status.model import UNHEALTHY, ConsumerState, Status, TableState
from cdc.targets import readers, snapshots


def _fmt(value: float | int | None, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.1f}{unit}"
    return f"{value:,}{unit}"


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join(
        "  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip()
        for r in [header, *rows]
    )


def render_consumers(found: list[ConsumerState]) -> str:
    """Consumers as a table with a header (``cdc consumer list``); empty without any."""
    if not found:
        return ""
    header = ("consumer", "pending", "oldest waiting", "lag", "last tick", "batch", "seen", "dead")
    rows = [
        (
            c.consumer,
            _fmt(c.pending_events),
            _fmt(c.pending_age_s, " s"),
            _fmt(c.lag_s, " s"),
            _fmt(c.last_tick),
            _fmt(c.current_batch),
            _fmt(c.last_seen_s, " s") + " ago",
            _fmt(c.dead_letters),
        )
        for c in found
    ]
    return _table(header, rows)


def render(status: Status) -> str:
    """The status as a readable table, its health first."""
    q, c, h = status.queue, status.consumer, status.health
    lines = [f"health: {h.state.upper() if h.state == UNHEALTHY else h.state}"]
    lines += [f"  {reason}" for reason in h.reasons]
    rate = "" if q.events_per_s is None else f", {_fmt(q.events_per_s, ' events/s')}"
    ticker = ", ticker paused" if q.ticker_paused else ""
    lines.append(
        f"queue {q.queue}: last tick {_fmt(q.last_tick_id)}, {_fmt(q.ticker_lag_s, ' s')} ago"
        f"{rate}{ticker}"
    )
    if not c.registered:
        lines.append(f"consumer {c.consumer}: not registered (the first drain registers it)")
    else:
        lines.append(
            f"consumer {c.consumer}: {_pending(c)}, lag {_fmt(c.lag_s, ' s')},"
            f" last tick {_fmt(c.last_tick)}, batch {_fmt(c.current_batch)},"
            f" seen {_fmt(c.last_seen_s, ' s')} ago, dead letters {_fmt(c.dead_letters)}"
            + (", draining (a drain or snapshot holds its lock)" if c.draining else "")
        )
    if status.consistent_tick is not None:
        lines.append(_consistent(status))
    for o in status.orphans:
        lines.append(
            f"orphan consumer {o.consumer}: {_pending(o)}, last batch {_fmt(o.last_seen_s, ' s')}"
            " ago; it holds back the rotation of the queue's event tables: `cdc consumer"
            f" unregister {q.queue} {o.consumer}` if nothing uses it"
        )
    header = (
        "source", "target", "mode", "state", "snapshot", "last tick", "version", "rows",
        "quarantined", "dead",
    )  # fmt: skip
    rows = [
        (
            t.source,
            t.target,
            t.mode,
            "FAILING" if t.failing else "ok",
            _snapshot(t),
            _fmt(t.last_tick),
            _fmt(t.delta_version),
            _fmt(t.rows) if t.exists else "(no table yet)",
            _fmt(t.quarantined),
            _fmt(t.dead_letters),
        )
        for t in status.tables
    ]
    lines.append(_table(header, rows))
    if status.quarantined_other:
        lines.append(f"quarantined events of tables not configured: {status.quarantined_other:,}")
    for r in status.refused:
        lines.append(
            f"REFUSED {r.source} (its events go to the quarantine: {r.quarantined:,} so far):"
            f" {r.reason}"
        )
    for t in status.failing:
        lines.append(
            f"FAILING {t.target} since tick {_fmt(t.failing_since_tick)}: {t.failing_reason}"
            f" (its events go to the quarantine; fix the cause, then `cdc resync {t.source}`)"
        )
    lines += [_mapping(t) for t in status.tables if t.column_mapping]
    lines += [_widened(t) for t in status.tables if t.type_widening]
    for t in status.tables:
        if t.snapshot == snapshots.FAILED:
            lines.append(
                f"SNAPSHOT FAILED {t.target} after {_fmt(t.snapshot_rows)} row(s):"
                f" {t.snapshot_reason} (fix the cause, then `cdc snapshot {t.source} --restart`)"
            )
    return "\n".join(lines)


def _consistent(status: Status) -> str:
    """The last consistent tick: every table can be read as of it (cdc sql --consistent),
    but those failing or being copied by a snapshot."""
    text = (
        f"consistent reads: tick {status.consistent_tick:,} of {status.consistent_tick_time}"
        " (cdc sql --consistent)"
    )
    apart = [t.target for t in status.tables if t.failing or t.snapshot in _COPYING]
    if apart:
        text += f"; not consistent with the others: {', '.join(apart)} (failing, or a snapshot)"
    return text


_COPYING = (snapshots.RUNNING, snapshots.COPIED)


def _mapping(t: TableState) -> str:
    """What a table with column mapping means for its readers."""
    by = {v: ", ".join(r for r, found in t.readers.items() if found == v) for v in readers.VERDICTS}
    text = f"COLUMN MAPPING {t.target}: read it with {by[readers.SAFE]}"
    if by[readers.WRONG]:
        text += f"; NULL in place of its mapped columns' values with {by[readers.WRONG]}"
    if by[readers.REFUSES]:
        text += f"; refused by {by[readers.REFUSES]}"
    if t.mapping_unneeded:
        text += (
            "; none of its column names needs mapping (a target made by an earlier version,"
            " or one with a renamed column):"
            " setting its delta.columnMapping.mode to 'none' lets every reader read it"
            " (docs/operations.md, which readers read which tables)"
        )
    return text


def _widened(t: TableState) -> str:
    """What a table a column was widened in with Delta's typeWidening feature means."""
    by = {v: ", ".join(r for r, found in t.readers.items() if found == v) for v in readers.VERDICTS}
    return (
        f"TYPE WIDENING {t.target}: a column was widened with Delta's typeWidening feature"
        f' (type_changes = "widen", or the default for a table past its size): read it with'
        f" {by[readers.SAFE]}; refused by {by[readers.REFUSES]}; Spark writes it"
        " (docs/drain.md, Type changes)"
    )


def _pending(c: ConsumerState) -> str:
    """Its pending events and how long the oldest has waited."""
    text = f"{_fmt(c.pending_events)} pending event(s)"
    if not c.pending_exact:
        text += " (by sequence: rolled-back ones too)"
    if c.pending_age_s is not None:
        text += f", the oldest waiting {c.pending_age_s:,.1f} s"
    return text


def _snapshot(t: TableState) -> str:
    """The snapshot column: none, or its state with the rows copied while it runs."""
    if t.snapshot is None:
        return "-"
    if t.snapshot in (snapshots.RUNNING, snapshots.COPIED):
        return f"{t.snapshot} ({_fmt(t.snapshot_rows)} rows)"
    return t.snapshot.upper() if t.snapshot == snapshots.FAILED else t.snapshot


def to_json(status: Status) -> str:
    return json.dumps(status.as_dict(), indent=2)
