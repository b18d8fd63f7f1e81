"""A target's layout and table properties, from its table's options (cdc.targets.options) and
its source's columns: what the Delta adapter creates the table with
(cdc.targets.delta.on_spark ``ensure``) and keeps set on it. Plain values, no Spark.

- ``cluster_by``: Delta's liquid clustering, ``CLUSTER BY`` when the table is created;
  ``cdc maintain``'s OPTIMIZE then clusters the files by those columns (and never orders
  them by ZORDER, which Delta refuses on a clustered table: cdc.ops.maintain);
- ``partition_by``: the partition columns when the table is created, of the types whose
  values a Delta partition keeps as they are on both engines (``PARTITION_TYPES``): Spark's
  writer stores an empty string in a partition as NULL (delta-rs keeps it), and delta-rs 1.6
  misreads a negative decimal partition value above -1 (``-0.01`` read as ``0.-1``, which
  locks every delta-rs reader out of the table), so a text, binary, decimal or float column is
  refused, with cluster_by as the way out;
- ``properties``: the file's, and ``delta.enableChangeDataFeed = true`` with
  ``change_data_feed``: set when the table is created, and set again when the table holds
  another value (a property the file no longer names keeps its value);
- the source's column comments (``COMMENT ON COLUMN``) as the Delta columns' comments, when
  the table is created and when a column is added to it.

Clustering and partitioning are the table's from its creation: a layout named later is not
applied to an existing table (Delta's ``ALTER TABLE ... CLUSTER BY`` does it by hand). A
layout column that is not a column of the target is refused (ConfigError: the table fails,
with the message).

What delta-rs does not write of a layout is a fact of the route planner
(cdc.engines.planner), which gives such a target to Spark: ``change_data_feed`` (delta-rs 1.6
fails a MERGE on such a table when a source row matches no clause), ``clustered`` (it refuses
the clustering feature) and ``zoneless_partitions`` (it writes a timestamp partition value
without its zone, which Spark reads in the reader's session time zone).
"""

from __future__ import annotations

from dataclasses import dataclass

from cdc.errors import ConfigError
from cdc.targets.options import TableOptions

__all__ = ["CHANGE_DATA_FEED", "PARTITION_TYPES", "Layout", "layout_of", "properties_of"]

CHANGE_DATA_FEED = "delta.enableChangeDataFeed"
# the Spark types a partition column may have: their values come back as they went in, on
# both engines and in every reader (see the module docstring)
PARTITION_TYPES = ("short", "int", "long", "date", "timestamp", "timestamp_ntz", "boolean")
ZONED = "timestamp"  # a partition value of this type is an instant


@dataclass(frozen=True)
class Layout:
    """How a target is laid out and what it is told (see the module docstring)."""

    cluster_by: tuple[str, ...] = ()
    partition_by: tuple[str, ...] = ()
    properties: tuple[tuple[str, str], ...] = ()  # (name, value), set on the table
    comments: tuple[tuple[str, str], ...] = ()  # (column, comment) of the source's columns
    zoneless_partitions: bool = False  # a partition column is a timestamp (an instant)

    @property
    def clustered(self) -> bool:
        return bool(self.cluster_by)

    @property
    def change_data_feed(self) -> bool:
        return dict(self.properties).get(CHANGE_DATA_FEED) == "true"

    def comment(self, column: str) -> str | None:
        return dict(self.comments).get(column)


def properties_of(options: TableOptions) -> dict[str, str]:
    """The table properties the options ask for: the file's, and the change data feed."""
    wanted = dict(options.properties)
    if options.change_data_feed:
        wanted[CHANGE_DATA_FEED] = "true"
    return wanted


def layout_of(
    options: TableOptions,
    schema: list[tuple[str, str]],
    comments: dict[str, str],
    where: str,
) -> Layout:
    """The layout of a target of this schema ((name, Spark type) list, the kind's columns)
    under the options; comments: the source columns' (name -> comment), those of the target's
    columns kept. ConfigError, naming where (the target), for a layout column the target lacks
    or a partition column of a type a partition does not keep."""
    types = {name: kind for name, kind in schema}
    for key, chosen in (("cluster_by", options.cluster_by), ("partition_by", options.partition_by)):
        missing = [c for c in chosen if c not in types]
        if missing:
            raise ConfigError(
                f"target {where}: {key} names {', '.join(missing)}, not a column of the target"
                f" (its columns: {', '.join(types)}); name target columns, exactly as spelled"
            )
    unkept = [f"{c} ({types[c]})" for c in options.partition_by if types[c] not in PARTITION_TYPES]
    if unkept:
        raise ConfigError(
            f"target {where}: partition_by column {', '.join(unkept)} cannot be a partition"
            f" column: a partition keeps the values of {', '.join(PARTITION_TYPES)} columns as"
            " they are, not others (Spark stores an empty string as NULL, delta-rs misreads"
            " negative decimals); cluster by it instead (cluster_by = [...])"
        )
    return Layout(
        cluster_by=options.cluster_by,
        partition_by=options.partition_by,
        properties=tuple(properties_of(options).items()),
        comments=tuple((n, text) for n, text in comments.items() if n in types),
        zoneless_partitions=any(types[c] == ZONED for c in options.partition_by),
    )
