"""Catalog targets: a target named ``db.table`` (or ``catalog.db.table``) is a Delta table at a
folder this module derives from the name under target.path, registered in Spark's catalog
under that name.

Every command resolves a target the same way (``cdc.targets.table.TableRef.of``, which asks
``location`` here): a catalog target is read and written by its path, like any other target,
so that the drain's idempotent writes, ``cdc status`` (delta-rs, no JVM), snapshots, verify and
maintenance need nothing else. The name is for queries (``cdc sql``, a notebook, a BI tool):

- **no metastore configured** (Spark's own in-memory catalog, the local default): the names
  live as long as a session. A session that runs queries (``cdc sql``) registers every
  catalog target that exists when it starts (``register``: ``CREATE DATABASE IF NOT
  EXISTS``, ``CREATE TABLE name USING delta LOCATION path``); the other commands work by
  path and register only the tables they create (``register_table``, from
  cdc.targets.delta_table.ensure), as registering costs a read of each table's log (about
  half a second a table, measured on a busy 2-core machine). Nothing is shared between
  processes, so a ``--follow`` drain never locks out ``cdc sql`` (an embedded Derby
  metastore admits one JVM at a time).
- **a metastore configured** (a Hive metastore, ``spark.sql.catalogImplementation = "hive"``;
  a Unity Catalog or another catalog plugin named by ``catalog.db.table`` or
  ``spark.sql.defaultCatalog``; all in the pipeline file's ``[spark]`` section or the
  cluster's defaults): every command's session checks and registers the names when it
  starts, so they stay right in every catalog that sees them; a name the metastore already
  holds at another location is an error before any work, never taken over.

Where a catalog target's files live (lower case, as Spark lays out its warehouse):
``<target.path>/_spark_warehouse/<table>`` for the ``default`` database,
``<target.path>/_spark_warehouse/<db>.db/<table>`` for another, and
``<target.path>/_spark_warehouse/<catalog>/<db>.db/<table>`` for a three-part name.

The pure parts (``is_name``, ``name_problem``, ``location``) are in
cdc.targets.catalog_names, which imports without Spark (the configuration checks names).
"""

from __future__ import annotations

