"""What a target keeps of its masking (cdc.targets.masking): the target property
``cdc.masking``, the entry's exclude_columns and mask and which salt hashed its values, so
that rows are never written under other rules than the rows it holds.

``follow`` runs before a batch, a replay or a snapshot chunk writes a target: a target that
holds rows written under other rules (or none recorded, for a target written before it had
any) is refused with ``TableUnappliable`` (the drain marks the table failing; ``cdc resync``
rewrites it under the new rules); an empty target gets the rules recorded. ``record`` is the
resync's, after it replaced the rows.
"""

from __future__ import annotations

import json

from pyspark.sql import SparkSession

from cdc.errors import TableUnappliable
from cdc.targets import delta_table
from cdc.targets.masking import SALT_ENV, Masking
from cdc.targets.table import TableRef

__all__ = ["PROPERTY", "follow", "record"]

PROPERTY = "cdc.masking"


def _describe(recorded: str | None) -> str:
    if not recorded:
        return "no exclude_columns and no mask"
    body = json.loads(recorded)
    parts = []
    if body.get("exclude"):
        parts.append(f"exclude_columns = {body['exclude']}")
    if body.get("mask"):
        parts.append("mask = {" + ", ".join(f"{g} = {m!r}" for g, m in body["mask"]) + "}")
    return ", ".join(parts) or "no exclude_columns and no mask"


def follow(
    spark: SparkSession,
    ref: TableRef,
    table: str,
    masking: Masking,
    props: dict[str, str] | None = None,
) -> None:
    """Refuses a target holding rows written under other rules; records the rules in an
    empty one (see the module). props: the target's properties, when read already."""
    props = delta_table.properties(spark, ref) if props is None else props
    recorded = props.get(PROPERTY) or None
    wanted = masking.record() if masking.active else None
    if recorded == wanted:
        return
    if bool(delta_table.read(spark, ref).limit(1).count()):
        old = json.loads(recorded) if recorded else {}
        new = json.loads(wanted) if wanted else {}
        if {**old, "salt": None} == {**new, "salt": None}:
            why = (
                f"its rows were masked with another salt than ${SALT_ENV} holds now: set the"
                " salt they were masked with, or resync the table (cdc resync) to mask them"
                " all with this one"
            )
        else:
            why = (
                f"its rows were written with {_describe(recorded)}, and the pipeline file now"
                f" gives it {_describe(wanted)}: resync the table (cdc resync) to rewrite"
                " them under the new rules, or write it to a new target"
            )
        raise TableUnappliable(table, why)
    _set(spark, ref, wanted, recorded)


def record(spark: SparkSession, ref: TableRef, masking: Masking) -> None:
    """Records the rules of rows just written in place of all the target held."""
    props = delta_table.properties(spark, ref)
    wanted = masking.record() if masking.active else None
    _set(spark, ref, wanted, props.get(PROPERTY) or None)


def _set(spark: SparkSession, ref: TableRef, wanted: str | None, recorded: str | None) -> None:
    if wanted == recorded:
        return
    if wanted is None:
        delta_table.unset_property(spark, ref, PROPERTY)
    else:
        delta_table.set_properties(spark, ref, {PROPERTY: wanted})
