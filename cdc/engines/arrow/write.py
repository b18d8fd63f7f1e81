"""Batches written from the driver: a table's folded rows MERGEd by delta-rs, without a
Spark job.

A Spark MERGE costs a dozen or more Spark jobs and seconds of planning and commit whatever
its size (on two cores, 2.5-6 s for ten rows), and more per row than delta-rs on the same
cores. A batch decoded on the driver (cdc.engines.arrow.decode: small batches, and every
batch read with COPY on a local master) is folded there (cdc.engines.arrow.fold); a small
batch that Spark decoded (the driver could not be sure) is folded by Spark and collected as
Arrow (``Mirror.apply``). The folded rows (one per key) go to delta-rs' MERGE with the same
clauses, in one commit marked
with the batch's Commit as a Delta ``txn`` action: a rerun skips a target whose appId
already holds the version, as Delta does for Spark's writes (``committed``).

The path is taken only where delta-rs writes what Spark would, else the Spark MERGE is:

- the target is on a local path, its protocol has only features delta-rs writes correctly
  (``WRITABLE_FEATURES``; never deletion vectors: delta-rs 1.6 neither reads nor refuses
  them, and would bring back the rows they delete);
- the files the MERGE may rewrite hold at most ``MAX_BYTES`` (a MERGE without deletion
  vectors rewrites the files it touches): with an integer or date first key, the files whose
  statistics overlap the batch's first-key range (``bytes_touched``; the MERGE is given the
  range, so it reads no other), else every file. Beyond, the target gets deletion vectors
  and Spark (``Mirror.apply``);
- every column the batch writes is in the target under its exact name (Spark matches names
  without case, delta-rs does not), and no key is compared in a normalised form (numeric
  text, floats: their ON condition is Spark SQL);
- the batch holds no TRUNCATE of the table, and no date or timestamp outside years 1-9999
  (``fits``: delta-rs' statistics overflow on them).

The rows have Spark's types in Arrow (the driver's decoder makes the values Spark's casts
make: decimals, dates and timestamps as they are, the key columns never null); delta-rs
refuses a source type that differs from the target's (``error_on_type_mismatch``): the
write fails, loudly, instead of casting.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from cdc import rows as contract
from cdc.pg.pgtypes import Column
from cdc.rows import value
from cdc.targets import delta_table
from cdc.targets.table import Commit

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "MAX_BYTES",
    "WRITABLE_FEATURES",
    "append",
    "features",
    "fits",
    "holds_none_between",
    "merge",
    "outgrown",
    "try_merge",
    "writable",
]

log = logging.getLogger("cdc.merge")

MAX_BYTES = 256 * 1024 * 1024  # larger targets take the Spark MERGE, with deletion vectors
WRITABLE_FEATURES = frozenset({"columnMapping", "invariants", "appendOnly", "timestampNtz"})


def ident(name: str) -> str:
    """A column name as a quoted identifier of delta-rs' SQL (DataFusion)."""
    return '"' + name.replace('"', '""') + '"'


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


def bytes_touched(
    table: delta_table.LocalTable, columns: list[Column], rows: pa.Table | None
) -> int:
    """Bytes of the target's files that a MERGE of rows may rewrite: those whose first-key
    statistics overlap the rows' first-key range (delta-rs rewrites only files with a
    matched row, and ``merge`` gives it the range); every file when the range is unknown.
    So a batch of recent keys into a large table ordered by key rewrites a file or two, and
    the cost follows the batch, not the table."""
    found = None if rows is None else key_range(rows, columns)
    if found is None:
        return table.size()
    first = next(c for c in columns if c.is_key)
    return table.bytes_between(first.name, *found)


def _literal(value: object, spark_type: str) -> str | None:
    """A first-key bound as a literal of delta-rs' SQL (DataFusion), for the types a range
    is asked of; None for others."""
    if spark_type in ("short", "int", "long") and isinstance(value, int):
        return str(value)
    if spark_type == "string" and isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if spark_type == "date":
        return f"DATE '{value.isoformat()}'"  # type: ignore[attr-defined]
    return None


