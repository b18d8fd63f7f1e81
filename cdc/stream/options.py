"""The options of ``spark.readStream.format("cdc")``, checked with messages that name the option.

::

    config         a pipeline file: its [source] gives dsn, queue, queue_schema, max_events
    dsn, queue     or these, without a file (dsn: else the environment's CDC_DSN)
    queue_schema   "cdc" (default) or "pgq" (a real PgQ queue), without a file
    consumer       the stream's own consumer (required): registered at the queue's latest tick
                   when the stream first starts; never the pipeline's drain consumer
    table          only this table's events (schema.table, as the events name it)
    max_events     a micro-batch joins ticks up to this many events (default: the file's
                   source.max_events, else 1000000); one tick's batch may hold more
    tick           "true" (default): the stream ticks the queue itself when events wait and
                   no batch is ready; "false" where a ticker daemon (or a drain) ticks
    poll_interval  seconds between two looks at the queue while it has nothing (default 0.5)
    max_partitions a micro-batch is read in up to this many ev_id ranges, in parallel by the
                   executors (default: the file's source.jdbc_partitions, else 8)

Spark hands a Python data source its options with lower-cased names; so are they here.
Plain Python, no Spark: tests/unit/test_stream_options.py.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

from cdc.config import DSN_ENV, QUEUE_SCHEMAS, Source, default, load
from cdc.errors import ConfigError

__all__ = ["EVENTS_PER_PARTITION", "KNOWN", "StreamOptions", "parse"]

KNOWN = frozenset(
    {
        "config",
        "dsn",
        "queue",
        "queue_schema",
        "consumer",
        "table",
        "max_events",
        "tick",
        "poll_interval",
        "max_partitions",
    }
)
# options a pipeline file gives; beside ``config`` they would say it twice
FROM_FILE = ("dsn", "queue", "queue_schema")
DEFAULT_POLL = 0.5
EVENTS_PER_PARTITION = 200_000  # a micro-batch gets one ev_id range per this many events


@dataclass(frozen=True)
class StreamOptions:
    """A stream's checked options: the source (its ``consumer`` the stream's own)."""

    source: Source
    table: str | None = None
    tick: bool = True
    poll_interval: float = DEFAULT_POLL
    max_partitions: int = default(Source, "jdbc_partitions")

    def partitions(self, events: int) -> int:
        """How many ev_id ranges a batch of about ``events`` events is read in."""
        return max(1, min(self.max_partitions, math.ceil(events / EVENTS_PER_PARTITION)))


def parse(options: Mapping[str, str], base_dir: str | None = None) -> StreamOptions:
    """The checked options (see the module docstring); a relative ``config`` path is the
    driver's: resolved against base_dir, the folder the session registered the format in
    (Spark runs the source in a Python worker whose folder is the JVM's)."""
    given = {name.lower(): value for name, value in options.items()}
    unknown = sorted(set(given) - KNOWN)
    if unknown:
        raise ConfigError(
            f"the cdc stream has no option {', '.join(unknown)}"
            f" (options: {', '.join(sorted(KNOWN))})"
        )
    consumer = _text(given, "consumer")
    if consumer is None:
        raise ConfigError(
            "the cdc stream needs option consumer: its own consumer of the queue, registered"
            " when the stream first starts (never the drain's)"
        )
    if "config" in given:
        source = _from_file(given, consumer, base_dir)
    else:
        source = _from_options(given, consumer)
    if "max_events" in given:
        source = dataclasses.replace(source, max_events=_positive(given, "max_events"))
    max_partitions = (
        _positive(given, "max_partitions") if "max_partitions" in given else source.jdbc_partitions
    )
    return StreamOptions(
        source=source,
        table=_text(given, "table"),
        tick=_boolean(given, "tick", True),
        poll_interval=_seconds(given, "poll_interval", DEFAULT_POLL),
        max_partitions=max_partitions,
    )


def _from_file(given: dict[str, str], consumer: str, base_dir: str | None) -> Source:
    twice = [name for name in FROM_FILE if name in given]
    if twice:
        raise ConfigError(
            f"option config gives the source; leave out option {', '.join(twice)} (or config)"
        )
    path = _text(given, "config")
    if path is None:
        raise ConfigError("option config must name a pipeline file")
    source = load(os.path.join(base_dir, path) if base_dir else path).source
    if consumer == source.consumer:
        raise ConfigError(
            f"option consumer {consumer!r} is the drain's consumer in {path}: the stream takes"
            " a consumer of its own, or the two would take each other's batches"
        )
    return dataclasses.replace(source, consumer=consumer)


def _from_options(given: dict[str, str], consumer: str) -> Source:
    dsn = _text(given, "dsn") or os.environ.get(DSN_ENV)
    if not dsn:
        raise ConfigError(f"the cdc stream needs option config, or option dsn (or {DSN_ENV})")
    queue = _text(given, "queue")
    if queue is None:
        raise ConfigError("the cdc stream needs option queue (or option config)")
    schema = _text(given, "queue_schema") or "cdc"
    if schema not in QUEUE_SCHEMAS:
        raise ConfigError(
            f"option queue_schema must be one of {', '.join(QUEUE_SCHEMAS)}, not {schema!r}"
        )
    return Source(dsn=dsn, queue=queue, consumer=consumer, queue_schema=schema)


def _text(given: dict[str, str], name: str) -> str | None:
    value = given.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"option {name} must be a non-empty string, not {value!r}")
    return value.strip()


def _positive(given: dict[str, str], name: str) -> int:
    text = _text(given, name) or ""
    if not text.isdigit() or int(text) < 1:
        raise ConfigError(f"option {name} must be a positive whole number, not {given[name]!r}")
    return int(text)


def _boolean(given: dict[str, str], name: str, default: bool) -> bool:
    text = _text(given, name)
    if text is None:
        return default
    if text.lower() not in ("true", "false"):
        raise ConfigError(f"option {name} must be true or false, not {text!r}")
    return text.lower() == "true"


def _seconds(given: dict[str, str], name: str, default: float) -> float:
    text = _text(given, name)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"option {name} must be a number of seconds (0 or more), not {text!r}")
    return value
