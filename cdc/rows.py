"""The row contract: what a table's part of a batch is at each step, whichever engine runs
it (cdc.engines: Arrow on the driver, Spark on the executors). Plain names and values,
importable without Spark or Arrow.

A table's part of a batch goes through three forms, with the same column names on both
engines (a Spark DataFrame or an Arrow table):

1. **decoded** (one row per event): ``meta(n)`` per META name, ``value(i)`` (the typed value
   of the table's i-th column) and ``present(i)`` (whether the event carries it) per column;
   on the Spark engine also ``REASON`` (why an event is bad, null for a good one) and ``RAW``
   (the raw event, RAW_EVENT's fields, for the quarantine). Internal names, so that a source
   column may be called op, ev_id or reason;
2. **folded** (one row per key, cdc.engines.*.fold): ``value(i)`` per column, ``has(i)`` per
   non-key column (the batch sets it), ``ACTION`` (UPSERT, DELETE or UPDATE_IF_PRESENT),
   ``RESET`` (the key has an INSERT: its columns start from it), and ``match_key(i)`` for a
   restated key (``restates_key``: matched in a normalised form); for a target that keeps
   deleted rows also GONE, GONE_AT and KEEPS;
3. **written** by the target's kind (cdc.targets.kind) through a MERGE plan
   (cdc.targets.merge_plan), an append or an overwrite.

A kind that keeps versions (SCD type 2, cdc.targets.scd2) does not fold: its decoded rows
become **versioned** rows (cdc.engines.*.versions, under ``Versioning``): one row per version
a batch opens or changes, with ``value(i)`` per column, START, END, CURRENT and DELETED, and
``merge_key(i)`` per key column holding the target's stored key on the row that updates the
target's current version (null on a new version, which the MERGE inserts).

``TableBatch`` carries the decoded rows with what the decode learnt of them (``Facts``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cdc.pg.pgtypes import Column

__all__ = [
    "ACTION",
    "CURRENT",
    "DELETE",
    "DELETED",
    "END",
    "FLOATS",
    "GONE",
    "GONE_AT",
    "KEEPS",
    "META",
    "RAW",
    "RAW_EVENT",
    "REASON",
    "RESET",
    "START",
    "UPDATE_IF_PRESENT",
    "UPSERT",
    "Facts",
    "TableBatch",
    "Versioning",
    "add_time",
    "has",
    "is_numeric_text",
    "match_key",
    "merge_key",
    "meta",
    "norm_numeric_text",
    "numeric_text_range",
    "present",
    "restates_key",
    "value",
]

# -- decoded rows --------------------------------------------------------------------------

META = ["ev_id", "ev_time", "ev_txid", "tick_id", "op"]
REASON = "__reason"  # why an event is bad (null for a good one)
RAW = "__raw"  # the raw event of a bad one
# the raw event, kept for the quarantine
RAW_EVENT = [
    "ev_id",
    "ev_time",
    "ev_txid",
    "ev_type",
    "ev_data",
    "ev_extra1",
    "ev_extra2",
    "ev_extra3",
    "ev_extra4",
]


def meta(name: str) -> str:
    """The internal name of a META column in decoded rows."""
    return "__" + name


def value(index: int) -> str:
    """The internal name of columns[index]'s typed value in decoded and folded rows."""
    return f"__v{index}"


def present(index: int) -> str:
    """The name of the boolean column saying whether an event carries columns[index]."""
    return f"__p{index}"


# -- folded rows ---------------------------------------------------------------------------

UPSERT, DELETE, UPDATE_IF_PRESENT = "U", "D", "M"  # the values of ACTION
ACTION = "__action"
RESET = "__reset"
FLOATS = ("float", "double")
# the fold's columns for a target that keeps deleted rows (``fold(..., soft=True)``): GONE
# the key's action is a DELETE; GONE_AT the ev_time of the key's last DELETE in the batch,
# null for an UPSERT (UPDATE_IF_PRESENT: the time a row the target marks deleted takes);
# KEEPS a target lacking the key gets the row (an UPSERT, or a DELETE of a key the batch
# inserted: kept marked deleted)
GONE, GONE_AT, KEEPS = "__gone", "__gone_at", "__keeps"


def has(index: int) -> str:
    """The folded rows' column saying whether the batch sets columns[index]."""
    return f"__has{index}"


def match_key(index: int) -> str:
    """The fold's internal name of a restated key's match value."""
    return f"__k{index}"


def is_numeric_text(column: Column) -> bool:
    """A numeric column kept as its exact text (no precision, or one beyond 38)."""
    return column.pg_type == "numeric" and column.spark_type == "string"


def restates_key(column: Column) -> bool:
    """A key column whose stored form may change while the key stays the same."""
    return column.is_key and (is_numeric_text(column) or column.spark_type in FLOATS)


def norm_numeric_text(text: str) -> str:
    """PostgreSQL numeric text without trailing fractional zeros, for one Python string
    (the engines' forms: cdc.engines.spark.fold.norm_numeric)."""
    if "." in text:
        text = text.rstrip("0").removesuffix(".")
    return "0" if text == "-0" else text


def numeric_text_range(low: str, high: str) -> tuple[str, str]:
    """Bounds, in text order, of every text of the numbers whose texts range from low to
    high: norm(low) and norm(high) + "1". A number's texts are its normalised text followed
    by nothing, by zeros, or by "." and zeros; "." and "0" sort before "1"."""
    return norm_numeric_text(low), norm_numeric_text(high) + "1"


# -- versioned rows (SCD type 2) ------------------------------------------------------------

# the version columns of a versioned target (and of versioned rows)
START, END, CURRENT, DELETED = "__start_at", "__end_at", "__current", "__deleted"


def merge_key(index: int) -> str:
    """The versioned rows' column holding the target's stored key (key column index) on the
    row that updates the target's current version; null on a new version."""
    return f"__mk{index}"


@dataclass(frozen=True)
class Versioning:
    """How a batch's changes become versions (cdc.targets.scd2's docstring has the rules)."""

    tracked: tuple[int, ...]  # non-key columns whose change opens a version
    tombstones: bool = False  # a delete opens a version marked DELETED
    truncated_at: int | None = None  # ev_id of the batch's last TRUNCATE: closes every version


# -- a table's part of a batch -------------------------------------------------------------


@dataclass(frozen=True)
class Facts:
    """What the drain needs to know of one table's decoded events before folding them."""

    events: int
    bad: int
    truncated_at: int | None  # ev_id of the batch's last TRUNCATE (or RECREATED) of the table
    key_range: tuple[str, str] | None  # lowest and highest first key column value, as text
    # ev_id of the batch's last marker of the table re-created (formats.RECREATED): the
    # events before it are the dropped table's
    recreated_at: int | None = None


@dataclass
class TableBatch:
    """One table's decoded rows of a batch, and what the decode learnt of them: what a
    target kind writes (TargetKind.write, on the engine whose rows they are)."""

    rows: Any  # decoded rows (a Spark DataFrame or an Arrow table, see the module docstring)
    columns: list[Column]  # with the Spark types the values are written as
    truncated_at: int | None = None  # ev_id of the batch's last TRUNCATE of the table
    key_range: tuple[str, str] | None = None  # lowest, highest first key value, as text


def add_time(timings: dict[str, float], phase: str, started: float) -> float:
    """Adds the seconds since started to a phase; returns now, the next phase's start."""
    now = time.monotonic()
    timings[phase] = timings.get(phase, 0.0) + now - started
    return now