def holds_none_between(
    table: delta_table.LocalTable, column: Column, low: object, high: object
) -> bool:
    """Whether the table holds no row whose column lies between low and high (files whose
    statistics lie outside are not read); False when that cannot be asked."""
    from deltalake import QueryBuilder

    low_sql, high_sql = _literal(low, column.spark_type), _literal(high, column.spark_type)
    if low_sql is None or high_sql is None:
        return False
    query = f"select 1 from t where {ident(column.name)} between {low_sql} and {high_sql} limit 1"
    found = QueryBuilder().register("t", table.table).execute(query).read_all()
    return found.num_rows == 0


def append(table: delta_table.LocalTable, rows: pa.Table, schema: list[tuple[str, str]]) -> None:
    """Appends rows (columns named and typed as the target's) in one commit; delta-rs refuses
    a type that differs from the target's."""
    from deltalake import write_deltalake

    write_deltalake(table.table, rows.select([n for n, _ in schema]), mode="append")


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


def merge(
    table: delta_table.LocalTable,
    folded: pa.Table,
    columns: list[Column],
    schema: list[tuple[str, str]],
    commit: Commit,
) -> None:
    """MERGEs the fold (cdc.engines.spark.fold: value(i), ``__has<i>``, ``__action``,
    ``__reset``; already cast to the target's types) into the table, as Mirror's Spark MERGE
    does: a DELETE removes the row, a matched key gets the columns the batch sets, an
    UPSERT of a missing key inserts the row; in one commit marked with commit."""
    from deltalake import CommitProperties, Transaction

    if committed(table, commit):
        log.info("%s: tick %d already committed", commit.app_id, commit.version)
        return
    names = [n for n, _ in schema]
    on = " and ".join(
        f"t.{ident(c.name)} = s.{value(i)}" for i, c in enumerate(columns) if c.is_key
    )
    found = key_range(folded, columns)
    if found is not None:  # files outside the batch's keys are not even read
        first = next(c for c in columns if c.is_key)
        low, high = (_literal(bound, first.spark_type) for bound in found)
        if low is not None and high is not None:
            on += f" and t.{ident(first.name)} between {low} and {high}"
    sets = {
        ident(c.name): (
            f"case when s.__reset or s.__has{i} then s.{value(i)} else t.{ident(c.name)} end"
        )
        for i, c in enumerate(columns)
        if not c.is_key
    }
    inserts = {ident(n): f"s.{value(i)}" for i, n in enumerate(names)}
    merger = table.table.merge(
        folded,
        on,
        source_alias="s",
        target_alias="t",
        error_on_type_mismatch=True,
        commit_properties=CommitProperties(
            app_transactions=[Transaction(commit.app_id, commit.version)]
        ),
    ).when_matched_delete(f"s.__action = '{contract.DELETE}'")
    if sets:
        merger = merger.when_matched_update(sets)
    merger.when_not_matched_insert(inserts, f"s.__action = '{contract.UPSERT}'").execute()


def try_merge(
    table: delta_table.LocalTable,
    folded: pa.Table,
    columns: list[Column],
    schema: list[tuple[str, str]],
    commit: Commit,
) -> bool:
    """merge; False, with a warning, when delta-rs fails other than by a concurrent commit
    (which is raised, for cdc.targets.delta_table.retry_conflicts): the caller then writes
    with Spark. Either delta-rs committed nothing, or it committed the batch's txn, which
    the Spark write then finds and skips."""
    try:
        merge(table, folded, columns, schema, commit)
    except Exception as exc:
        if delta_table.is_concurrent_conflict(exc):
            raise
        log.warning("%s: written with Spark, delta-rs failed: %s", commit.app_id, exc)
        return False
    return True
