"""The pipeline configuration (``conf/pipeline.toml``), checked with messages naming the key.

::

    [source]
    dsn = "postgresql://..."      # or the environment's CDC_DSN
    queue = "cdc_events"
    consumer = "delta"
    queue_schema = "cdc"          # "pgq" consumes a real PgQ queue
    max_events = 1000000          # several ticks join into one batch up to this many events
    jdbc_min_events = 2000000     # larger batches: Spark reads them over JDBC, in slices
    jdbc_partitions = 8           # ... this many, by ev_id ranges

    [target]
    path = "/data/delta"          # one Delta table per source table below it

    [[tables]]
    source = "public.orders"      # schema.table; quote names holding dots: '"my.schema"."T"'
    target = "orders"             # a path under target.path, or a catalog table name
    mode = "mirror"               # or "history"

    [[tables]]                    # a RULE: its source holds * or ? (globs, cdc.names)
    source = "sales.*"            # every table of schema sales ...
    exclude = ["sales.tmp_*"]     # ... but these (schema.table globs)
    target = "sales_{table}"      # a template: {schema}, {table}; default "{table}"
    mode = "mirror"

    [drain]
    memory_budget = "2GiB"        # the driver's memory for a batch, beside the JVM heap
    spill_dir = "/mnt/shared/cdc" # a larger batch is spilled here, for Spark (default: a
                                  # temporary folder on a local master; a cluster needs one
                                  # that every executor reads)

    [metrics]
    port = 9187                   # a --follow drain serves Prometheus metrics here

    [spark]                       # optional: Spark settings of the session (cdc.spark)
    master = "local[4]"           # the setting spark.master (default local[2])
    "spark.driver.memory" = "4g"  # any Spark setting, by its full name; strings, numbers, booleans
    "spark.sql.shuffle.partitions" = 8
    "spark.hadoop.fs.s3a.secret.key" = "${AWS_SECRET_ACCESS_KEY}"  # from the environment

The ``[spark]`` settings go over the local session's defaults (cdc.spark.LOCAL_CONF); a
command's ``--conf NAME=VALUE`` goes over them. Under ``spark-submit`` a setting the submitter
gave (``--conf``, ``--driver-memory``) wins over the file's. ``${NAME}`` in a value is the
environment variable NAME, read when the session starts (cdc.spark.resolve_settings), so that
credentials need not be written in the file; no message or log shows a value.
``spark.sql.warehouse.dir`` defaults to ``_spark_warehouse`` under target.path when a target
is a catalog name, else to a temporary folder: never a ``spark-warehouse`` folder in the
working directory. A catalog-named target (``db.table``) keeps its files below
``target.path/_spark_warehouse`` and is registered in Spark's catalog under its name
(cdc.targets.catalog).

A rule stands for the catalog tables it matches, resolved by ``cdc.pipeline.tables`` (explicit
entries win: a table listed explicitly is never produced by a rule). ``Pipeline.tables`` holds
the resolved entries: after ``parse`` only the explicit ones, and ``Pipeline.rules`` the
rules; a TableMap a rule produced names it (``TableMap.rule``); ``Pipeline.refused`` holds the
tables a rule matched that the resolution does not replicate. Targets are compared as they
resolve (cdc.targets.table.TargetClaims): two explicit entries whose targets are one table
(``default.Orders`` and ``default.orders``; ``a/b`` and ``a//b/``) are a ConfigError naming
both.

Every default is written once: in the dataclasses below (``Source``, ``TableMap``,
``Pipeline``), which ``parse`` reads.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cdc.errors import ConfigError
from cdc.names import TablePattern, TableRule, parse_table_name, target_problem, template_problem
from cdc.pg.engine import ENGINES, Engine, engine_of
from cdc.targets import catalog, registry
from cdc.targets.table import Clash, TableRef, TargetClaims

MODES = registry.MODES
QUEUE_SCHEMAS = tuple(ENGINES)  # the queue engines (cdc.pg.engine)
DSN_ENV = "CDC_DSN"  # the database when neither source.dsn nor --dsn names one
# ${NAME} in a [spark] value: the environment variable NAME, read when the session starts
ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class Source:
    dsn: str
    queue: str
    consumer: str
    queue_schema: str = "cdc"
    max_events: int = 1_000_000
    jdbc_min_events: int = 2_000_000  # batches this large are read by Spark over JDBC
    jdbc_partitions: int = 8

    @property
    def engine(self) -> Engine:
        """The queue engine of queue_schema, with its capability flags."""
        return engine_of(self.queue_schema)

    @property
    def capture_queue(self) -> str | None:
        """The queue whose capture registry (cdc attach) tells a table's pkey= columns; None
        for a PgQ queue, whose triggers keep no registry."""
        return self.queue if self.engine.has_capture_registry else None


SIZE = re.compile(r"\s*(\d+)\s*(B|KiB|MiB|GiB|TiB)?\s*", re.IGNORECASE)
SIZE_UNITS = {"b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}


@dataclass(frozen=True)
class DrainSettings:
    """How a drain holds a batch (``[drain]``): at most ``memory_budget`` bytes of the driver's
    memory (Python, beside the JVM's heap) whatever the batch's size, by spilling a larger
    batch to Parquet files in ``spill_dir`` for Spark (cdc.pipeline.spool)."""

    memory_budget: int = 2 << 30
    spill_dir: str | None = None  # default: a temporary folder (a local master only)


@dataclass(frozen=True)
class TableMap:
    source: str  # schema.table unquoted, as in the events' ev_extra1
    target: str
    mode: str = "mirror"
    schema: str = ""  # the schema and table names (default: source split at its first dot)
    name: str = ""
    rule: str = field(default="", compare=False)  # the rule that produced it ("" if listed)

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


def _section(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    if not isinstance(value, dict):
        raise ConfigError(f"[{key}] is missing or not a table")
    return value


def _text(section: dict[str, Any], where: str, key: str, default: str | None = None) -> str:
    value = section.get(key, default)
    if value is None:
        raise ConfigError(f"{where}.{key} is missing")
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}.{key} must be a non-empty string, not {value!r}")
    return value.strip()


def _positive(section: dict[str, Any], key: str) -> int:
    value = section.get(key, default(Source, key))
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"source.{key} must be a positive integer, not {value!r}")
    return value


def parse_size(value: Any, where: str) -> int:
    """A size in bytes: a whole number, or text such as ``"2GiB"``, ``"512MiB"`` (units B,
    KiB, MiB, GiB, TiB)."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    found = SIZE.fullmatch(value) if isinstance(value, str) else None
    if found is None or int(found[1]) < 1:
        raise ConfigError(
            f'{where} must be a size such as "2GiB" or "512MiB" (or a number of bytes),'
            f" not {value!r}"
        )
    return int(found[1]) * SIZE_UNITS[(found[2] or "b").lower()]


def _drain(section: dict[str, Any]) -> DrainSettings:
    _unknown(section, "drain", {"memory_budget", "spill_dir"})
    budget = parse_size(
        section.get("memory_budget", default(DrainSettings, "memory_budget")),
        "drain.memory_budget",
    )
    spill_dir = _text(section, "drain", "spill_dir") if "spill_dir" in section else None
    return DrainSettings(budget, spill_dir)


def _unknown(section: dict[str, Any], where: str, known: set[str]) -> None:
    extra = sorted(set(section) - known)
    if extra:
        raise ConfigError(
            f"{where} has unknown keys: {', '.join(extra)} (known: {', '.join(sorted(known))})"
        )


def parse(data: dict[str, Any], path: Path | None = None) -> Pipeline:
    _unknown(data, "the configuration", {"source", "target", "tables", "metrics", "spark", "drain"})
    src = _section(data, "source")
    _unknown(
        src,
        "source",
        {
            "dsn",
            "queue",
            "consumer",
            "queue_schema",
            "max_events",
            "jdbc_min_events",
            "jdbc_partitions",
        },
    )
    dsn = src.get("dsn") or os.environ.get(DSN_ENV)
    if not dsn:
        raise ConfigError(f"source.dsn is missing (or set {DSN_ENV})")
    schema = _text(src, "source", "queue_schema", default(Source, "queue_schema"))
    if schema not in QUEUE_SCHEMAS:
        raise ConfigError(
            f"source.queue_schema must be one of {', '.join(QUEUE_SCHEMAS)}, not {schema!r}"
        )
    numbers = {
        key: _positive(src, key) for key in ("max_events", "jdbc_min_events", "jdbc_partitions")
    }
    source = Source(
        dsn=_text({"dsn": dsn}, "source", "dsn"),
        queue=_text(src, "source", "queue"),
        consumer=_text(src, "source", "consumer"),
        queue_schema=schema,
        **numbers,
    )
    target = _section(data, "target")
    _unknown(target, "target", {"path", "quarantine"})
    target_path = _text(target, "target", "path")
    quarantine = _text(target, "target", "quarantine", default(Pipeline, "quarantine"))
    problem = target_problem(quarantine)
    if problem:
        raise ConfigError(f"target.quarantine {problem}, not {quarantine!r}")
    spark = _spark(_section(data, "spark")) if "spark" in data else ()
    maps, rules = _tables(data.get("tables"), reserved_claims(quarantine, spark))
    metrics_port = None
    if "metrics" in data:
        metrics = _section(data, "metrics")
        _unknown(metrics, "metrics", {"port"})
        metrics_port = metrics.get("port")
        if (
            not isinstance(metrics_port, int)
            or isinstance(metrics_port, bool)
            or not (0 < metrics_port < 65536)
        ):
            raise ConfigError(f"metrics.port must be a TCP port number, not {metrics_port!r}")
    drain = _drain(_section(data, "drain")) if "drain" in data else DrainSettings()
    return Pipeline(source, target_path, maps, quarantine, path, metrics_port, spark, rules, drain)


def _tables(
    tables: Any, claims: TargetClaims
) -> tuple[tuple[TableMap, ...], tuple[TableRule, ...]]:
    """The explicit [[tables]] entries, each target claimed (``claims``: the reserved targets
    already), and the rules (a source holding * or ?)."""
    if not isinstance(tables, list) or not tables:
        raise ConfigError("[[tables]] is missing: list at least one source table or pattern")
    maps: list[TableMap] = []
    rules: list[TableRule] = []
    for n, entry in enumerate(tables, 1):
        where = f"tables[{n}]"
        if not isinstance(entry, dict):
            raise ConfigError(f"{where} must be a table with source, target and mode")
        _unknown(entry, where, {"source", "target", "mode", "exclude"})
        text = _text(entry, where, "source")
        try:
            pattern = TablePattern.parse(text)
        except ValueError as exc:
            raise ConfigError(f"{where}.source must be schema.table, not {text!r}: {exc}") from None
        mode = _text(entry, where, "mode", default(TableMap, "mode"))
        if mode not in MODES:
            raise ConfigError(f"{where}.mode must be {' or '.join(MODES)}, not {mode!r}")
        if pattern.is_pattern:
            rules.append(_rule(entry, where, pattern, mode))
            continue
        if "exclude" in entry:
            raise ConfigError(
                f"{where}.exclude belongs to a pattern source (holding * or ?); {where}.source"
                f" {text!r} names one table: remove exclude"
            )
        schema, name = pattern.schema, pattern.table
        target_name = _text(entry, where, "target", name)
        problem = target_problem(target_name)
        if problem:
            raise ConfigError(f"{where}.target {problem}, not {target_name!r}")
        # one source may feed several targets (a mirror and a history), each table one source
        clash = claims.claim(target_name, f"{schema}.{name}")
        if clash is not None:
            raise ConfigError(
                f"{where}: {clash_text(target_name, f'{schema}.{name}', clash)}: give each table"
                " its own target"
            )
        maps.append(TableMap(f"{schema}.{name}", target_name, mode, schema, name))
    return tuple(maps), tuple(rules)


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


def _rule(entry: dict[str, Any], where: str, pattern: TablePattern, mode: str) -> TableRule:
    """A pattern entry: its exclude globs and its target template, checked."""
    exclude = entry.get("exclude", [])
    if not isinstance(exclude, list):
        raise ConfigError(
            f"{where}.exclude must be a list of schema.table patterns, not {exclude!r}"
        )
    excluded: list[TablePattern] = []
    for m, item in enumerate(exclude, 1):
        try:
            excluded.append(_exclude_pattern(item))
        except ValueError as exc:
            raise ConfigError(
                f"{where}.exclude[{m}] must be a schema.table pattern (or a table pattern for"
                f" every schema), not {item!r}: {exc}"
            ) from None
    template = _text(entry, where, "target", default(TableRule, "target"))
    problem = template_problem(template)
    if problem:
        raise ConfigError(f"{where}.target {template!r} {problem}")
    return TableRule(pattern.schema, pattern.table, tuple(excluded), template, mode, where)


def _exclude_pattern(item: Any) -> TablePattern:
    """An exclude entry: ``schema.table`` globs, or a table glob alone (any schema)."""
    if not isinstance(item, str) or not item.strip():
        raise ValueError("not a non-empty string")
    text = item.strip()
    try:
        return TablePattern.parse(text)
    except ValueError as exc:
        error = exc
    try:  # one part, bare or quoted: the table's glob, in every schema the rule matches
        return TablePattern("*", parse_table_name(f"x.{text}")[1])
    except ValueError:
        raise error from None


def _spark(section: dict[str, Any], prefix: str = "") -> tuple[tuple[str, str], ...]:
    """The [spark] settings as (name, text) pairs. A name written unquoted with dots (TOML makes
    it a nested table) is joined back: ``spark.driver.memory = "4g"`` is the same setting as
    ``"spark.driver.memory" = "4g"``."""
    pairs: list[tuple[str, str]] = []
    for key, value in section.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            pairs.extend(_spark(value, f"{name}."))
            continue
        if name == "master":  # spark-submit's --master: the setting spark.master
            name = "spark.master"
        if not name.startswith("spark."):
            raise ConfigError(
                f"[spark] {name!r} is not a Spark setting: their names start with spark."
                ' (quote the whole name: "spark.driver.memory" = "4g")'
            )
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, int | float | str):
            text = str(value).strip()
        else:
            raise ConfigError(
                f'[spark] "{name}" must be a string, a number or a boolean, not {value!r}'
            )
        if not text:
            raise ConfigError(f'[spark] "{name}" must not be empty')
        if "${" in ENV_REFERENCE.sub("", text):  # the message never shows a value: a secret
            raise ConfigError(
                f'[spark] "{name}" holds a ${{ that is not a reference to an environment'
                " variable: write ${NAME}, NAME of letters, digits and _"
            )
        pairs.append((name, text))
    return tuple(pairs)


