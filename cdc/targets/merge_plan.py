"""A MERGE as a value: which keys match, what a matched row gets, what is inserted, what is
deleted, and the range of the first key column the MERGE may touch. Plain data, without
Spark or Arrow, so that the two writers of a Delta target render one plan each in their
own SQL and cannot drift apart: Spark SQL (cdc.targets.delta.spark_sql) and delta-rs'
builder with DataFusion predicates (cdc.targets.delta.delta_rs).

The project does two MERGEs, each made by one constructor:

- a batch's (``MergePlan.for_batch``): the fold's rows (cdc.rows: ``value(i)``, ``has(i)``,
  ACTION, RESET, ``match_key(i)`` for a restated key) into the target; a DELETE removes the
  row, a matched key gets the columns the batch sets (every column when the key has an
  INSERT, RESET), an UPSERT of a missing key inserts the row, an UPDATE_IF_PRESENT of a
  missing key does nothing;
- a snapshot chunk's (``MergePlan.for_snapshot_chunk``): whole rows (``value(i)`` per
  column), every column of a matched row set, every missing key inserted, nothing deleted.

A batch's MERGE into a target that keeps deleted rows (``MergePlan.soft``, ``SoftDeletes``:
a mirror with ``deletes = "soft"``) deletes nothing; its clauses, in order:

1. a matched row whose source row is ``marked_when`` (a DELETE) gets the columns the batch
   sets, and is marked: ``flag`` true, ``at`` the source's ``gone_at``;
2. a matched row already marked whose source row is ``kept_when`` (an UPDATE_IF_PRESENT: a
   row inserted and deleted again within one transaction) gets the columns and the time;
3. any other matched row gets the columns and is not marked (``flag`` false, ``at`` null):
   an UPSERT revives a deleted row;
4. a missing key whose source row ``keeps`` is inserted, marked as its ``gone`` and
   ``gone_at`` say (an UPSERT; a DELETE of a key the batch inserted, kept deleted);
5. with a TRUNCATE (``truncated_at``, its time: the source rows are those after it, and the
   plan has no bounds) every target row the source lacks and not yet marked is marked at
   that time, and an UPDATE_IF_PRESENT is a row gone too (``marked_when``).

Both renderings call the target ``t`` and the source ``s``. Keys compare as PostgreSQL
compares them: a numeric key kept as its exact text matches in its normalised form
(cdc.rows.norm_numeric_text; the target's side normalised by the rendering), a float key as
Spark compares floats in a join (-0 equals 0, NaN equals NaN). delta-rs compares neither
(the driver's writes refuse such targets, cdc.engines.arrow.write.writable): its rendering
refuses them too instead of comparing them otherwise.

The bounds prune: ``t.<first key> between low and high`` joins the ON condition, so that the
MERGE reads only the files whose statistics overlap the source's keys. They are text, as
cdc.rows.Facts gives a batch's key range; each rendering makes them literals of the column's
type.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cdc import rows as contract
from cdc.rows import has, match_key, value

if TYPE_CHECKING:
    from cdc.pg.pgtypes import Column

__all__ = [
    "ALWAYS",
    "EXACT",
    "FLOAT",
    "IF_SET",
    "INTEGERS",
    "KEEP",
    "NUMERIC_TEXT",
    "PRUNABLE",
    "Bounds",
    "KeyMatch",
    "MergePlan",
    "SetColumn",
    "SoftDeletes",
    "SourceIs",
]

# how a key matches (KeyMatch.form)
EXACT = "exact"  # target = source
NUMERIC_TEXT = "numeric text"  # the target's text normalised = the source's normalised text
FLOAT = "float"  # as Spark compares floats in a join: -0 equals 0, NaN equals NaN

# what a matched row's column gets (SetColumn.when)
ALWAYS = "always"  # the source's value
IF_SET = "if set"  # the source's value when one of the flags holds, else the row's own
KEEP = "keep"  # the row's own (not in the update)

INTEGERS = ("short", "int", "long")
# first-key types the bounds are given for: literals both renderings write exactly
PRUNABLE = (*INTEGERS, "string", "date")


@dataclass(frozen=True)
class KeyMatch:
    """One key column of the ON condition."""

    target: str  # the target's column
    source: str  # the source's column
    form: str  # EXACT, NUMERIC_TEXT or FLOAT


@dataclass(frozen=True)
class SetColumn:
    """What a matched row's column gets."""

    target: str  # the target's column
    source: str  # the source's column
    when: str  # ALWAYS, IF_SET or KEEP
    flags: tuple[str, ...] = ()  # IF_SET: the source's boolean columns, any of which sets it


