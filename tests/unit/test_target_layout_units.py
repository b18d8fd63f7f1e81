"""A target's layout from its options (cdc.targets.layout): the columns and types it takes,
the properties it sets, the comments it keeps, with no server and no JVM."""

from __future__ import annotations

import pytest

from cdc.errors import ConfigError
from cdc.targets.layout import CHANGE_DATA_FEED, layout_of, properties_of
from cdc.targets.options import TableOptions

SCHEMA = [("id", "int"), ("country", "string"), ("day", "date"), ("at", "timestamp")]


def test_the_layout_names_the_options_columns_and_properties() -> None:
    """cluster_by and partition_by are kept as written; the properties are the file's with
    the change data feed; the comments of the target's columns only."""
    options = TableOptions(
        partition_by=("day",),
        change_data_feed=True,
        properties=(("delta.logRetentionDuration", "interval 60 days"),),
    )
    comments = {"id": "the key", "dropped": "not in the target"}
    layout = layout_of(options, SCHEMA, comments, "t")
    assert layout.partition_by == ("day",) and not layout.clustered
    assert layout.change_data_feed
    assert dict(layout.properties) == {
        "delta.logRetentionDuration": "interval 60 days",
        CHANGE_DATA_FEED: "true",
    }
    assert layout.comments == (("id", "the key"),)
    assert layout.comment("id") == "the key" and layout.comment("country") is None
    assert not layout.zoneless_partitions
    clustered = layout_of(TableOptions(cluster_by=("country", "day")), SCHEMA, {}, "t")
    assert clustered.clustered and clustered.cluster_by == ("country", "day")


def test_defaults_set_nothing() -> None:
    """No option: no layout, no property."""
    assert properties_of(TableOptions()) == {}
    layout = layout_of(TableOptions(), SCHEMA, {}, "t")
    assert (layout.cluster_by, layout.partition_by, layout.properties) == ((), (), ())
    assert not layout.change_data_feed


def test_a_timestamp_partition_is_a_planner_fact() -> None:
    """A partition column of type timestamp (an instant) marks the layout: delta-rs writes
    its values without their zone (cdc.engines.planner.ZONELESS_PARTITIONS)."""
    assert layout_of(TableOptions(partition_by=("at",)), SCHEMA, {}, "t").zoneless_partitions


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (TableOptions(cluster_by=("nope",)), r"target t: cluster_by names nope, not a column"),
        (TableOptions(partition_by=("ID",)), r"partition_by names ID, not a column"),
        (TableOptions(partition_by=("country",)), r"partition_by column country \(string\)"),
    ],
)
def test_a_column_the_target_cannot_take_is_refused(options: TableOptions, message: str) -> None:
    """A layout column that is not a target column (names compare exactly), or a partition
    column whose values a partition does not keep, is refused naming it and the way out."""
    with pytest.raises(ConfigError, match=message):
        layout_of(options, SCHEMA, {}, "t")
