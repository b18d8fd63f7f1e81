"""The targets a pipeline keeps beside its tables (the quarantine, the failing marks, the
replayed events, the snapshots' progress), claimed before any table's, and the message when a
target meets one claimed before. Targets are compared as they resolve
(cdc.targets.table.TargetClaims): ``default.Orders`` and ``default.orders``, ``a/b`` and
``a//b/`` are one table."""

from __future__ import annotations

from cdc.targets import catalog_names as catalog
from cdc.targets.table import Clash, TargetClaims

# the targets kept beside the quarantine, by the suffix of their names
RESERVED_SUFFIXES = {
    "_failing": "the failing marks of the tables",
    "_resolved": "the quarantine's replayed and discarded events",
    "_snapshots": "the progress of the snapshots",
}
QUARANTINE = "target.quarantine"  # what the quarantine's target holds, for messages


def reserved_claims(quarantine: str, spark: tuple[tuple[str, str], ...]) -> TargetClaims:
    """The targets kept beside the tables (the quarantine and the tables of RESERVED_SUFFIXES)
    claimed, each by what it holds: a table's target that meets one of them, or another
    table's, is refused (cdc.targets.table.TargetClaims). A two-part catalog name is in the
    catalog of the [spark] settings' spark.sql.defaultCatalog, else Spark's session catalog."""
    default_catalog = dict(spark).get("spark.sql.defaultCatalog", catalog.SESSION_CATALOG)
    claims = TargetClaims(default_catalog)
    claims.claim(quarantine, QUARANTINE)
    for suffix, what in RESERVED_SUFFIXES.items():
        claims.claim(f"{quarantine}{suffix}", what)
    return claims


def clash_text(target: str, who: str, clash: Clash) -> str:
    """Why who's target meets a target claimed before, naming both (no fix)."""
    if clash.owner == QUARANTINE or clash.owner in RESERVED_SUFFIXES.values():
        same = "" if clash.target == target else f" ({clash.target!r}: they are {clash.how})"
        return f"{who} would be replicated into {target!r}, which holds {clash.owner}{same}"
    if clash.target == target:
        return f"target {target!r} is the target of both {clash.owner} and {who}"
    return f"the targets {clash.target!r} of {clash.owner} and {target!r} of {who} are {clash.how}"
