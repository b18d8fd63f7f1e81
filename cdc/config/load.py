"""Reading the configuration file: TOML parsed, then every section checked, with messages
naming the key (``source.max_events must be a positive integer, not 0``), into the values of
cdc.config.model. A default missing from the file is the dataclass field's (``default``)."""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any

from cdc.config.claims import clash_text, reserved_claims
from cdc.config.model import (
    DSN_ENV,
    MODES,
    QUEUE_SCHEMAS,
    DrainSettings,
    Pipeline,
    Source,
    TableMap,
    default,
)
from cdc.config.spark_settings import spark_settings
from cdc.config.table_options import OPTION_KEYS, table_options
from cdc.engines.planner import FORCEABLE
from cdc.errors import ConfigError
from cdc.names import TablePattern, TableRule, parse_table_name, target_problem, template_problem
from cdc.pg.jdbc import redacted, url_problem
from cdc.targets.options import TableOptions
from cdc.targets.table import TargetClaims

SIZE = re.compile(r"\s*(\d+)\s*(B|KiB|MiB|GiB|TiB)?\s*", re.IGNORECASE)
SIZE_UNITS = {"b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}


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


def _jdbc_url(section: dict[str, Any]) -> str | None:
    """source.jdbc_url, checked (cdc.pg.jdbc.url_problem); a message shows it without its
    password."""
    if "jdbc_url" not in section:
        return None
    value = section["jdbc_url"]
    if not isinstance(value, str) or not value.strip():
        shown = redacted(value) if isinstance(value, str) else value
        raise ConfigError(f"source.jdbc_url must be a non-empty string, not {shown!r}")
    url = value.strip()
    problem = url_problem(url)
    if problem:
        raise ConfigError(f"source.jdbc_url {problem}, not {redacted(url)!r}")
    return url


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
    _unknown(section, "drain", {"memory_budget", "spill_dir", "engine"})
    budget = parse_size(
        section.get("memory_budget", default(DrainSettings, "memory_budget")),
        "drain.memory_budget",
    )
    spill_dir = _text(section, "drain", "spill_dir") if "spill_dir" in section else None
    engine = section.get("engine", "auto")
    if engine not in ("auto", *FORCEABLE):
        raise ConfigError(
            f"drain.engine must be one of auto, {', '.join(FORCEABLE)}, not {engine!r}: auto lets"
            ' the planner choose per table (docs/drain.md, "Two engines")'
        )
    return DrainSettings(budget, spill_dir, None if engine == "auto" else engine)


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
            "jdbc_url",
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
    numbers = {key: _positive(src, key) for key in ("max_events", "jdbc_partitions")}
    if "jdbc_min_events" in src:  # else by the Spark master (cdc.pipeline.reader)
        numbers["jdbc_min_events"] = _positive(src, "jdbc_min_events")
    source = Source(
        dsn=_text({"dsn": dsn}, "source", "dsn"),
        queue=_text(src, "source", "queue"),
        consumer=_text(src, "source", "consumer"),
        queue_schema=schema,
        jdbc_url=_jdbc_url(src),
        **numbers,
    )
    target = _section(data, "target")
    _unknown(target, "target", {"path", "quarantine"})
    target_path = _text(target, "target", "path")
    quarantine = _text(target, "target", "quarantine", default(Pipeline, "quarantine"))
    problem = target_problem(quarantine)
    if problem:
        raise ConfigError(f"target.quarantine {problem}, not {quarantine!r}")
    spark = spark_settings(_section(data, "spark")) if "spark" in data else ()
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
        _unknown(entry, where, {"source", "target", "mode", "exclude", *OPTION_KEYS})
        text = _text(entry, where, "source")
        try:
            pattern = TablePattern.parse(text)
        except ValueError as exc:
            raise ConfigError(f"{where}.source must be schema.table, not {text!r}: {exc}") from None
        mode = _text(entry, where, "mode", default(TableMap, "mode"))
        if mode not in MODES:
            raise ConfigError(f"{where}.mode must be {' or '.join(MODES)}, not {mode!r}")
        options = table_options(entry, where, mode)
        if pattern.is_pattern:
            rules.append(_rule(entry, where, pattern, mode, options))
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
        maps.append(TableMap(f"{schema}.{name}", target_name, mode, schema, name, options=options))
    return tuple(maps), tuple(rules)


def _rule(
    entry: dict[str, Any], where: str, pattern: TablePattern, mode: str, options: TableOptions
) -> TableRule:
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
    return TableRule(pattern.schema, pattern.table, tuple(excluded), template, mode, where, options)


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
