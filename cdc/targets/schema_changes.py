"""A source column renamed, or retyped to a wider type, followed in the target in place
(cdc.targets.schema_drift.reconcile calls these each batch, before the events are decoded).

Renames. An event names its columns, so a column renamed at the source (``ALTER TABLE ...
RENAME COLUMN a TO b``) leaves events written before the rename carrying ``a`` and those after
``b``, and by names alone a rename looks like a column dropped and another added. The
source's catalog tells them apart: a column keeps its number (``pg_attribute.attnum``) across
a RENAME, and a dropped column's number is never given again in its table. The target
property ``cdc.columns`` records, with the source table's oid, the number of each target
column that is a source column, and the names events may still carry for a renamed one::

    {"relid": 16385, "attnums": {"id": 1, "b": 2}, "renamed": {"a": "b"}}

A source column whose number is recorded under another name is that column renamed: the
Delta column is renamed in place (``ALTER TABLE ... RENAME COLUMN``, column mapping by name
turned on first: cdc.targets.delta.reshape), and every event of the old name is read as the
new (``Drift.renamed``, which both decoders apply before anything else), in this batch and
in later ones. A drain killed between the rename and the record finds the target renamed
already and records it. A table dropped and created again under its name (another oid) has
its record made again from the names; so has a target written before the record existed
(a rename made before its first record is the drop and add it was before).

Type changes. A column retyped at the source to a type it widens to without loss
(``schema_drift.widens``) is followed as the table's ``type_changes`` option says
(cdc.targets.options):

- ``rewrite``: the table rewritten with the column's new type in one commit
  (cdc.targets.delta.reshape.rewrite_types), readable by every reader that read it before;
- ``widen``: Delta's typeWidening feature (``ALTER COLUMN ... TYPE``, metadata only), which
  delta-rs 1.6 (its pyarrow reads and QueryBuilder, and so polars and DuckDB through it) and
  the Arrow engine's writes refuse;
- unset: ``rewrite`` for a table of at most REWRITE_MAX_BYTES, ``widen`` beyond (logged).

A table that has the typeWidening feature already, or Delta's change data feed, is widened
whatever the option (the feature stays, rewriting would not make it readable; a rewrite
would put every row in the feed as deleted and inserted again).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

from pyspark.sql import SparkSession
from pyspark.sql.types import StructField

from cdc.errors import TableUnappliable
from cdc.globs import matches
from cdc.pg.pgtypes import Column
from cdc.targets import delta_table
from cdc.targets.masking import Masking
from cdc.targets.options import TableOptions
from cdc.targets.table import TableRef

__all__ = [
    "COLUMNS",
    "REWRITE",
    "REWRITE_MAX_BYTES",
    "WIDEN",
    "Recorded",
    "follow_renames",
    "record",
    "retype",
    "type_change_mode",
]

log = logging.getLogger("cdc.schema_drift")

COLUMNS = "cdc.columns"  # target property: see the module docstring
REWRITE, WIDEN = "rewrite", "widen"
# The default's bound (type_changes unset): a table up to this size is rewritten, a larger
# one widened. A rewrite reads and writes the whole table in the batch that meets the
# change, once; widening leaves it unreadable by delta-rs for good. Measured by
# bench.rewrite on a local master of 2 cores (other jobs running, load average about 5):
# 1.13 GiB of files rewritten in 52 s, 0.19 GiB in 12 s (about 4 s plus 42 s per GiB),
# so a table at this bound holds its batch about a minute, once; under a load average of
# 17 the same took 176 s and 41 s.
REWRITE_MAX_BYTES = 1 << 30
CHANGE_DATA_FEED = "delta.enableChangeDataFeed"
TYPE_WIDENING = ("delta.enableTypeWidening", "delta.feature.typeWidening")


@dataclass(frozen=True)
class Recorded:
    """The target's ``cdc.columns``: the source table's oid, each target column's number in
    it, and the names events may still carry for renamed columns (old -> current)."""

    relid: int
    attnums: dict[str, int] = field(default_factory=dict)
    renamed: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, props: dict[str, str]) -> Recorded | None:
        text = props.get(COLUMNS)
        if not text:
            return None
        body = json.loads(text)
        return cls(int(body["relid"]), dict(body["attnums"]), dict(body.get("renamed", {})))

    def text(self) -> str:
        return json.dumps(
            {"relid": self.relid, "attnums": self.attnums, "renamed": self.renamed},
            sort_keys=True,
        )


def _relid(source: list[Column]) -> int | None:
    found = {c.relid for c in source}
    return found.pop() if len(found) == 1 else None


def follow_renames(
    spark: SparkSession,
    target: TableRef,
    name: str,
    source: list[Column],
    held: list[Column],
    fields: dict[str, StructField],
    props: dict[str, str],
    masks: Masking | None = None,
) -> dict[str, str]:
    """Renames the target's columns whose source column was renamed (see the module
    docstring); returns the names events may carry for the columns held (old -> current).
    source: the source's columns from its catalog (their attnum and relid); held: those the
    target holds (cdc.targets.masking leaves the excluded ones out); fields: the target's,
    by lowercase name, updated here; masks: the entry's exclude_columns and mask, which must
    treat both names alike (else the renamed column would mix masked and clear values)."""
    recorded = Recorded.of(props)
    relid = _relid(source)
    if recorded is None or relid is None or recorded.relid != relid:
        return {}
    by_number = {c.attnum: c for c in source if c.attnum is not None}
    held_names = {c.name for c in held}
    renamed = dict(recorded.renamed)
    for old, number in recorded.attnums.items():
        now = by_number.get(number)
        if now is None or now.name == old or now.name not in held_names:
            continue  # dropped, the same name, or not in the target
        old_field, new_field = fields.get(old.lower()), fields.get(now.name.lower())
        if old_field is not None and _treatment(masks, old) != _treatment(masks, now.name):
            raise TableUnappliable(
                name,
                f"column {old} was renamed to {now.name} in the source, and the entry's"
                f" exclude_columns and mask treat the names differently ({old}:"
                f" {_treatment(masks, old)}, {now.name}: {_treatment(masks, now.name)}): give"
                " the new name the old one's treatment, or resync the table",
            )
        if old_field is not None and (new_field is None or new_field is old_field):
            delta_table.rename_column(spark, target, old_field.name, now.name)
            fields.pop(old.lower())
            fields[now.name.lower()] = StructField(
                now.name, old_field.dataType, old_field.nullable, old_field.metadata
            )
            log.info("%s: column %s renamed to %s, as in the source", name, old, now.name)
        elif new_field is None:
            continue  # the target holds neither name
        elif old_field is not None:
            raise TableUnappliable(
                name,
                f"column {old} was renamed to {now.name} in the source, and the target's"
                f" column {now.name} holds another source column's values (one dropped, or"
                " names swapped): the rename cannot be followed in place; resync the table",
            )
        # else: renamed in the target already (a drain killed before the record)
        renamed = {k: now.name if v == old else v for k, v in renamed.items()}
        renamed[old] = now.name
    return {old: new for old, new in renamed.items() if new in held_names and old not in held_names}


def _treatment(masks: Masking | None, name: str) -> str:
    """What the entry's exclude_columns and mask do with a column of this name."""
    if masks is None:
        return "kept"
    if masks.excludes(name):
        return "excluded"
    return next((method for glob, method in masks.mask if matches(glob, name)), "kept")


