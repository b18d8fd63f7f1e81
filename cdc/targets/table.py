"""Where a target table lives, and the identity its idempotent writes carry: plain values,
importable without Spark.

- ``TableRef.of(base, name)`` is the one place that decides where a configured target lives:
  a path below the pipeline's ``target.path``; for a catalog name (``lake.orders``: a dot and
  no slash) the folder cdc.targets.catalog derives from it, the name kept as ``name`` (the
  catalog registers the table under it). Every reader and writer of a target takes the
  TableRef and reads or writes its path; ``sql_name`` is how Spark SQL names it.
- ``Commit`` is Delta's idempotent-write identity (txnAppId, txnVersion): the appId is
  ``queue@incarnation/consumer/target`` (``queue/consumer/target`` before queue incarnations,
  or when the engine cannot tell them), the version the batch's tick id. A write marked with
  a Commit is skipped when that appId already committed that version. Work that is not a
  batch (snapshot, resync, maintenance, queries) takes a plain TableRef and no Commit.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cdc.targets import catalog

if TYPE_CHECKING:
    from cdc.config import Source

__all__ = ["Commit", "TableRef", "app_id", "legacy_app_id", "quote"]


def quote(name: str) -> str:
    """A column or table name as a Spark SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


@dataclass(frozen=True)
class TableRef:
    """A target table: a path (it holds a ``/``) or, made by hand only, a bare catalog name
    (``db.table``); a configured catalog target is a path with its catalog name."""

    location: str
    name: str = ""  # the catalog name of a catalog target (db.table), "" for a path target

    @classmethod
    def of(cls, base: str, name: str) -> TableRef:
        """The table of a configured target name: a path below base, or for a catalog name
        (``db.table``) the folder cdc.targets.catalog gives it, with the name."""
        if catalog.is_name(name):
            return cls(catalog.location(base, name), name)
        return cls(str(Path(base) / name))

    @property
    def is_path(self) -> bool:
        return "/" in self.location

    @property
    def sql_name(self) -> str:
        if self.is_path:
            return "delta.`" + self.location.replace("`", "``") + "`"
        return ".".join(quote(p) for p in self.location.split("."))


def app_id(source: Source, incarnation: int | None, target: str) -> str:
    """The idempotent-write appId of a target: queue (and its incarnation), consumer and
    target. Without an incarnation, the id of earlier versions."""
    if incarnation is None:
        return legacy_app_id(source, target)
    return f"{source.queue}@{incarnation}/{source.consumer}/{target}"


def legacy_app_id(source: Source, target: str) -> str:
    """The appId written before queue incarnations were part of it."""
    return f"{source.queue}/{source.consumer}/{target}"


@dataclass(frozen=True)
class Commit:
    """The idempotent-write identity of one batch's write to one target."""

    app_id: str
    version: int  # the batch's tick id

    @classmethod
    def of(cls, source: Source, incarnation: int | None, target: str, tick_id: int) -> Commit:
        return cls(app_id(source, incarnation, target), tick_id)
