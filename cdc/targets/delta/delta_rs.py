"""Writes by delta-rs to a table on a local path (cdc.targets.delta.local.LocalTable), without
a JVM: a MERGE plan (cdc.targets.merge_plan) rendered to delta-rs' merge builder
(``when_matched_delete / when_matched_update / when_not_matched_insert``) with DataFusion SQL
predicates, an append, and a look at a key range. Which writes may go this way is the
driver's decision (cdc.engines.arrow.write).

The source rows have the target's types in Arrow: delta-rs refuses a source type that
differs from the target's (``error_on_type_mismatch``), so a write fails, loudly, instead of
casting. A write given a Commit carries it as a ``txn`` action, as Spark's txnAppId /
txnVersion do (cdc.targets.delta.commits).

DataFusion compares keys exactly: a plan whose keys compare in a normalised form (numeric
text, floats) is refused, not rendered otherwise than Spark would compare them. Its string
literals have no backslash escapes (Spark SQL's do: cdc.targets.delta.spark_sql).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cdc.rows import CURRENT
from cdc.targets.merge_plan import (
    ALWAYS,
    EXACT,
    INTEGERS,
    Bounds,
    MergePlan,
    SetColumn,
    SoftDeletes,
    SourceIs,
)
from cdc.targets.table import Commit

if TYPE_CHECKING:
    import pyarrow as pa

    from cdc.targets.delta.local import LocalTable

__all__ = [
    "append",
    "between",
    "holds_none_between",
    "ident",
    "inserts",
    "literal",
    "merge",
    "on",
    "updates",
]


def ident(name: str) -> str:
    """A column name as a quoted identifier of delta-rs' SQL (DataFusion)."""
    return '"' + name.replace('"', '""') + '"'


def _string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def literal(value: str, spark_type: str) -> str:
    """A bound (merge_plan.Bounds: text) as a DataFusion literal of its type."""
    if spark_type in INTEGERS:
        return value
    if spark_type == "date":
        return f"DATE {_string(value)}"
    return _string(value)


def between(bounds: Bounds, alias: str = "t") -> str:
    """The first key column within the bounds (of the table called alias, "" for none)."""
    low, high = (literal(b, bounds.spark_type) for b in (bounds.low, bounds.high))
    column = (f"{alias}." if alias else "") + ident(bounds.column)
    return f"{column} between {low} and {high}"


def on(plan: MergePlan) -> str:
    """The ON condition: every key compared exactly, then the bounds."""
    inexact = [key.target for key in plan.keys if key.form != EXACT]
    if inexact:
        raise ValueError(f"delta-rs compares keys exactly, not {', '.join(inexact)}")
    parts = [f"t.{ident(key.target)} = s.{key.source}" for key in plan.keys]
    if plan.target_flag is not None:
        parts.append(f"t.{ident(plan.target_flag)}")
    if plan.bounds is not None:
        parts.append(between(plan.bounds))
    return " and ".join(parts)


def _set(column: SetColumn) -> str:
    if column.when == ALWAYS:
        return f"s.{column.source}"
    flags = " or ".join(f"s.{flag}" for flag in column.flags)
    return f"case when {flags} then s.{column.source} else t.{ident(column.target)} end"


def updates(plan: MergePlan) -> dict[str, str]:
    """when_matched_update's column -> expression."""
    return {ident(column.target): _set(column) for column in plan.updates}


def inserts(plan: MergePlan) -> dict[str, str]:
    """when_not_matched_insert's column -> expression."""
    return {ident(target): f"s.{source}" for target, source in plan.inserts}


def _condition(condition: SourceIs | None) -> str | None:
    return None if condition is None else f"s.{condition.column} = {_string(condition.value)}"


