"""Table names and table patterns, as the pipeline file and the command line write them.

- ``parse_table_name("public.orders")`` splits ``schema.table``: a part in double quotes is
  taken as written (``""`` inside is one ``"``; it may hold dots), a bare part too (no case
  folding: events name tables as the catalog spells them).
- A pattern is a table name split the same way, each part a GLOB matched separately against
  the catalog's name (cdc.globs, the one matcher, which the SQL capture rules mirror): ``*``
  is any run of characters (also none), ``?`` exactly one character, every other character
  itself (``.``, ``_``, ``%``, ``[``, ``\\`` included). Matching is case-sensitive and covers
  the whole name. A part is a pattern when it holds ``*`` or ``?``, quoted or not: quotes only
  decide where a part ends.

A rule (``TableRule``, a ``[[tables]]`` entry whose source is a pattern) renders each matched
table's target from a template holding ``{schema}`` and ``{table}``; a rendered name obeys
the rules of a written one (``target_problem``: below target.path).

Pure functions, no database.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from pathlib import Path

from cdc.globs import is_pattern
from cdc.globs import matches as glob_matches
from cdc.targets import catalog_names as catalog
from cdc.targets.options import TableOptions

__all__ = [
    "TablePattern",
    "TableRule",
    "glob_matches",
    "is_catalog_name",
    "is_pattern",
    "parse_table_name",
    "target_problem",
    "template_problem",
]


def parse_table_name(text: str) -> tuple[str, str]:
    """(schema, table) of a ``schema.table`` name. A part in double quotes is taken as written
    (``""`` inside stands for one ``"``), so it may hold dots, spaces, any character; a bare
    part is taken as written too (no case folding: the events name tables as the catalog
    spells them) and may hold anything but a dot or a double quote. ValueError otherwise."""
    parts: list[str] = []
    i, n = 0, len(text)
    while True:
        if i < n and text[i] == '"':
            j, chunk = i + 1, []
            while True:
                k = text.find('"', j)
                if k < 0:
                    raise ValueError("a double quote is not closed")
                chunk.append(text[j:k])
                if text.startswith('"', k + 1):
                    chunk.append('"')
                    j = k + 2
                    continue
                i = k + 1
                break
            part = "".join(chunk)
        else:
            k = text.find(".", i)
            k = n if k < 0 else k
            part = text[i:k]
            if '"' in part:
                raise ValueError("a double quote inside a bare name: quote the whole part")
            i = k
        if not part:
            raise ValueError("an empty name")
        parts.append(part)
        if i == n:
            break
        if text[i] != ".":
            raise ValueError("a quoted name must be followed by a dot or nothing")
        i += 1
    if len(parts) != 2:
        raise ValueError(
            'want exactly schema.table (quote a name holding a dot: public."my.table")'
        )
    return parts[0], parts[1]


@dataclass(frozen=True)
class TablePattern:
    """A ``schema.table`` glob: each part matched on its own (a bare name matches itself)."""

    schema: str
    table: str

    @classmethod
    def parse(cls, text: str) -> TablePattern:
        """The pattern of a ``schema.table`` glob written like a table name; ValueError when
        it is not one."""
        return cls(*parse_table_name(text))

    @property
    def is_pattern(self) -> bool:
        return is_pattern(self.schema) or is_pattern(self.table)

    def matches(self, schema: str, table: str) -> bool:
        return glob_matches(self.schema, schema) and glob_matches(self.table, table)

    def __str__(self) -> str:
        return f"{_written(self.schema)}.{_written(self.table)}"


def _written(part: str) -> str:
    """A name part as it is written back: quoted when it holds a dot or a double quote."""
    if "." in part or '"' in part:
        return '"' + part.replace('"', '""') + '"'
    return part


PLACEHOLDERS = ("schema", "table")  # of a rule's target template


@dataclass(frozen=True)
class TableRule:
    """A ``[[tables]]`` entry whose source is a pattern (``public.*``): every catalog table it
    matches and no exclude pattern matches is replicated like an explicit entry, into the
    target its template renders. Checked by cdc.config.parse; resolved against the catalog
    by cdc.pipeline.tables."""

    schema_glob: str
    table_glob: str
    exclude: tuple[TablePattern, ...] = ()
    target: str = "{table}"  # a template: {schema} and {table}, {{ and }} for braces
    mode: str = "mirror"
    where: str = ""  # the entry, as messages name it: tables[2]
    options: TableOptions = field(default_factory=TableOptions)  # given to every table it produces

    @property
    def pattern(self) -> TablePattern:
        return TablePattern(self.schema_glob, self.table_glob)

    @property
    def label(self) -> str:
        """The rule as messages name it: ``tables[2] (public.*)``."""
        return f"{self.where} ({self.pattern})" if self.where else str(self.pattern)

    def matches(self, schema: str, table: str) -> bool:
        """Whether the rule takes this catalog table: its pattern matches, no exclude does."""
        return self.pattern.matches(schema, table) and not any(
            p.matches(schema, table) for p in self.exclude
        )

    def render(self, schema: str, table: str) -> str:
        """The target name of a matched table (the template with its names filled in)."""
        return self.target.format(schema=schema, table=table)


def template_problem(template: str) -> str | None:
    """What is wrong with a target template (None when nothing is): it knows {schema} and
    {table} only, must hold {table}, and renders a name below target.path."""
    try:
        fields = [f for f in string.Formatter().parse(template) if f[1] is not None]
    except ValueError as exc:
        return f"is not a template: {exc} (a literal brace is written {{{{ or }}}})"
    for _, name, spec, conversion in fields:
        if name not in PLACEHOLDERS or spec or conversion:
            written = name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "")
            return (
                f"has an unknown placeholder {{{written}}}"
                " (a template knows {schema} and {table})"
            )
    if "table" not in {f[1] for f in fields}:
        return (
            "must hold {table}: each matched table needs a target of its own"
            ' (for example "{table}" or "{schema}_{table}")'
        )
    if target_problem(template.format(schema="s", table="t")):
        return "renders names outside target.path: a target is a path below it (or db.table)"
    return None


def target_problem(name: str) -> str | None:
    """Why a name cannot be a target (None when it can): it must stay below target.path."""
    if name.startswith("/") or ".." in Path(name).parts:
        return "must be a path below target.path"
    return catalog.name_problem(name) if catalog.is_name(name) else None


def is_catalog_name(name: str) -> bool:
    """Whether a target name is a catalog table (``db.table``) rather than a path below
    target.path (cdc.targets.catalog decides)."""
    return catalog.is_name(name)