import logging
import os
import urllib.parse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cdc.errors import CdcError
from cdc.targets.catalog_names import (
    DOCS,
    FOLDER,
    SESSION_CATALOG,
    is_name,
    location,
    name_problem,
    parts,
    quoted,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cdc.config import Pipeline
    from cdc.targets.table import TableRef

__all__ = [
    "DOCS",
    "FOLDER",
    "SESSION_CATALOG",
    "CatalogError",
    "is_name",
    "location",
    "name_problem",
    "names",
    "parts",
    "persistent",
    "quoted",
    "register",
    "register_table",
    "registered_location",
]

log = logging.getLogger(__name__)


class CatalogError(CdcError):
    """A catalog target's name cannot be registered (its catalog is not configured or not
    reachable, or it holds the name elsewhere): the run stops, nothing is marked failing."""


def _text(text: str) -> str:
    """Text inside a Spark SQL string literal."""
    return text.replace("\\", "\\\\").replace("'", "\\'")


def _qualified(path: str) -> str:
    """A location as one string to compare: local paths absolute, without ``file:``."""
    if path.startswith("file:"):
        path = urllib.parse.urlparse(path).path
    if "://" in path:
        return path.rstrip("/")
    return os.path.normpath(os.path.abspath(path))


def names(pipeline: Pipeline) -> list[str]:
    """Every target of the pipeline that is a catalog name (its tables', the quarantine's, the
    failing marks' and the snapshot progress')."""
    from cdc.targets import snapshots

    every = [t.target for t in pipeline.tables]
    every += [
        pipeline.quarantine,
        pipeline.failing_table,
        snapshots.table_name(pipeline.quarantine),
    ]
    return [n for n in every if is_name(n)]


def persistent(spark: SparkSession, name: str = "default.t") -> bool:
    """Whether the catalog that holds name (by default, any db.table) outlives the session (a
    metastore, a catalog plugin), rather than being Spark's in-memory catalog."""
    found = parts(name)
    default = spark.conf.get("spark.sql.defaultCatalog", SESSION_CATALOG)
    if (found[0] if len(found) == 3 else default) != SESSION_CATALOG:
        return True
    return spark.conf.get("spark.sql.catalogImplementation", "in-memory") != "in-memory"


def registered_location(spark: SparkSession, name: str) -> tuple[str, str] | None:
    """The (location, type) a catalog holds for name (type: EXTERNAL, MANAGED, VIEW...), or
    None when it holds nothing under it."""
    if not spark.catalog.tableExists(name):
        return None
    rows = spark.sql(f"describe table extended {quoted(name)}").collect()
    info = {str(r[0]).strip(): str(r[1] or "").strip() for r in rows}
    return info.get("Location", ""), info.get("Type", "").upper()


def register_table(spark: SparkSession, ref: TableRef) -> None:
    """Registers the Delta table at ref.location under ref.name (its database created when
    missing). A session-only registration of the name elsewhere (a session that served another
    pipeline) is replaced; a persistent one is an error: CatalogError."""
    _guard(_register, spark, ref.name, ref.location)


def _guard(step: Callable[..., None], spark: SparkSession, *args: Any) -> None:
    """Runs a catalog step; Spark's own error as a one-line CatalogError saying what to do."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    try:
        step(spark, *args)
    except (PySparkException, Py4JJavaError) as exc:
        name = args[0] if isinstance(args[0], str) else args[0].name
        raise CatalogError(_failure(name, exc)) from None


def _register(spark: SparkSession, name: str, path: str) -> None:
    found = parts(name)
    database = ".".join(quoted(p) for p in found[:-1])
    if not spark.catalog.databaseExists(".".join(found[:-1])):
        log.info("%s: creating database %s", name, ".".join(found[:-1]))
        spark.sql(f"create database if not exists {database}")
    wanted = _qualified(path)
    current = registered_location(spark, name)
    if current is not None:
        where, kind = current
        if where and _qualified(where) == wanted:
            return
        if persistent(spark, name) or kind != "EXTERNAL":
            raise CatalogError(_taken(name, kind, where, wanted))
        spark.sql(f"drop table {quoted(name)}")  # session-only, external: its files stay
    spark.sql(f"create table if not exists {quoted(name)} using delta location '{_text(wanted)}'")
    log.debug("%s: registered at %s", name, wanted)


def _failure(name: str, exc: BaseException) -> str:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if "CATALOG_NOT_FOUND" in first or "CatalogNotFound" in first:
        catalog = parts(name)[0]
        return (
            f"catalog target {name}: Spark has no catalog {catalog!r} ({first}): configure it in"
            f' the pipeline\'s [spark] section ("spark.sql.catalog.{catalog}" = ...), see {DOCS}'
        )
    return (
        f"catalog target {name} could not be registered: {first}: check the catalog settings"
        f" in the pipeline's [spark] section ({DOCS})"
    )


def register(spark: SparkSession, pipeline: Pipeline, *, queries: bool = False) -> list[str]:
    """The session-side hook, run once a pipeline's session exists: registers every catalog
    target whose table exists, and checks that a persistent catalog holds no other table
    under the name of one that does not exist yet; the names registered.

    With Spark's in-memory catalog the names would live only as long as this session, and
    only a query by name needs them: unless the session is to run queries (``cdc sql``),
    nothing is done (registering costs a read of each table's log; the commands work by
    path)."""
    from cdc.targets import delta_table

    if not queries and not any(persistent(spark, n) for n in names(pipeline)):
        return []
    done = []
    for name in names(pipeline):
        ref = pipeline.table(name)
        head = delta_table.local_log_head(ref)
        if head == -1 or (head is None and not delta_table.exists(spark, ref)):
            _guard(check_free, spark, ref)  # the drain registers it when it creates it
            continue
        register_table(spark, ref)
        done.append(name)
    return done


def check_free(spark: SparkSession, ref: TableRef) -> None:
    """CatalogError when a persistent catalog holds ref.name at another location (checked
    before any work, so that the drain does not create a table it cannot name)."""
    current = registered_location(spark, ref.name)
    if current is None or not persistent(spark, ref.name):
        return
    where, kind = current
    if not where or _qualified(where) != _qualified(ref.location):
        raise CatalogError(_taken(ref.name, kind, where, _qualified(ref.location)))


def _taken(name: str, kind: str, where: str, wanted: str) -> str:
    return (
        f"catalog target {name}: the catalog already holds {name} ({kind.lower() or 'a'}"
        f" table at {where or 'no location'}), not the pipeline's table at {wanted}:"
        " rename the target, or drop that table if it is not needed"
    )
