"""The pipeline's tables: its explicit ``[[tables]]`` entries and the catalog tables its rules
(pattern entries, cdc.names.TableRule) match.

Invariants of a resolution (``resolve``, pure):
- explicit entries come first, as written; a table listed explicitly is never produced by a
  rule (an explicit entry overrides every rule that matches it);
- then each rule, in file order, adds every catalog table it matches (excludes left out), in
  catalog order, with its own mode and the target its template renders; two rules matching
  one table both add it (one source may feed several targets);
- every table a target resolves to belongs to one entry, compared as the targets resolve
  (cdc.targets.table.TargetClaims: catalog names as Spark resolves them, case ignored; paths
  by their folders, one inside another's included), the quarantine's and the failing marks'
  tables reserved. Explicit entries were checked by the configuration (config.parse). A
  table a rule matched whose target would be a table already claimed, or whose rendered
  target is not one (out of target.path, or of another kind than its template's), is
  *refused*, never onboarded into another source's table: it leaves the resolution with the
  reason (``Pipeline.refused``, naming both sources and the fix), its events go to the
  quarantine, and every other table goes on. Claims are made explicit entries first, then
  the entries of the last resolution (``kept``: a table created later never takes a target
  from one already replicated), then in the catalog's order (cdc.pg.catalog lists tables in
  the order they were created: the older table keeps the target after a restart too);
- two tables whose events would carry the same name (``"a.b".c`` and ``a."b.c"``) cannot be
  told apart by the drain: a ConfigError when a rule produced one of them;
- a rule matching no table is a warning naming it, never an error.

``TableResolver`` re-lists the catalog with one query (cdc.pg.catalog) each time it is asked
and resolves again only when the list changed, keeping the targets of its last resolution;
without rules it asks nothing.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

import psycopg

from cdc.config import Pipeline, Refused, TableMap, clash_text
from cdc.errors import ConfigError
from cdc.names import TableRule, is_catalog_name, target_problem
from cdc.pg import catalog as pg_catalog

__all__ = ["Resolution", "TableResolver", "resolve", "resolved"]

log = logging.getLogger("cdc")

SUGGESTED = '"{schema}_{table}"'  # the template that keeps tables of several schemas apart


@dataclass(frozen=True)
class Resolution:
    """A pipeline resolved against a catalog: ``pipeline.tables`` holds the explicit entries
    and every table a rule matched; ``warnings`` the rules that matched nothing."""

    pipeline: Pipeline
    warnings: list[str] = field(default_factory=list)

    @property
    def matched(self) -> tuple[TableMap, ...]:
        """The entries the rules produced."""
        return tuple(t for t in self.pipeline.tables if t.rule)


def _origin(table: TableMap, rules: dict[str, TableRule]) -> str:
    """Where an entry comes from, for a message."""
    if not table.rule:
        return f"{table.source} (listed explicitly)"
    rule = rules.get(table.rule)
    return f"{table.source} (matched by rule {rule.label if rule else table.rule})"


def _target_problem(rule: TableRule, schema: str, table: str, name: str) -> str | None:
    """Why the target a rule rendered for a table cannot be one (None when it can)."""
    problem = target_problem(name)
    if problem is None and is_catalog_name(name) != is_catalog_name(rule.render("s", "t")):
        kind = "a catalog name" if is_catalog_name(name) else "a path"
        problem = f"would be {kind} unlike the template's other targets (its name holds a dot or /)"
    if problem:
        return (
            f"table {schema}.{table} matched by rule {rule.label} gets target {name!r}, which"
            f" {problem}: list the table explicitly with a target, or exclude it"
        )
    return None


def resolve(
    pipeline: Pipeline, catalog: Iterable[tuple[str, str]], kept: Collection[TableMap] = ()
) -> Resolution:
    """The pipeline with its rules applied to these catalog tables, given in the order they
    were created; ``kept``: the entries of the last resolution, which keep their targets
    (see the module doc)."""
    explicit = tuple(t for t in pipeline.tables if not t.rule)
    listed = {(t.schema, t.name) for t in explicit}
    created = {name: n for n, name in enumerate(dict.fromkeys(catalog))}
    names = sorted(created)
    rules = {r.where: r for r in pipeline.rules}
    added: list[TableMap] = []
    refused: list[Refused] = []
    warnings: list[str] = []
    for rule in pipeline.rules:
        hits = [(s, t) for s, t in names if rule.matches(s, t)]
        if not hits:
            but = " (after its exclude patterns)" if rule.exclude else ""
            warnings.append(f"rule {rule.label} matches no table{but}")
        for schema, table in hits:
            if (schema, table) in listed:
                continue
            source, target = f"{schema}.{table}", rule.render(schema, table)
            problem = _target_problem(rule, schema, table, target)
            if problem:
                refused.append(Refused(source, target, rule.where, problem))
                continue
            added.append(
                TableMap(
                    source, target, rule.mode, schema, table, rule=rule.where, options=rule.options
                )
            )
    claims = pipeline.claims()
    for t in explicit:
        clash = claims.claim(t.target, _origin(t, rules))
        if clash is not None:
            raise ConfigError(f"{clash_text(t.target, _origin(t, rules), clash)}: {FIX}")
    order = sorted(added, key=lambda t: (t not in kept, created[(t.schema, t.name)]))
    for t in order:
        clash = claims.claim(t.target, _origin(t, rules))
        if clash is not None:
            reason = f"{clash_text(t.target, _origin(t, rules), clash)}: {FIX}"
            refused.append(Refused(t.source, t.target, t.rule, reason))
    gone = {(r.source, r.target, r.rule) for r in refused}
    tables = explicit + tuple(t for t in added if (t.source, t.target, t.rule) not in gone)
    _check(tables, rules)
    pipeline = dataclasses.replace(pipeline, tables=tables, refused=tuple(refused))
    return Resolution(pipeline, warnings)


# the fix of a refused table, or of two explicit entries with one table
FIX = (
    f"give each its own target (in a rule, target = {SUGGESTED}), list one of them"
    " explicitly, or exclude it"
)


def _check(tables: tuple[TableMap, ...], rules: dict[str, TableRule]) -> None:
    """Each event name is one table."""
    by_source: dict[str, TableMap] = {}
    for t in tables:
        same = by_source.setdefault(t.source, t)
        if (same.schema, same.name) != (t.schema, t.name) and (same.rule or t.rule):
            raise ConfigError(
                f"tables {_quoted(same)} and {_quoted(t)} both reach the drain as"
                f" {t.source!r} (events name tables unquoted): capture only one of them into"
                " this queue and exclude the other"
            )


def _quoted(t: TableMap) -> str:
    return '"' + t.schema.replace('"', '""') + '"."' + t.name.replace('"', '""') + '"'


class TableResolver:
    """The pipeline as the catalog stands now: ``current()`` lists the candidate tables (one
    query) and resolves the rules again when the list changed since the last call. It logs
    each table a rule adds, and each warning, once."""

    def __init__(self, pipeline: Pipeline, conn: psycopg.Connection) -> None:
        self.base = pipeline
        self.conn = conn
        self._catalog: tuple[tuple[str, str], ...] | None = None
        self._current = pipeline
        self._announced: set[tuple[str, str, str]] = set()
        self._warned: set[str] = set()
        self._rules = {r.where: r for r in pipeline.rules}

    def current(self) -> Pipeline:
        """The resolved pipeline; the same object while the catalog's tables are unchanged.
        The tables of the last resolution keep their targets: a table created since whose
        target meets one of theirs is refused (logged once), the others go on. ConfigError
        when the catalog now gives two tables one event name."""
        if not self.base.rules:
            return self.base
        names = pg_catalog.candidate_tables(self.conn)
        if names == self._catalog:
            return self._current
        result = resolve(self.base, names, kept=set(self._current.tables))
        for r in result.pipeline.refused:
            text = f"table {r.source} is not replicated: {r.reason}"
            if text not in self._warned:
                self._warned.add(text)
                log.warning("%s", text)
        for t in result.matched:
            key = (t.source, t.target, t.rule)
            if key not in self._announced:
                self._announced.add(key)
                log.info(
                    "table %s matches rule %s: replicated into target %s (%s)",
                    t.source,
                    self._rules[t.rule].label,
                    t.target,
                    t.mode,
                )
        for text in result.warnings:
            if text not in self._warned:
                self._warned.add(text)
                log.warning("%s", text)
        self._catalog, self._current = names, result.pipeline
        return self._current


def resolved(pipeline: Pipeline, conn: psycopg.Connection | None = None) -> Pipeline:
    """The pipeline with its rules resolved against the source's catalog, for a command that
    names tables (cdc snapshot, verify, resync, status). Without rules: the pipeline itself,
    and no connection. Without ``conn``, one is opened to source.dsn for the one query."""
    if not pipeline.rules:
        return pipeline
    if conn is None:
        with psycopg.connect(pipeline.source.dsn, autocommit=True) as own:
            names = pg_catalog.candidate_tables(own)
    else:
        names = pg_catalog.candidate_tables(conn)
    result = resolve(pipeline, names)
    for text in result.warnings:
        log.warning("%s", text)
    for r in result.pipeline.refused:
        log.warning("table %s is not replicated: %s", r.source, r.reason)
    return result.pipeline