def record(
    spark: SparkSession,
    target: TableRef,
    source: list[Column],
    held: list[Column],
    renamed: dict[str, str],
    props: dict[str, str] | None,
) -> None:
    """Records the number of each column the target holds, and the old names renamed
    columns' events may carry, when they differ from the target's ``cdc.columns`` (props:
    the target's properties, None for a table made this batch)."""
    relid = _relid(source)
    if relid is None:
        return  # columns not read from the catalog (nothing to tell a rename by)
    numbers = {c.name: c.attnum for c in source if c.attnum is not None}
    wanted = Recorded(
        relid, {c.name: numbers[c.name] for c in held if c.name in numbers}, dict(renamed)
    )
    if props is not None and Recorded.of(props) == wanted:
        return
    delta_table.set_properties(spark, target, {COLUMNS: wanted.text()})


def type_change_mode(
    options: TableOptions, props: dict[str, str], size: int | None
) -> tuple[str, str]:
    """How a widened column is followed, REWRITE or WIDEN, and why (see the module
    docstring). size: the table's bytes (read only when the option is unset)."""
    if any(props.get(k) in ("true", "supported", "enabled") for k in TYPE_WIDENING):
        return WIDEN, "the table has Delta's typeWidening feature already"
    if options.change_data_feed or props.get(CHANGE_DATA_FEED) == "true":
        return WIDEN, (
            "the table has Delta's change data feed, where a rewrite would show every row"
            " deleted and inserted again"
        )
    if options.type_changes is not None:
        return options.type_changes, f'type_changes = "{options.type_changes}"'
    assert size is not None
    if size <= REWRITE_MAX_BYTES:
        return REWRITE, f"the table holds {_size(size)}, at most {_size(REWRITE_MAX_BYTES)}"
    return WIDEN, (
        f"the table holds {_size(size)}, over the {_size(REWRITE_MAX_BYTES)} the default"
        ' rewrites (type_changes = "rewrite" rewrites it anyway)'
    )


def _size(size: int) -> str:
    return f"{size / (1 << 30):.2f} GiB" if size >= 1 << 26 else f"{size / (1 << 20):.1f} MiB"


def retype(
    spark: SparkSession,
    target: TableRef,
    name: str,
    widened: dict[str, tuple[str, str]],
    options: TableOptions,
    props: dict[str, str],
    before: dict[str, str],
) -> None:
    """Follows the columns widened at the source (Delta name -> (its type, the new type)),
    by rewrite or widen (``type_change_mode``), logging which and why; props (the target's)
    is updated when the table gets the typeWidening feature. before: properties a rewrite
    sets first (what its nullable schema no longer says: the key)."""
    if not widened:
        return
    found = delta_table.detail(spark, target) if options.type_changes is None else None
    how, why = type_change_mode(options, props, found.size if found else None)
    changes = ", ".join(f"{c} {old} -> {new}" for c, (old, new) in widened.items())
    if how == REWRITE:
        found = found or delta_table.detail(spark, target)
        types = {c: new for c, (_, new) in widened.items()}
        delta_table.rewrite_types(spark, target, types, found, changes, before)
        log.info("%s: rewritten with %s (%s): every Delta reader reads it", name, changes, why)
        return
    for column, (_, new) in widened.items():
        delta_table.retype(spark, target, column, new, props)
    log.warning(
        "%s: widened %s with Delta's typeWidening feature (%s): delta-rs, polars and DuckDB"
        " can no longer read the table, and Spark writes it",
        name, changes, why,
    )  # fmt: skip