@dataclass(frozen=True)
class SourceIs:
    """A condition on the source row: its column holds the value (a text)."""

    column: str
    value: str


@dataclass(frozen=True)
class SoftDeletes:
    """How a MERGE marks the rows it would delete (the clauses in the module docstring)."""

    flag: str  # the target's boolean column: the row is deleted
    at: str  # the target's timestamp column: when
    gone: str  # the source's boolean column: its row is deleted
    gone_at: str  # the source's timestamp column: when (the time a marked row takes)
    keeps: str  # the source's boolean column: a missing key is inserted
    marked_when: tuple[SourceIs, ...]  # a matched row is marked when its source row is one
    kept_when: SourceIs | None  # a marked row takes the time when its source row is so
    truncated_at: int | None = None  # a TRUNCATE's time, microseconds since 1970 (UTC)

    @classmethod
    def of_fold(cls, flag: str, at: str, truncated_at: int | None = None) -> SoftDeletes:
        """The soft fold's (cdc.rows.GONE, GONE_AT, KEEPS): a DELETE marks a matched row; an
        UPDATE_IF_PRESENT gives a marked row its time, or, after a TRUNCATE, marks it."""
        delete = SourceIs(contract.ACTION, contract.DELETE)
        maybe = SourceIs(contract.ACTION, contract.UPDATE_IF_PRESENT)
        truncated = truncated_at is not None
        return cls(
            flag=flag,
            at=at,
            gone=contract.GONE,
            gone_at=contract.GONE_AT,
            keeps=contract.KEEPS,
            marked_when=(delete, maybe) if truncated else (delete,),
            kept_when=None if truncated else maybe,
            truncated_at=truncated_at,
        )


@dataclass(frozen=True)
class Bounds:
    """The range of the target's first key column the MERGE may touch (see the module)."""

    column: str  # the target's column
    spark_type: str  # one of PRUNABLE
    low: str
    high: str

    @classmethod
    def of(cls, columns: list[Column], key_range: tuple[object, object] | None) -> Bounds | None:
        """The bounds of a first-key range (text, or a Python int, str or date, whose text is
        taken), or None when there are none to give: no range, a first key of a type not
        PRUNABLE, or integer bounds that are not integers. A numeric key kept as text
        matches any text of the same number (``1.0``, ``1.00``): every such text lies
        between the lowest normalised key and the highest normalised key followed by "1"
        (cdc.rows.numeric_text_range)."""
        first = next(c for c in columns if c.is_key)
        if key_range is None or None in key_range or first.spark_type not in PRUNABLE:
            return None
        low, high = (str(bound) for bound in key_range)
        if contract.is_numeric_text(first):
            low, high = contract.numeric_text_range(low, high)
        if first.spark_type in INTEGERS and not all(
            re.fullmatch(r"-?\d+", bound) for bound in (low, high)
        ):
            return None
        return cls(first.name, first.spark_type, low, high)


def _form(column: Column) -> str:
    if contract.is_numeric_text(column):
        return NUMERIC_TEXT
    return FLOAT if contract.restates_key(column) else EXACT


