"""One queue event as a row of the stream: its table, op, key and columns as text.

The row (``SCHEMA``, in this order):

- ``table``: the table the event names (``ev_extra1``: ``schema.table``, unquoted);
- ``op``: ``I``, ``U``, ``D``; ``R`` for a TRUNCATE, ``X`` for the marker of a table created
  again under a dropped table's name (the rows before it were the dropped table's);
- ``key``: key column -> text, the key the drain folds by (the primary key, or the
  ``pkey=`` columns of the capture: ``cdc.pg.pgtypes.keyed_columns``); null for ``R`` and
  ``X``, and where the table's key cannot be read now (a table dropped since);
- ``columns``: column -> text, as the capture format carries them (a NULL value is null):
  json and urlenc carry the whole row (the old row for a DELETE); sql carries every column
  of an INSERT, the changed columns and the key of an UPDATE, the key of a DELETE; empty for
  ``R`` and ``X``;
- ``ev_id``, ``ev_txid``, ``ev_time`` (the source transaction's ``now()``: the commit time
  that the drain's soft deletes record), ``tick_id`` and ``tick_time`` (the micro-batch's
  end tick: its transactions committed before it);
- ``reason`` and ``raw``: an event that cannot be decoded keeps its raw ``ev_type`` and
  ``ev_data`` in ``raw`` and says why in ``reason``; null for every good event. Nothing is
  dropped.

Decoding uses each format's own decoders (``cdc.formats``: ``driver_op``, ``driver_map``),
the answers the drain's decoders give; the format is the first whose ev_type shape matches,
in registry order. Snapshot signals (ev_type ``cdc.snapshot``) are not data: they are left
out, as the drain leaves them out of its tables.

Plain Python, no Spark: tests/unit/test_stream_events.py.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from cdc import formats
from cdc.formats.spec import EvTypeShape, Format, Matches, OneOf, StartsWith, Undecided

__all__ = ["SCHEMA", "SIGNAL", "Decoded", "RawEvent", "decode", "format_of", "row"]

SCHEMA = (
    "`table` string, op string, key map<string,string>, columns map<string,string>,"
    " ev_id bigint, ev_txid bigint, ev_time timestamp, tick_id bigint, tick_time timestamp,"
    " reason string, raw struct<ev_type: string, ev_data: string>"
)
SIGNAL = "cdc.snapshot"  # ev_type of a snapshot signal (cdc.pipeline.snapshot): not data
RESET = {**dict.fromkeys(formats.TRUNCATE_TYPES, "R"), formats.RECREATED: formats.RECREATED_OP}


@dataclass(frozen=True, slots=True)
class RawEvent:
    """The columns of an event the stream reads (``get_batch_events``)."""

    ev_id: int
    ev_time: dt.datetime
    ev_txid: int
    ev_type: str | None
    ev_data: str | None
    ev_extra1: str | None


@dataclass(frozen=True, slots=True)
class Decoded:
    """An event's op and columns, or why it has none."""

    op: str | None
    columns: dict[str, str | None] | None
    reason: str | None = None


@cache
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _matches(shape: EvTypeShape, ev_type: str) -> bool:
    """Whether an ev_type has a format's shape (the Arrow and Spark forms' answer, in Python)."""
    if isinstance(shape, StartsWith):
        return ev_type.startswith(shape.prefix)
    if isinstance(shape, Matches):
        return _regex(shape.regex).search(ev_type) is not None
    if isinstance(shape, OneOf):
        return ev_type in shape.values
    raise TypeError(f"unknown ev_type shape {shape!r}")


def format_of(ev_type: str) -> Format | None:
    """The format of a row event: the first whose ev_type shape matches, None for none."""
    return next((f for f in formats.FORMATS if _matches(f.ev_type, ev_type)), None)


def decode(ev_type: str | None, ev_data: str | None) -> Decoded:
    """The op and column -> text of one event (see the module docstring)."""
    if ev_type is None:
        return Decoded(None, None, "event without an ev_type")
    if ev_type in RESET:
        return Decoded(RESET[ev_type], {})
    fmt = format_of(ev_type)
    if fmt is None or fmt.driver_op is None or fmt.driver_map is None:
        return Decoded(None, None, f"unknown event type {ev_type[:60]!r}")
    try:
        op = fmt.driver_op(ev_type)
    except Undecided as exc:
        return Decoded(None, None, f"undecodable {fmt.name} event type: {exc}")
    if op == "R":
        return Decoded(op, {})
    if ev_data is None:
        return Decoded(op, None, f"{fmt.name} event without ev_data")
    try:
        return Decoded(op, fmt.driver_map(op, ev_data))
    except Undecided as exc:
        return Decoded(op, None, f"undecodable {fmt.name} payload: {exc}")


KeyNames = Callable[[str], "tuple[str, ...] | None"]


def row(event: RawEvent, tick_id: int, tick_time: dt.datetime, key_names: KeyNames) -> tuple | None:
    """The stream's row of one event (``SCHEMA``'s order); None for a snapshot signal.
    key_names: a table's key columns, None when they cannot be read."""
    if event.ev_type == SIGNAL:
        return None
    table = event.ev_extra1
    found = decode(event.ev_type, event.ev_data)
    key = None
    if found.columns is not None and found.op in ("I", "U", "D") and table is not None:
        names = key_names(table)
        if names is not None:
            key = {name: found.columns.get(name) for name in names}
    raw = None if found.reason is None else (event.ev_type, event.ev_data)
    return (
        table,
        found.op,
        key,
        found.columns,
        event.ev_id,
        event.ev_txid,
        event.ev_time,
        tick_id,
        tick_time,
        found.reason,
        raw,
    )
