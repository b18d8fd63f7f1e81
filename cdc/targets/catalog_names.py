"""Catalog target names and where their files live: plain text rules, importable without
Spark (the configuration checks names with them; cdc.targets.catalog registers them).
"""

from __future__ import annotations

__all__ = [
    "DOCS",
    "FOLDER",
    "SESSION_CATALOG",
    "is_name",
    "location",
    "name_problem",
    "parts",
    "quoted",
]

FOLDER = "_spark_warehouse"  # below target.path: the folders of catalog targets
SESSION_CATALOG = "spark_catalog"
DOCS = "docs/operations.md, Catalog targets"


def is_name(target: str) -> bool:
    """Whether a configured target is a catalog name (it holds a dot and no ``/``) rather than
    a path below target.path."""
    return "." in target and "/" not in target


def parts(name: str) -> list[str]:
    """The parts of a catalog name: [database, table] or [catalog, database, table]."""
    return name.split(".")


def name_problem(name: str) -> str | None:
    """Why a catalog name cannot be a target (None when it can)."""
    found = parts(name)
    if len(found) not in (2, 3):
        return (
            "must be a catalog name of two or three parts (db.table, catalog.db.table),"
            " or a path holding a /"
        )
    if any(not p or p != p.strip() for p in found):
        return "must be a catalog name without empty parts or spaces around them (db.table)"
    return None


def location(base: str, name: str) -> str:
    """The folder of the catalog target name below base (see the module docstring)."""
    *space, table = (p.lower() for p in parts(name))
    folders = [space[0]] if len(space) == 2 else []
    database = space[-1]
    if database != "default" or folders:
        folders.append(f"{database}.db")
    return "/".join([base.rstrip("/"), FOLDER, *folders, table])


def quoted(name: str) -> str:
    """A catalog name as Spark SQL, part by part, backticks doubled."""
    return ".".join("`" + p.replace("`", "``") + "`" for p in parts(name))