@dataclass(frozen=True)
class MergePlan:
    """One MERGE of a source ``s`` into a target ``t`` (see the module)."""

    keys: tuple[KeyMatch, ...]
    sets: tuple[SetColumn, ...]  # one per target column, in the target's order
    inserts: tuple[tuple[str, str], ...]  # (target column, source column) of an inserted row
    delete_when: SourceIs | None  # a matched row is deleted when the source row is so
    insert_when: SourceIs | None  # a missing key is inserted when so (None: always)
    bounds: Bounds | None
    # a target row matches only when this boolean column of it holds true (the current
    # version of a versioned target), None: every row
    target_flag: str | None = None
    # deleted rows are marked, not deleted (see the module docstring); None: deleted
    soft: SoftDeletes | None = None

    @property
    def updates(self) -> tuple[SetColumn, ...]:
        """The columns a matched row's update sets (none: no update)."""
        return tuple(s for s in self.sets if s.when != KEEP)

    @classmethod
    def for_batch(
        cls,
        columns: list[Column],
        schema: list[tuple[str, str]],
        key_range: tuple[object, object] | None,
        soft: SoftDeletes | None = None,
    ) -> MergePlan:
        """The fold's MERGE (cdc.engines.*.fold): columns the source table's, schema the
        target's (name, type) for them, key_range the batch's first-key range (Bounds.of).
        A restated key (cdc.rows.restates_key) matches on its match_key(i) and takes the
        batch's form; the other keys are kept. soft: deleted rows marked, not deleted (the
        soft fold's rows; with a TRUNCATE the MERGE has no bounds: it marks every row)."""
        keys, sets = [], []
        for i, c in enumerate(columns):
            if c.is_key:
                restated = contract.restates_key(c)
                keys.append(KeyMatch(c.name, match_key(i) if restated else value(i), _form(c)))
                sets.append(SetColumn(c.name, value(i), ALWAYS if restated else KEEP))
            else:
                sets.append(SetColumn(c.name, value(i), IF_SET, (contract.RESET, has(i))))
        truncated = soft is not None and soft.truncated_at is not None
        return cls(
            keys=tuple(keys),
            sets=tuple(sets),
            inserts=tuple((name, value(i)) for i, (name, _) in enumerate(schema)),
            delete_when=None if soft else SourceIs(contract.ACTION, contract.DELETE),
            insert_when=None if soft else SourceIs(contract.ACTION, contract.UPSERT),
            bounds=None if truncated else Bounds.of(columns, key_range),
            soft=soft,
        )

    @classmethod
    def for_versions(
        cls,
        columns: list[Column],
        schema: list[tuple[str, str]],
        key_range: tuple[object, object] | None,
    ) -> MergePlan:
        """A versioned target's MERGE (cdc.targets.scd2): versioned rows (cdc.rows) match the
        target's current version by ``merge_key(i)``, the target's stored key (null on a new
        version, which never matches); a matched version gets every column, a new one is
        inserted, nothing is deleted. schema: the target's (name, type) for the source's
        columns, then the version columns, whose source columns have their names."""
        keys = tuple(
            KeyMatch(c.name, contract.merge_key(i), EXACT)
            for i, c in enumerate(columns)
            if c.is_key
        )
        pairs = tuple(
            (name, value(i) if i < len(columns) else name) for i, (name, _) in enumerate(schema)
        )
        return cls(
            keys=keys,
            sets=tuple(SetColumn(name, source, ALWAYS) for name, source in pairs),
            inserts=pairs,
            delete_when=None,
            insert_when=None,
            bounds=Bounds.of(columns, key_range),
            target_flag=contract.CURRENT,
        )

    @classmethod
    def for_snapshot_chunk(
        cls,
        columns: list[Column],
        schema: list[tuple[str, str]],
        key_range: tuple[object, object] | None,
    ) -> MergePlan:
        """A snapshot chunk's MERGE: whole rows (``value(i)`` per column, and match_key(i)
        holding the normalised text of a numeric key kept as text), a matched row gets every
        column, a missing key is inserted, nothing is deleted."""
        keys = tuple(
            KeyMatch(c.name, match_key(i) if contract.is_numeric_text(c) else value(i), _form(c))
            for i, c in enumerate(columns)
            if c.is_key
        )
        pairs = tuple((name, value(i)) for i, (name, _) in enumerate(schema))
        return cls(
            keys=keys,
            sets=tuple(SetColumn(name, source, ALWAYS) for name, source in pairs),
            inserts=pairs,
            delete_when=None,
            insert_when=None,
            bounds=Bounds.of(columns, key_range),
        )
