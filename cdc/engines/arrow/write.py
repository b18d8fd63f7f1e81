"""Batches written from the driver: a table's folded rows MERGEd by delta-rs, without a
Spark job.

A Spark MERGE costs a dozen or more Spark jobs and seconds of planning and commit whatever
its size (on two cores, 2.5-6 s for ten rows), and more per row than delta-rs on the same
cores. A batch decoded on the driver (cdc.engines.arrow.decode: small batches, and every
batch read with COPY on a local master) is folded there (cdc.engines.arrow.fold); a small
batch that Spark decoded (the driver could not be sure) is folded by Spark and collected as
Arrow (cdc.engines.collected). The folded rows (one per key) go to delta-rs' MERGE of the plan the
Spark MERGE renders too (cdc.targets.merge_plan, ``MergePlan.for_batch``; rendered for delta-rs
by the Delta adapter, cdc.targets.delta.delta_rs), in one commit marked with the batch's
Commit as a Delta ``txn`` action: a rerun skips a target whose appId already holds the
version, as Delta does for Spark's writes (``committed``).

The Arrow engine (cdc.engines.arrow.engine) writes by these rules; where one says no, it
declines and Spark writes. The path is taken only where delta-rs writes what Spark would:

- the target is on a local path, its protocol has only features delta-rs writes correctly
  (``WRITABLE_FEATURES``; never deletion vectors: delta-rs 1.6 neither reads nor refuses
  them, and would bring back the rows they delete). Neither is the change data feed (delta-rs
  1.6 writes a MERGE's change data as Spark does, but fails a MERGE in which a source row
  matches no clause, such as the delete of a key the target lacks, on a table with a NOT NULL
  column) nor liquid clustering (it refuses the ``clustering`` and ``domainMetadata``
  features): the route planner sends such targets to Spark (cdc.engines.planner);
- the files the MERGE may rewrite hold at most ``MAX_BYTES`` (a MERGE without deletion
  vectors rewrites the files it touches): with an integer or date first key, the files whose
  statistics overlap the batch's first-key range (``bytes_touched``; the MERGE plan is given
  the range, ``batch_plan``, so it reads no other), else every file. Beyond, Spark MERGEs,
  and a target that ``outgrew`` gets deletion vectors first (cdc.engines.spark.engine);
- every column the batch writes is in the target under its exact name (Spark matches names
  without case, delta-rs does not), and no key is compared in a normalised form (numeric
  text, floats: delta-rs' rendering of the plan refuses them);
- the batch holds no TRUNCATE of the table, and no date or timestamp outside years 1-9999
  (``fits``: delta-rs' statistics overflow on them).

The rows have Spark's types in Arrow (the driver's decoder makes the values Spark's casts
make: decimals, dates and timestamps as they are, the key columns never null); delta-rs
refuses a source type that differs from the target's: the write fails, loudly, instead of
casting.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from cdc import rows as contract
from cdc.pg.pgtypes import Column
from cdc.rows import value
from cdc.targets import delta_table
from cdc.targets.delta import delta_rs
from cdc.targets.merge_plan import MergePlan
from cdc.targets.table import Commit

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "MAX_BYTES",
    "WRITABLE_FEATURES",
    "batch_plan",
    "committed",
    "features",
    "fits",
    "key_range",
    "merge",
    "outgrown",
    "writable",
]

log = logging.getLogger("cdc.merge")

MAX_BYTES = 256 * 1024 * 1024  # larger targets take the Spark MERGE, with deletion vectors
WRITABLE_FEATURES = frozenset({"columnMapping", "invariants", "appendOnly", "timestampNtz"})


def features(table: delta_table.LocalTable) -> set[str]:
    """Every feature the table's protocol asks of a reader or writer."""
    return table.features()


def writable(
    table: delta_table.LocalTable,
    schema: list[tuple[str, str]],
    columns: list[Column],
    any_size: bool = False,
    rows: pa.Table | None = None,
) -> bool:
    """Whether the driver may write this batch's rows to the target (its local table), or
    the Spark MERGE must (see the module docstring). any_size: an append (a snapshot's
    chunk), which rewrites no file, to a target of any size. rows: the batch's folded or
    decoded rows (value(i) columns), whose first-key range says which files the MERGE may
    rewrite (``bytes_touched``); without them, every file."""
    if any(contract.restates_key(c) for c in columns) or not features(table) <= WRITABLE_FEATURES:
        return False
    names = {f.name for f in table.schema().fields}
    if not all(name in names for name, _ in schema):
        return False
    return any_size or bytes_touched(table, columns, rows) <= MAX_BYTES


