"""The route planner (cdc.engines.planner): which engine decodes and writes a table's part
of a batch, from stated facts, with no server and no JVM."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from cdc.engines import planner
from cdc.engines.planner import ARROW, SHIPPED, SPARK, PartFacts, Route, WriteFacts

HELD = PartFacts(
    events=100,
    held_on_driver=True,
    local_master=True,
    kind_writes_arrow=True,
    default_merge_source=True,
)
WRITABLE = WriteFacts(
    decoded_by=ARROW,
    small=True,
    kind_writes_arrow=True,
    target_reached=True,
    target_writable=True,
    truncated=False,
)


def test_a_part_held_on_a_local_master_is_decoded_by_arrow() -> None:
    """Events on the driver of a local master: the Arrow engine decodes them, whatever their
    number."""
    assert planner.decode_route(HELD).decode == ARROW
    assert planner.decode_route(replace(HELD, events=5_000_000)).decode == ARROW


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"held_on_driver": False}, "not held on the driver"),
        ({"kind_writes_arrow": False}, "writes with Spark only"),
        ({"default_merge_source": False}, "materializeSource"),
        ({"forced": SPARK}, "drain.engine = spark"),
    ],
)
def test_spark_decodes_when_a_fact_calls_for_it(change: dict, why: str) -> None:
    """Each fact that keeps a part off the Arrow engine names itself in the route."""
    route = planner.decode_route(replace(HELD, **change))
    assert (route.decode, route.write) == (SPARK, SPARK)
    assert why in route.why


def test_a_large_part_on_a_cluster_is_folded_on_the_driver_and_written_by_spark() -> None:
    """On a cluster a small part held on the driver is the Arrow engine's alone; a large one
    is decoded and folded there and MERGEd by the executors (arrow+spark); one not held on
    the driver (read by JDBC, spilled) is Spark's from its events."""
    cluster = replace(HELD, local_master=False)
    small = planner.decode_route(replace(cluster, events=planner.SMALL_EVENTS))
    assert (small.decode, small.write) == (ARROW, ARROW)
    large = planner.decode_route(replace(cluster, events=planner.SMALL_EVENTS + 1))
    assert (large.decode, large.write) == (ARROW, SPARK)
    assert "large part" in large.why and str(large).startswith(SHIPPED)
    away = planner.decode_route(replace(cluster, events=10**7, held_on_driver=False))
    assert (away.decode, away.write) == (SPARK, SPARK)


def test_forcing_arrow_then_spark_keeps_what_the_driver_cannot_hold_in_spark() -> None:
    """drain.engine = arrow+spark folds on the driver and writes with Spark on any master,
    but never for events the driver does not hold."""
    forced = replace(HELD, forced=SHIPPED)
    route = planner.decode_route(forced)
    assert (route.decode, route.write, route.why) == (ARROW, SPARK, "drain.engine = arrow+spark")
    assert planner.decode_route(replace(forced, held_on_driver=False)).decode == SPARK


def test_forcing_arrow_never_overrides_what_arrow_cannot_do() -> None:
    """drain.engine = arrow on a cluster decodes a large held part by Arrow, but not events
    spilled or read by JDBC (the memory budget stands)."""
    forced = replace(HELD, forced=ARROW, local_master=False, events=10**7)
    assert planner.decode_route(forced).decode == ARROW
    assert planner.decode_route(replace(forced, held_on_driver=False)).decode == SPARK


def test_the_write_goes_to_arrow_only_where_delta_rs_writes_as_spark_would() -> None:
    """Every fact of the target or the values that delta-rs cannot honour sends the write to
    Spark, with the reason."""
    route = Route(ARROW, ARROW, "local master")
    assert planner.write_route(route, WRITABLE) == Route(ARROW, ARROW, "local master")
    for change, why in [
        ({"truncated": True}, "TRUNCATE"),
        ({"target_reached": False}, "does not reach the target"),
        ({"target_writable": False}, "cannot write this target"),
        ({"kind_writes_arrow": False}, "Spark only"),
        ({"forced": SPARK}, "drain.engine"),
    ]:
        got = planner.write_route(route, replace(WRITABLE, **change))
        assert got.write == SPARK and why in got.why, (change, got)


def test_rows_spark_decoded_are_written_by_delta_rs_only_when_small() -> None:
    """A small part Spark decoded (the Arrow decoder undecided) is folded by Spark and
    MERGEd by delta-rs; a large one is written by Spark."""
    route = Route(SPARK, SPARK, "the Arrow decoder was undecided")
    small = planner.write_route(route, replace(WRITABLE, decoded_by=SPARK))
    assert (small.decode, small.write) == (SPARK, ARROW)
    large = planner.write_route(route, replace(WRITABLE, decoded_by=SPARK, small=False))
    assert (large.decode, large.write) == (SPARK, SPARK)
    assert large.why == "the Arrow decoder was undecided"


