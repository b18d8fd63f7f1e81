"""The textbook Spark drain: the baseline that bench.drain_vs_textbook runs ours against.

It follows the pattern Delta Lake's documentation gives for applying a table's changes from
a change feed: read the changes, keep the latest one per key (``row_number()`` over the key
by the change's position, descending), and apply them with one ``MERGE``: delete where the
latest change is a delete, update every column where the key exists, insert every column
where it does not. On this project's queue, with PgQ's functions as a PgQ user calls them:

- ``cdc.ticker(queue)`` once, then ``cdc.next_batch(queue, consumer)`` until none is left;
- the batch's events read with Spark's JDBC source from ``cdc.get_batch_events(batch)``;
- per table, the json payload decoded with ``from_json`` into the table's typed schema and
  the operation taken from ``ev_type``'s ``op``;
- ``cdc.finish_batch(batch)`` after the MERGEs.

It has none of the guarantees of ``cdc drain``: no commit identity (a crash between a MERGE
and ``finish_batch`` applies the batch twice), no quarantine (a value that does not parse
becomes NULL), no TRUNCATE, no partial updates, no key changes, no schema drift.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg
from psycopg import sql

__all__ = ["drain"]


def _apply(spark: Any, events: Any, source: str, path: str, columns: list[tuple[str, str]]) -> None:
    """One table's part of a batch: decode, latest change per key, one MERGE."""
    from delta.tables import DeltaTable
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    key = columns[0][0]
    schema = ", ".join(f"`{name}` {kind}" for name, kind in columns)
    changes = (
        events.where(F.col("ev_extra1") == source)
        .select(
            "ev_id",
            F.get_json_object("ev_type", "$.op").alias("op"),
            F.from_json("ev_data", schema).alias("r"),
        )
        .select("ev_id", "op", "r.*")
    )
    latest = (
        changes.withColumn(
            "rn", F.row_number().over(Window.partitionBy(key).orderBy(F.col("ev_id").desc()))
        )
        .where("rn = 1")
        .drop("rn")
    )
    if not DeltaTable.isDeltaTable(spark, path):
        builder = DeltaTable.createIfNotExists(spark).location(path)
        for name, kind in columns:
            builder = builder.addColumn(name, kind)
        builder.execute()
    values = {name: f"s.`{name}`" for name, _ in columns}
    (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(latest.alias("s"), f"t.`{key}` = s.`{key}`")
        .whenMatchedDelete(condition="s.op = 'DELETE'")
        .whenMatchedUpdate(condition="s.op <> 'DELETE'", set=values)
        .whenNotMatchedInsert(condition="s.op <> 'DELETE'", values=values)
        .execute()
    )


def drain(
    spark: Any,
    dsn: str,
    jdbc: tuple[str, dict[str, str]],
    queue: str,
    consumer: str,
    targets: dict[str, tuple[str, list[tuple[str, str]]]],
) -> dict[str, Any]:
    """Drains the consumer's backlog into the targets (source table -> (Delta path, its
    columns, the key first)); returns the events, batches and seconds."""
    url, props = jdbc
    events_total = batches = 0
    started = time.monotonic()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("select cdc.ticker(%s)", (queue,))
        while True:
            batch = conn.execute("select cdc.next_batch(%s, %s)", (queue, consumer)).fetchone()[0]
            if batch is None:
                break
            query = sql.SQL(
                "(select ev_id, ev_type, ev_data, ev_extra1 from cdc.get_batch_events({})) b"
            ).format(sql.Literal(batch))
            events = spark.read.jdbc(url, query.as_string(conn), properties=props).cache()
            events_total += events.count()
            for source, (path, columns) in targets.items():
                _apply(spark, events, source, path, columns)
            events.unpersist()
            conn.execute("select cdc.finish_batch(%s)", (batch,))
            batches += 1
    return {"events": events_total, "batches": batches, "seconds": time.monotonic() - started}