# first-key types whose file statistics are exact (a string's may be cut short)
RANGED_TYPES = ("short", "int", "long", "date")


def key_range(rows: pa.Table, columns: list[Column]) -> tuple[object, object] | None:
    """The lowest and highest first-key value of rows (value(i) columns), when its type is
    one of RANGED_TYPES and the rows have one."""
    import pyarrow.compute as pc

    first = next((i for i, c in enumerate(columns) if c.is_key), None)
    if first is None or columns[first].spark_type not in RANGED_TYPES or not rows.num_rows:
        return None
    bounds = pc.min_max(rows.column(value(first)))
    return bounds["min"].as_py(), bounds["max"].as_py()


def batch_plan(folded: pa.Table, columns: list[Column], schema: list[tuple[str, str]]) -> MergePlan:
    """The batch's MERGE (MergePlan.for_batch) of folded rows, bounded by their first-key
    range where its file statistics are exact (``key_range``): the range bytes_touched
    counted the files of."""
    return MergePlan.for_batch(columns, schema, key_range(folded, columns))


def bytes_touched(
    table: delta_table.LocalTable, columns: list[Column], rows: pa.Table | None
) -> int:
    """Bytes of the target's files that a MERGE of rows may rewrite: those whose first-key
    statistics overlap the rows' first-key range (delta-rs rewrites only files with a
    matched row, and ``batch_plan`` gives the MERGE the range); every file when the range is
    unknown.
    So a batch of recent keys into a large table ordered by key rewrites a file or two, and
    the cost follows the batch, not the table."""
    found = None if rows is None else key_range(rows, columns)
    if found is None:
        return table.size()
    first = next(c for c in columns if c.is_key)
    return table.bytes_between(first.name, *found)


def outgrown(table: delta_table.LocalTable) -> bool:
    """Whether a local target without deletion vectors grew past MAX_BYTES: the Spark MERGE
    writes it from now on, with deletion vectors (one MERGE rewrites whole files
    without)."""
    return "deletionVectors" not in features(table) and table.size() > MAX_BYTES


# dates and timestamps delta-rs writes statistics for without overflow (it panics on years
# far outside these); a batch with any value beyond them takes the Spark MERGE
LOWEST_DAY, HIGHEST_DAY = -719_162, 2_932_896  # 0001-01-01, 9999-12-31, days from 1970


def fits(rows: pa.Table) -> bool:
    """Whether every date and timestamp of rows (also inside arrays) lies in years 1-9999."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for column in rows.columns:
        values, kind = column, column.type
        while pa.types.is_list(kind) or pa.types.is_large_list(kind):
            values, kind = pc.list_flatten(values), kind.value_type
        if pa.types.is_date32(kind):
            low, high, width = LOWEST_DAY, HIGHEST_DAY, pa.int32()
        elif pa.types.is_timestamp(kind):
            per_day = (
                86_400 * {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}[kind.unit]
            )
            low, high, width = LOWEST_DAY * per_day, (HIGHEST_DAY + 1) * per_day - 1, pa.int64()
        else:
            continue
        bounds = pc.min_max(values.cast(width))
        least, most = bounds["min"].as_py(), bounds["max"].as_py()
        if least is not None and (least < low or most > high):
            return False
    return True


def committed(table: delta_table.LocalTable, commit: Commit) -> bool:
    """Whether the target already holds this batch's write (a rerun after a crash)."""
    done = table.committed(commit.app_id)
    return done is not None and done >= commit.version


def merge(table: delta_table.LocalTable, folded: pa.Table, plan: MergePlan, commit: Commit) -> None:
    """MERGEs the fold (cdc.engines.*.fold: value(i), has(i), ACTION, RESET; already cast to
    the target's types) into the table as the plan says (MergePlan.for_batch, rendered by
    cdc.targets.delta.delta_rs), in one commit marked with commit; nothing when the target
    already holds it."""
    if committed(table, commit):
        log.info("%s: tick %d already committed", commit.app_id, commit.version)
        return
    delta_rs.merge(table, folded, plan, commit)


def appendable(table: delta_table.LocalTable, schema: list[tuple[str, str]]) -> bool:
    """Whether delta-rs may append to the target as Spark would: only features it writes
    correctly, every column under its exact name (an append rewrites no file, so the
    target's size does not matter)."""
    names = {f.name for f in table.schema().fields}
    return features(table) <= WRITABLE_FEATURES and all(n in names for n, _ in schema)