def add_config_argument(parser: argparse.ArgumentParser) -> None:
    """The --config option of every command and job that runs a pipeline."""
    parser.add_argument("--config", required=True, help="pipeline configuration (TOML)")


def add_dsn_argument(parser: argparse.ArgumentParser, *, several: bool = False) -> None:
    """The --dsn option of every command that works on a database without a pipeline file:
    one database (default: $CDC_DSN), or with several, one per --dsn (cdc ticker)."""
    if several:
        parser.add_argument(
            "--dsn", action="append", help="a database to serve; repeat for several"
        )
    else:
        parser.add_argument("--dsn", help=f"database connection string (default: ${DSN_ENV})")


def dsns_of(given: str | list[str] | None) -> list[str]:
    """The databases of a --dsn option: as given, else the one of $CDC_DSN, else none."""
    if given:
        return [given] if isinstance(given, str) else list(given)
    env = os.environ.get(DSN_ENV)
    return [env] if env else []


def load(path: str | os.PathLike[str]) -> Pipeline:
    """Reads and checks the configuration file."""
    file = Path(path)
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"configuration file {file} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"configuration file {file} is a directory, not a file") from None
    except PermissionError:
        raise ConfigError(
            f"configuration file {file} is not readable (permission denied)"
        ) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"configuration file {file} is not UTF-8 text (byte {exc.start}): TOML files are UTF-8"
        ) from None
    except OSError as exc:
        raise ConfigError(f"configuration file {file} cannot be read: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file} is not valid TOML: {exc}") from None
    return parse(data, file)
