"""The options of spark.readStream.format("cdc") (cdc.stream.options), checked without a
server: each mistake is named."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc.config import DSN_ENV
from cdc.errors import ConfigError
from cdc.stream.options import EVENTS_PER_PARTITION, parse

DSN = "postgresql://app@db/shop"


def pipeline(tmp_path: Path) -> str:
    path = tmp_path / "pipeline.toml"
    path.write_text(
        f"""
[source]
dsn = "{DSN}"
queue = "cdc_events"
consumer = "delta"
max_events = 5000
jdbc_partitions = 3

[target]
path = "/data/delta"

[[tables]]
source = "public.orders"
target = "orders"
"""
    )
    return str(path)


def test_a_pipeline_file_gives_the_source(tmp_path):
    """config: the file's [source], the stream's own consumer, its sizes."""
    found = parse({"config": pipeline(tmp_path), "consumer": "reports"})
    assert (found.source.dsn, found.source.queue, found.source.consumer) == (
        DSN,
        "cdc_events",
        "reports",
    )
    assert found.source.max_events == 5000
    assert found.max_partitions == 3
    assert found.tick and found.table is None


def test_a_relative_config_is_the_drivers(tmp_path, monkeypatch):
    """The source runs in a Python worker in the JVM's folder: a relative config path is
    resolved against the folder the session registered the format in (base_dir)."""
    pipeline(tmp_path)
    monkeypatch.chdir("/")
    found = parse({"config": "pipeline.toml", "consumer": "reports"}, base_dir=str(tmp_path))
    assert found.source.queue == "cdc_events"
    with pytest.raises(ConfigError, match="does not exist"):
        parse({"config": "pipeline.toml", "consumer": "reports"})


def test_options_without_a_file():
    """dsn, queue, queue_schema, and the others, by their names (Spark lower-cases them)."""
    found = parse(
        {
            "dsn": DSN,
            "queue": "q",
            "queue_schema": "pgq",
            "consumer": "c",
            "table": "public.orders",
            "max_events": "100",
            "tick": "False",
            "poll_interval": "0",
            "MAX_PARTITIONS": "2",
        }
    )
    assert found.source.engine.name == "pgq"
    assert found.source.max_events == 100
    assert (found.table, found.tick, found.poll_interval, found.max_partitions) == (
        "public.orders",
        False,
        0.0,
        2,
    )


def test_the_dsn_may_come_from_the_environment(monkeypatch):
    monkeypatch.setenv(DSN_ENV, DSN)
    assert parse({"queue": "q", "consumer": "c"}).source.dsn == DSN


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"queue": "q", "dsn": DSN}, "needs option consumer"),
        ({"dsn": DSN, "consumer": "c"}, "needs option queue"),
        (
            {"dsn": DSN, "queue": "q", "consumer": "c", "startingTick": "3"},
            "no option startingtick",
        ),
        ({"dsn": DSN, "queue": "q", "consumer": "c", "queue_schema": "x"}, "queue_schema"),
        ({"dsn": DSN, "queue": "q", "consumer": "c", "tick": "yes"}, "tick must be true or false"),
        ({"dsn": DSN, "queue": "q", "consumer": "c", "max_events": "0"}, "max_events"),
        ({"dsn": DSN, "queue": "q", "consumer": "c", "poll_interval": "-1"}, "poll_interval"),
        ({"dsn": DSN, "queue": "q", "consumer": " "}, "consumer must be a non-empty"),
    ],
)
def test_mistakes_are_named(options, message, monkeypatch):
    monkeypatch.delenv(DSN_ENV, raising=False)
    with pytest.raises(ConfigError, match=message):
        parse(options)


def test_no_dsn_anywhere(monkeypatch):
    monkeypatch.delenv(DSN_ENV, raising=False)
    with pytest.raises(ConfigError, match="option config, or option dsn"):
        parse({"queue": "q", "consumer": "c"})


def test_the_file_and_its_options_are_not_given_twice(tmp_path):
    """Beside config, dsn/queue/queue_schema would say the source twice."""
    with pytest.raises(ConfigError, match="leave out option queue"):
        parse({"config": pipeline(tmp_path), "queue": "other", "consumer": "c"})


def test_the_drains_consumer_is_refused(tmp_path):
    """Two readers of one consumer would take each other's batches."""
    with pytest.raises(ConfigError, match="the drain's consumer"):
        parse({"config": pipeline(tmp_path), "consumer": "delta"})


def test_a_batch_is_read_in_ranges_by_its_size():
    """One ev_id range per EVENTS_PER_PARTITION events, at least one, at most
    max_partitions."""
    found = parse({"dsn": DSN, "queue": "q", "consumer": "c", "max_partitions": "4"})
    assert found.partitions(0) == 1
    assert found.partitions(EVENTS_PER_PARTITION) == 1
    assert found.partitions(EVENTS_PER_PARTITION + 1) == 2
    assert found.partitions(100 * EVENTS_PER_PARTITION) == 4
