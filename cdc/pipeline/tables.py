"""The pipeline's tables: its explicit ``[[tables]]`` entries and the catalog tables its rules
(pattern entries, cdc.names.TableRule) match.

Invariants of a resolution (``resolve``, pure):
- explicit entries come first, as written; a table listed explicitly is never produced by a
  rule (an explicit entry overrides every rule that matches it);
- then each rule, in file order, adds every catalog table it matches (excludes left out), in
  catalog order, with its own mode and the target its template renders; two rules matching
  one table both add it (one source may feed several targets);
- every target belongs to one entry: two entries with one target are a ConfigError naming
  both; the quarantine and failing-marks targets stay reserved; a rendered target must stay
  below target.path and be of the kind its template gives (path or catalog name);
- two tables whose events would carry the same name (``"a.b".c`` and ``a."b.c"``) cannot be
  told apart by the drain: a ConfigError when a rule produced one of them;
- a rule matching no table is a warning naming it, never an error.

``TableResolver`` re-lists the catalog with one query (cdc.pg.catalog) each time it is asked
and resolves again only when the list changed; without rules it asks nothing.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

import psycopg

from cdc.config import RESERVED_SUFFIXES, Pipeline, TableMap
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


def _target(rule: TableRule, schema: str, table: str) -> str:
    """The checked target of a table a rule matched."""
    name = rule.render(schema, table)
    problem = target_problem(name)
    if problem is None and is_catalog_name(name) != is_catalog_name(rule.render("s", "t")):
        kind = "a catalog name" if is_catalog_name(name) else "a path"
        problem = f"would be {kind} unlike the template's other targets (its name holds a dot or /)"
    if problem:
        raise ConfigError(
            f"table {schema}.{table} matched by rule {rule.label} gets target {name!r}, which"
            f" {problem}: list the table explicitly with a target, or exclude it"
        )
    return name


def resolve(pipeline: Pipeline, catalog: Iterable[tuple[str, str]]) -> Resolution:
    """The pipeline with its rules applied to these catalog tables (see the module doc)."""
    explicit = tuple(t for t in pipeline.tables if not t.rule)
    listed = {(t.schema, t.name) for t in explicit}
    names = sorted(set(catalog))
    rules = {r.where: r for r in pipeline.rules}
    added: list[TableMap] = []
    warnings: list[str] = []
    for rule in pipeline.rules:
        hits = [(s, t) for s, t in names if rule.matches(s, t)]
        if not hits:
            but = " (after its exclude patterns)" if rule.exclude else ""
            warnings.append(f"rule {rule.label} matches no table{but}")
        for schema, table in hits:
            if (schema, table) in listed:
                continue
            target = _target(rule, schema, table)
            source = f"{schema}.{table}"
            added.append(TableMap(source, target, rule.mode, schema, table, rule=rule.where))
    tables = explicit + tuple(added)
    _check(tables, pipeline.quarantine, rules)
    return Resolution(dataclasses.replace(pipeline, tables=tables), warnings)


def _check(tables: tuple[TableMap, ...], quarantine: str, rules: dict[str, TableRule]) -> None:
    """Each target belongs to one entry, none is reserved, each event name one table."""
    reserved = {quarantine: "target.quarantine"} | {
        f"{quarantine}{suffix}": what for suffix, what in RESERVED_SUFFIXES.items()
    }
    by_target: dict[str, TableMap] = {}
    by_source: dict[str, TableMap] = {}
    for t in tables:
        if t.target in reserved:
            raise ConfigError(
                f"{_origin(t, rules)} would be replicated into {t.target!r}, which holds"
                f" {reserved[t.target]}: give it another target (or exclude it)"
            )
        other = by_target.setdefault(t.target, t)
        if other is not t:
            raise ConfigError(
                f"target {t.target!r} is the target of both {_origin(other, rules)} and"
                f" {_origin(t, rules)}: give each its own target (in a rule, target ="
                f" {SUGGESTED}), list one of them explicitly, or exclude it"
            )
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
        ConfigError when the catalog now makes the rules conflict (two tables, one target)."""
        if not self.base.rules:
            return self.base
        names = pg_catalog.candidate_tables(self.conn)
        if names == self._catalog:
            return self._current
        result = resolve(self.base, names)
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
    return result.pipeline
