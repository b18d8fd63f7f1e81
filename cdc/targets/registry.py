"""The target kinds by mode name (a table's ``mode`` in the pipeline file): importable without
Spark, so that the configuration checks mode names with no JVM.

A kind is a class in its own module (cdc.targets.mirror, cdc.targets.history) implementing
cdc.targets.kind.TargetKind; its entry here names the class, imported when first used, and
says whether its target holds the source's rows by key (then ``cdc snapshot``, ``cdc
verify`` and ``cdc resync`` load or compare it; a target holding events cannot be re-read
from the source). A new kind is one module and one entry in KINDS.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from cdc.targets.options import TableOptions

if TYPE_CHECKING:
    from cdc.targets.kind import TargetKind

__all__ = ["KINDS", "MODES", "Mode", "holds_rows", "kind"]


@dataclass(frozen=True)
class Mode:
    name: str
    kind: str  # "module:Class" of its TargetKind
    holds_rows: bool  # the source's rows by key: snapshots load it, verify compares it


KINDS: dict[str, Mode] = {
    m.name: m
    for m in (
        Mode("mirror", "cdc.targets.mirror:Mirror", holds_rows=True),
        Mode("history", "cdc.targets.history:History", holds_rows=False),
        Mode("scd2", "cdc.targets.scd2:Scd2", holds_rows=True),
    )
}
MODES: tuple[str, ...] = tuple(KINDS)


def holds_rows(mode: str) -> bool:
    return KINDS[mode].holds_rows


@cache
def kind(mode: str, options: TableOptions | None = None) -> TargetKind:
    """The target kind of a mode name, applying a table's options (none: the defaults)."""
    entry = KINDS[mode]
    module, _, name = entry.kind.partition(":")
    return getattr(importlib.import_module(module), name)(entry, options or TableOptions())
