"""A MERGE plan (cdc.targets.merge_plan) as Spark SQL: ``merge into <target> t using <source>
s on ... when ...``, run by cdc.targets.delta.on_spark.merge. Text only, no session: what
the statement says is tested without a JVM, and against delta-rs' rendering of the same
plan (cdc.targets.delta.delta_rs) on a real table.

Identifiers are quoted as Spark SQL's (cdc.targets.table.quote); the fold's internal column
names (cdc.rows) need no quotes. A numeric key kept as its text is compared normalised on
the target's side (``norm_numeric``, the text form of cdc.engines.spark.fold.norm_numeric:
the source's match column is normalised by the fold); a float key by ``=``, which Spark's
joins make -0 equal 0 and NaN equal NaN.
"""

from __future__ import annotations

from cdc.targets.merge_plan import (
    ALWAYS,
    INTEGERS,
    NUMERIC_TEXT,
    Bounds,
    MergePlan,
    SetColumn,
    SoftDeletes,
    SourceIs,
)
from cdc.targets.table import quote

__all__ = [
    "between",
    "clauses",
    "literal",
    "norm_numeric",
    "on",
    "soft_clauses",
    "statement",
    "text",
]


def text(value: str) -> str:
    """Text inside a Spark SQL string literal (backslashes escape in Spark's literals)."""
    return value.replace("\\", "\\\\").replace("'", "\\'")


def literal(value: str, spark_type: str) -> str:
    """A bound (merge_plan.Bounds: text) as a Spark SQL literal of its type; a date as a
    cast of its text, which takes years past 9999 and before 1 too."""
    if spark_type in INTEGERS:
        return value
    if spark_type == "date":
        return f"cast('{text(value)}' as date)"
    return f"'{text(value)}'"


def norm_numeric(expr: str) -> str:
    """PostgreSQL numeric text without trailing fractional zeros, for the target's side of
    a key compared as numeric text (cdc.engines.spark.fold.norm_numeric)."""
    stripped = (
        f"case when {expr} like '%.%' then"
        f" regexp_replace(regexp_replace({expr}, '0+$', ''), '\\\\.$', '') else {expr} end"
    )
    return f"case when {stripped} = '-0' then '0' else {stripped} end"


def between(bounds: Bounds) -> str:
    """The target's first key column within the bounds."""
    low, high = (literal(b, bounds.spark_type) for b in (bounds.low, bounds.high))
    return f"t.{quote(bounds.column)} between {low} and {high}"


def on(plan: MergePlan) -> str:
    """The ON condition: every key as it compares (see the module), then the bounds."""
    parts = []
    for key in plan.keys:
        target = f"t.{quote(key.target)}"
        if key.form == NUMERIC_TEXT:
            target = norm_numeric(target)
        parts.append(f"{target} = s.{key.source}")
    if plan.target_flag is not None:
        parts.append(f"t.{quote(plan.target_flag)}")
    if plan.bounds is not None:
        parts.append(between(plan.bounds))
    return " and ".join(parts)


def _set(column: SetColumn) -> str:
    name = quote(column.target)
    if column.when == ALWAYS:
        return f"{name} = s.{column.source}"
    flags = " or ".join(f"s.{flag}" for flag in column.flags)
    return f"{name} = case when {flags} then s.{column.source} else t.{name} end"


def _condition(condition: SourceIs | None) -> str:
    if condition is None:
        return ""
    return f" and s.{condition.column} = '{text(condition.value)}'"


def clauses(plan: MergePlan) -> str:
    """The WHEN clauses: delete, update, insert, each as the plan says (a plan that marks
    deleted rows: soft_clauses)."""
    if plan.soft is not None:
        return soft_clauses(plan, plan.soft)
    out = []
    if plan.delete_when is not None:
        out.append(f"when matched{_condition(plan.delete_when)} then delete")
    if plan.updates:
        out.append("when matched then update set " + ", ".join(map(_set, plan.updates)))
    names = ", ".join(quote(target) for target, _ in plan.inserts)
    values = ", ".join(f"s.{source}" for _, source in plan.inserts)
    out.append(
        f"when not matched{_condition(plan.insert_when)} then insert ({names}) values ({values})"
    )
    return " ".join(out)


def soft_clauses(plan: MergePlan, soft: SoftDeletes) -> str:
    """The WHEN clauses of a plan that marks deleted rows (cdc.targets.merge_plan's
    docstring, in its order)."""
    sets = [_set(column) for column in plan.updates]
    flag, at, gone_at = quote(soft.flag), quote(soft.at), f"s.{soft.gone_at}"
    marked = " or ".join(f"s.{c.column} = '{text(c.value)}'" for c in soft.marked_when)
    out = [
        f"when matched and ({marked}) then update set "
        + ", ".join([*sets, f"{flag} = true", f"{at} = {gone_at}"])
    ]
    if soft.kept_when is not None:
        out.append(
            f"when matched{_condition(soft.kept_when)} and t.{flag} then update set "
            + ", ".join([*sets, f"{at} = {gone_at}"])
        )
    revived = [*sets, f"{flag} = false", f"{at} = null"]
    out.append("when matched then update set " + ", ".join(revived))
    names = ", ".join([*(quote(target) for target, _ in plan.inserts), flag, at])
    values = ", ".join([*(f"s.{source}" for _, source in plan.inserts), f"s.{soft.gone}", gone_at])
    out.append(f"when not matched and s.{soft.keeps} then insert ({names}) values ({values})")
    if soft.truncated_at is not None:
        out.append(
            f"when not matched by source and not t.{flag} then update set {flag} = true,"
            f" {at} = timestamp_micros({int(soft.truncated_at)})"
        )
    return " ".join(out)


def statement(plan: MergePlan, target: str, source: str) -> str:
    """The MERGE of source (a view) into target (a table's SQL name)."""
    return f"merge into {target} t using {source} s on {on(plan)} {clauses(plan)}"