def _marks(commit: Commit | None) -> Any:
    """A write's commit properties: the commit identity as a ``txn`` action (a rerun finds
    it, as Spark's txnAppId / txnVersion), and its user_metadata as commitInfo.userMetadata
    (the route that wrote it, a batch's tick and appId), as Spark writes them."""
    from deltalake import CommitProperties, Transaction

    if commit is None:
        return None
    recorded = commit.user_metadata
    return CommitProperties(
        app_transactions=[Transaction(commit.app_id, commit.version)],
        custom_metadata=None if recorded is None else {"userMetadata": recorded},
    )


def merge(table: LocalTable, rows: pa.Table, plan: MergePlan, commit: Commit | None) -> None:
    """MERGEs rows (the source, ``s``) into the table (``t``) as the plan says, in one
    commit, marked with commit when given."""
    merger = table.table.merge(
        rows,
        on(plan),
        source_alias="s",
        target_alias="t",
        error_on_type_mismatch=True,
        commit_properties=_marks(commit),
    )
    if plan.soft is not None:
        _soft(merger, plan, plan.soft).execute()
        return
    if plan.delete_when is not None:
        merger = merger.when_matched_delete(_condition(plan.delete_when))
    if plan.updates:
        merger = merger.when_matched_update(updates(plan))
    merger.when_not_matched_insert(inserts(plan), _condition(plan.insert_when)).execute()


def _soft(merger: Any, plan: MergePlan, soft: SoftDeletes) -> Any:
    """The clauses of a plan that marks deleted rows (cdc.targets.merge_plan's docstring, in
    its order), as cdc.targets.delta.spark_sql.soft_clauses renders them."""
    sets = updates(plan)
    flag, at, gone_at = ident(soft.flag), ident(soft.at), f"s.{soft.gone_at}"
    marked = " or ".join(_condition(c) or "" for c in soft.marked_when)
    merger = merger.when_matched_update({**sets, flag: "true", at: gone_at}, f"({marked})")
    if soft.kept_when is not None:
        kept = f"{_condition(soft.kept_when)} and t.{flag}"
        merger = merger.when_matched_update({**sets, at: gone_at}, kept)
    merger = merger.when_matched_update({**sets, flag: "false", at: "null"})
    row = {**inserts(plan), flag: f"s.{soft.gone}", at: gone_at}
    merger = merger.when_not_matched_insert(row, f"s.{soft.keeps}")
    if soft.truncated_at is not None:
        time = f"arrow_cast({int(soft.truncated_at)}, 'Timestamp(Microsecond, Some(\"UTC\"))')"
        merger = merger.when_not_matched_by_source_update({flag: "true", at: time}, f"not t.{flag}")
    return merger


def append(
    table: LocalTable,
    rows: pa.Table,
    schema: list[tuple[str, str]],
    commit: Commit | None = None,
) -> None:
    """Appends rows (columns named and typed as the target's) in one commit, marked with
    commit when given; delta-rs refuses a type that differs from the target's."""
    from deltalake import write_deltalake

    write_deltalake(
        table.table,
        rows.select([n for n, _ in schema]),
        mode="append",
        commit_properties=_marks(commit),
    )


def current_versions(table: LocalTable, bounds: Bounds | None) -> pa.Table:
    """A versioned table's current versions (cdc.targets.scd2), within the bounds when given
    (the files whose statistics lie outside them are not read)."""
    import pyarrow as pa
    from deltalake import QueryBuilder

    where = ident(CURRENT) + (f" and {between(bounds, alias='')}" if bounds else "")
    found = QueryBuilder().register("t", table.table).execute(f"select * from t where {where}")
    return pa.RecordBatchReader.from_stream(found).read_all()


def holds_none_between(table: LocalTable, bounds: Bounds) -> bool:
    """Whether the table holds no row within the bounds (files whose statistics lie outside
    them are not read)."""
    from deltalake import QueryBuilder

    query = f"select 1 from t where {between(bounds, alias='')} limit 1"
    found = QueryBuilder().register("t", table.table).execute(query).read_all()
    return found.num_rows == 0
