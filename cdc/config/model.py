"""The pipeline configuration as values: ``Source``, ``TableMap``, ``DrainSettings``,
``Refused`` and ``Pipeline``, which ``cdc.config.load`` builds from the file.

A rule stands for the catalog tables it matches, resolved by ``cdc.pipeline.tables`` (explicit
entries win: a table listed explicitly is never produced by a rule). ``Pipeline.tables`` holds
the resolved entries: after ``parse`` only the explicit ones, and ``Pipeline.rules`` the
rules; a TableMap a rule produced names it (``TableMap.rule``); ``Pipeline.refused`` holds the
tables a rule matched that the resolution does not replicate.

Every default is written once: in the dataclasses below, which ``parse`` and the command line
read (``default``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cdc.config.claims import reserved_claims
from cdc.errors import ConfigError
from cdc.names import TableRule, parse_table_name
from cdc.pg.engine import ENGINES, Engine, engine_of
from cdc.targets import registry
from cdc.targets.options import TableOptions
from cdc.targets.table import TableRef, TargetClaims

if TYPE_CHECKING:
    from cdc.targets.kind import TargetKind

MODES = registry.MODES
QUEUE_SCHEMAS = tuple(ENGINES)  # the queue engines (cdc.pg.engine)
DSN_ENV = "CDC_DSN"  # the database when neither source.dsn nor --dsn names one


@dataclass(frozen=True)
class Source:
    dsn: str
    queue: str
    consumer: str
    queue_schema: str = "cdc"
    max_events: int = 1_000_000
    # batches this large are read by Spark over JDBC; None (not in the file): the default,
    # the rule in cdc.pipeline.reader (jdbc_threshold)
    jdbc_min_events: int | None = None
    jdbc_partitions: int = 8
    # the URL of every JDBC read instead of the one made from the DSN (cdc.pg.source.
    # source_jdbc); out of the repr: it may hold a password
    jdbc_url: str | None = field(default=None, repr=False)

    @property
    def engine(self) -> Engine:
        """The queue engine of queue_schema, with its capability flags."""
        return engine_of(self.queue_schema)

    @property
    def capture_queue(self) -> str | None:
        """The queue whose capture registry (cdc attach) tells a table's pkey= columns; None
        for a PgQ queue, whose triggers keep no registry."""
        return self.queue if self.engine.has_capture_registry else None


@dataclass(frozen=True)
class DrainSettings:
    """How a drain holds a batch (``[drain]``): at most ``memory_budget`` bytes of the driver's
    memory (Python, beside the JVM's heap) whatever the batch's size, by spilling a larger
    batch to Parquet files in ``spill_dir`` for Spark (cdc.pipeline.spool)."""

    memory_budget: int = 2 << 30
    spill_dir: str | None = None  # default: a temporary folder (a local master only)
    # the engine of every table's part (cdc.engines.planner): None lets the planner choose;
    # "spark" forces Spark, "arrow" the Arrow engine wherever the budget and target allow it
    engine: str | None = None


@dataclass(frozen=True)
class TableMap:
    source: str  # schema.table unquoted, as in the events' ev_extra1
    target: str
    mode: str = "mirror"
    schema: str = ""  # the schema and table names (default: source split at its first dot)
    name: str = ""
    rule: str = field(default="", compare=False)  # the rule that produced it ("" if listed)
    options: TableOptions = field(
        default_factory=TableOptions
    )  # the entry's apply options (cdc.targets.options)

    @property
    def kind(self) -> TargetKind:
        """The target kind that writes it: its mode's, applying its options."""
        return registry.kind(self.mode, self.options)

    def __post_init__(self) -> None:
        if not self.schema or not self.name:
            schema, _, name = self.source.partition(".")
            object.__setattr__(self, "schema", schema)
            object.__setattr__(self, "name", name)


@dataclass(frozen=True)
class Refused:
    """A table a rule matched that the resolution does not replicate (cdc.pipeline.tables):
    its target would be another entry's table, or could not be one. Its events go to the
    quarantine with the reason; ``cdc status`` lists it."""

    source: str  # schema.table unquoted
    target: str  # the target the rule rendered
    rule: str  # the rule's place in the file (tables[N])
    reason: str


@dataclass(frozen=True)
class Pipeline:
    source: Source
    target_path: str
    tables: tuple[TableMap, ...]
    quarantine: str = "_quarantine"
    path: Path | None = field(default=None, compare=False)
    metrics_port: int | None = None  # Prometheus metrics of a --follow drain
    spark: tuple[tuple[str, str], ...] = ()  # [spark]: Spark settings, as (name, text) pairs
    rules: tuple[TableRule, ...] = ()  # [[tables]] entries whose source is a pattern
    drain: DrainSettings = DrainSettings()  # [drain]
    refused: tuple[Refused, ...] = ()  # tables the rules matched and the resolution refused

    def mirrors(self, sources: list[str]) -> list[TableMap]:
        """The mirror targets of these source tables (of every table when none is given);
        a source not in the configuration, or one that feeds only history targets, is an
        error."""
        if not sources:
            return [t for t in self.tables if registry.holds_rows(t.mode)]
        sources = [self.source_name(s) for s in sources]
        known = {t.source for t in self.tables}
        unknown = [s for s in sources if s not in known]
        refused = {r.source: r.reason for r in self.refused}
        for name in unknown:
            if name in refused:
                raise ConfigError(f"{name} is refused by the configuration: {refused[name]}")
        if unknown:
            patterns = "".join(f"; pattern {r.pattern}" for r in self.rules)
            raise ConfigError(
                f"not in the configuration's [[tables]]: {', '.join(unknown)}"
                f" (listed: {', '.join(sorted(known)) or 'none'}{patterns})"
            )
        chosen = [t for t in self.tables if t.source in sources and registry.holds_rows(t.mode)]
        if not chosen:
            raise ConfigError(
                f"{', '.join(sources)} feed only history targets, which hold events, not rows"
            )
        return chosen

    def source_name(self, text: str) -> str:
        """A table named on the command line (``public.orders``, ``'"public"."My Table"'``)
        as the configuration's source (schema.table unquoted)."""
        if text in {t.source for t in self.tables}:
            return text
        try:
            schema, name = parse_table_name(text)
        except ValueError:
            return text
        return f"{schema}.{name}"

    def claims(self) -> TargetClaims:
        """The targets the pipeline keeps beside its tables, claimed (``reserved_claims``)."""
        return reserved_claims(self.quarantine, self.spark)

    @property
    def failing_table(self) -> str:
        """The target holding the failing marks of the tables (beside the quarantine)."""
        return f"{self.quarantine}_failing"

    def table(self, target: str) -> TableRef:
        """The table of a target: a path below target.path, unless it is a catalog name
        (``db.table``)."""
        return TableRef.of(self.target_path, target)

    def location(self, target: str) -> str:
        """Where a target table lives (its path, or its catalog name)."""
        return self.table(target).location


def default(cls: type, name: str) -> Any:
    """The default of a dataclass field: the one place a setting's default is written, which
    the configuration and the command line both read."""
    for f in dataclasses.fields(cls):
        if f.name == name and f.default is not dataclasses.MISSING:
            return f.default
    raise KeyError(f"{cls.__name__}.{name} has no default")