def test_the_route_is_recorded_as_json_and_read_as_text() -> None:
    """The commit's metadata is JSON naming both engines and the reason."""
    route = Route(SPARK, ARROW, "small part")
    assert json.loads(route.metadata()) == {
        "cdc.decode": SPARK,
        "cdc.write": ARROW,
        "cdc.why": "small part",
    }
    assert str(route) == "spark+arrow (small part)"
    assert str(Route(ARROW, ARROW, "x")) == "arrow (x)"


def test_snapshot_chunks_go_to_arrow_only_on_a_local_master_with_local_targets() -> None:
    """The snapshot's chunks are cast and appended by Arrow on a local master for local
    targets delta-rs writes; any other fact sends them to Spark, with the reason."""
    facts = planner.ChunkFacts(
        local_master=True, kinds_write_arrow=True, targets_reached=True,
        targets_writable=True,
    )  # fmt: skip
    assert planner.chunk_route(facts).write == ARROW
    for change, why in [
        ({"local_master": False}, "cluster"),
        ({"kinds_write_arrow": False}, "Spark only"),
        ({"targets_reached": False}, "does not reach a target"),
        ({"targets_writable": False}, "cannot write"),
        ({"forced": SPARK}, "drain.engine"),
    ]:
        route = planner.chunk_route(replace(facts, **change))
        assert route.write == SPARK and why in route.why, (change, route)
    assert planner.chunk_route(replace(facts, local_master=False, forced=ARROW)).write == ARROW


@pytest.mark.parametrize(
    ("layout", "why"),
    [
        ({"change_data_feed": True}, planner.CHANGE_DATA_FEED),
        ({"clustered": True}, planner.CLUSTERED),
        ({"zoneless_partitions": True}, "time zone"),
    ],
)
def test_a_target_delta_rs_does_not_write_is_written_by_spark(layout: dict, why: str) -> None:
    """A target with the change data feed, a liquid-clustered one, or one partitioned by a
    timestamp column, is written by Spark on every route and whatever drain.engine forces
    (its events still decoded and folded on the driver where they are held); the route
    names the reason."""
    for forced in (None, ARROW):
        route = planner.decode_route(replace(HELD, forced=forced, **layout))
        assert (route.decode, route.write) == (ARROW, SPARK) and why in route.why, forced
    assert planner.decode_route(replace(HELD, forced=SPARK, **layout)).why == (
        "drain.engine = spark"
    )
    decoded = Route(SPARK, SPARK, "the Arrow decoder was undecided")
    written = planner.write_route(decoded, replace(WRITABLE, decoded_by=SPARK, **layout))
    assert written.write == SPARK
    chunks = planner.ChunkFacts(
        local_master=True, kinds_write_arrow=True, targets_reached=True, targets_writable=True
    )
    chunk = planner.chunk_route(replace(chunks, forced=ARROW, **layout))
    assert chunk.write == SPARK and why in chunk.why


def test_forcing_arrow_then_spark_writes_with_spark_after_a_decline() -> None:
    """Under drain.engine = arrow+spark a part Spark had to decode (the Arrow decoder
    undecided, the fold too large to ship) is written by Spark too, the reason kept."""
    route = Route(SPARK, SPARK, "1,000 bytes of rows to ship to Spark, over 1")
    written = planner.write_route(route, replace(WRITABLE, decoded_by=SPARK, forced=SHIPPED))
    assert written == Route(SPARK, SPARK, "1,000 bytes of rows to ship to Spark, over 1")


@pytest.mark.parametrize("value", ["auto", *planner.FORCEABLE])
def test_drain_engine_takes_auto_and_every_forceable_route(value: str) -> None:
    """[drain] engine: auto (None: the planner's choice) or one of the forceable routes; any
    other value is refused, naming the ones there are."""
    from cdc import config
    from cdc.errors import ConfigError

    base = {
        "source": {"dsn": "postgresql://x/y", "queue": "q", "consumer": "c"},
        "target": {"path": "/data/delta"},
        "tables": [{"source": "public.orders", "target": "orders"}],
    }
    parsed = config.parse({**base, "drain": {"engine": value}})
    assert parsed.drain.engine == (None if value == "auto" else value)
    with pytest.raises(ConfigError, match="auto, arrow, spark, arrow\\+spark"):
        config.parse({**base, "drain": {"engine": "driver"}})
