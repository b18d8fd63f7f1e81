"""Where a target table lives, and the identity its idempotent writes carry: plain values,
importable without Spark.

- ``TableRef.of(base, name)`` is the one place that decides where a configured target lives:
  a path below the pipeline's ``target.path``; for a catalog name (``lake.orders``: a dot and
  no slash) the folder cdc.targets.catalog derives from it, the name kept as ``name`` (the
  catalog registers the table under it). Every reader and writer of a target takes the
  TableRef and reads or writes its path; ``sql_name`` is how Spark SQL names it.
- ``Place`` is what a configured target resolves to (its folder, its catalog table), and
  ``TargetClaims`` finds two targets that are different strings but one table: the same
  catalog table (Spark's identifiers ignore case), the same folder, or one folder inside
  another's.
- ``Commit`` is Delta's idempotent-write identity (txnAppId, txnVersion): the appId is
  ``queue@incarnation/consumer/target`` (``queue/consumer/target`` before queue incarnations,
  or when the engine cannot tell them), the version the batch's tick id. A write marked with
  a Commit is skipped when that appId already committed that version. Work that is not a
  batch (snapshot, resync, maintenance, queries) takes a plain TableRef and no Commit.
  A batch's Commit (``Commit.of``) also records its tick and appId in the commit's
  commitInfo.userMetadata (``cdc.tick``, ``cdc.app``, beside the route), so that a table's
  history maps ticks to versions for any reader of the log (cdc.ops.at_tick).
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from cdc.targets import catalog_names as catalog

if TYPE_CHECKING:
    from cdc.config import Source

__all__ = [
    "APP_KEY",
    "TICK_KEY",
    "Clash",
    "Commit",
    "Place",
    "TableRef",
    "TargetClaims",
    "app_id",
    "legacy_app_id",
    "quote",
]


# the keys of commitInfo.userMetadata that name a batch's tick and appId (Commit.user_metadata)
TICK_KEY, APP_KEY = "cdc.tick", "cdc.app"


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
        if "://" in base:  # an object store's URL: a path joined as a URL's, not a file's
            return cls(base.rstrip("/") + "/" + name)
        return cls(str(Path(base) / name))

    @property
    def is_path(self) -> bool:
        return "/" in self.location

    @property
    def sql_name(self) -> str:
        if self.is_path:
            return "delta.`" + self.location.replace("`", "``") + "`"
        return ".".join(quote(p) for p in self.location.split("."))


RESOLVED = "as Spark resolves names (case ignored; db.table in the default catalog)"
NESTED = "nested: one's folder holds the other's"


@dataclass(frozen=True)
class Place:
    """Where a configured target resolves: its folder below target.path, as parts (``a//b/``,
    ``./a/b`` and ``a/b`` are one folder; case kept, as file systems and object stores keep
    it), and for a catalog name the table a catalog resolves it to: (catalog, database,
    table) in lower case, as Spark's identifiers ignore case (spark.sql.caseSensitive is off
    by default, and a metastore keeps names in lower case), a two-part name completed with
    the default catalog."""

    folder: tuple[str, ...]
    table: tuple[str, str, str] | None = None

    @classmethod
    def of(cls, name: str, default_catalog: str = catalog.SESSION_CATALOG) -> Place:
        if not catalog.is_name(name):
            return cls(tuple(p for p in posixpath.normpath(name).split("/") if p not in ("", ".")))
        folder = tuple(p for p in catalog.location("", name).split("/") if p)
        found = [p.lower() for p in catalog.parts(name)]
        if len(found) == 2:
            found.insert(0, default_catalog.lower())
        return cls(folder, (found[0], found[1], found[2]))


@dataclass(frozen=True)
class Clash:
    """A target that meets one claimed before: who claimed it, with which target, and how
    the two meet (``how``: a clause after "are", or after the new target's name)."""

    owner: str
    target: str
    how: str


@dataclass
class TargetClaims:
    """The targets claimed so far, each by its owner (a label for messages), indexed by the
    places they resolve to. ``claim`` records a target, or returns the Clash with the first
    owner of its catalog table, of its folder, or of a folder around or inside it (a Delta
    table inside another's folder loses its files to the other's VACUUM)."""

    default_catalog: str = catalog.SESSION_CATALOG
    # place -> (owner, target): by catalog table, by folder, by each folder around a claimed one
    _tables: dict[tuple[str, str, str], tuple[str, str]] = field(default_factory=dict, init=False)
    _folders: dict[tuple[str, ...], tuple[str, str]] = field(default_factory=dict, init=False)
    _around: dict[tuple[str, ...], tuple[str, str]] = field(default_factory=dict, init=False)

    def clash(self, target: str) -> Clash | None:
        """The claim this target would meet (None when it meets none)."""
        place = Place.of(target, self.default_catalog)
        if place.table is not None and place.table in self._tables:
            name = ".".join(place.table)
            return Clash(*self._tables[place.table], f"one catalog table, {name}, {RESOLVED}")
        if place.folder in self._folders:
            folder = "/".join(place.folder)
            return Clash(*self._folders[place.folder], f"one folder below target.path, {folder}")
        for n in range(len(place.folder)):
            if place.folder[:n] in self._folders:
                return Clash(*self._folders[place.folder[:n]], NESTED)
        if place.folder in self._around:
            return Clash(*self._around[place.folder], NESTED)
        return None

    def claim(self, target: str, owner: str) -> Clash | None:
        """Records owner's target, or returns the Clash it meets (and records nothing)."""
        found = self.clash(target)
        if found is not None:
            return found
        place = Place.of(target, self.default_catalog)
        if place.table is not None:
            self._tables[place.table] = (owner, target)
        self._folders[place.folder] = (owner, target)
        for n in range(len(place.folder)):
            self._around.setdefault(place.folder[:n], (owner, target))
        return None


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
    # what the commit records of how it was written (commitInfo.userMetadata): the route
    # of cdc.engines.planner, so that the table's history says which engine wrote it
    metadata: str | None = None
    # a batch's commit: its version is the batch's tick, recorded with the appId in the
    # userMetadata (a replay's run number, say, is not a tick)
    tick: bool = False

    @classmethod
    def of(cls, source: Source, incarnation: int | None, target: str, tick_id: int) -> Commit:
        return cls(app_id(source, incarnation, target), tick_id, tick=True)

    @property
    def user_metadata(self) -> str | None:
        """What the commit records as commitInfo.userMetadata: the metadata (a JSON object:
        the route) and, for a batch's commit, its tick and appId (TICK_KEY, APP_KEY); None
        when there is neither."""
        if not self.tick:
            return self.metadata
        found = json.loads(self.metadata) if self.metadata else {}
        return json.dumps({**found, TICK_KEY: self.version, APP_KEY: self.app_id})
