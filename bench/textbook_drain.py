"""The textbook Spark drain: the baseline that bench.drain_vs_textbook runs ours against.

It follows the pattern Delta Lake's documentation gives for applying a table's changes from
a change feed: read the changes, keep the latest one per key (``row_number()`` over the key
by the change's position, descending), and apply them with one ``MERGE``: delete where the
latest change is a delete, update every column where the key exists, insert every column
where it does not. On this project's queue, with PgQ's functions as a PgQ user calls them:

- ``cdc.ticker(queue)`` once, then ``cdc.next_batch(queue, consumer)`` until none is left;
- the batch's events read with Spark's JDBC source from ``cdc.get_batch_events(batch)``;
- per table the batch holds events of (one aggregate finds them), the json payload decoded
  with ``from_json`` into the table's typed schema and the operation taken from
  ``ev_type``'s ``op``;
- ``cdc.finish_batch(batch)`` after the MERGEs.

It has none of the guarantees of ``cdc drain``: no commit identity (a crash between a MERGE
and ``finish_batch`` applies the batch twice), no quarantine (a value that does not parse
becomes NULL), no TRUNCATE, no partial updates, no key changes, no schema drift.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

__all__ = ["Feed", "drain", "follow"]


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


def _batch(spark: Any, conn: psycopg.Connection, url: str, props: dict, batch: int) -> Any:
    """The batch's events, read with Spark's JDBC source and cached (every table reads them)."""
    query = sql.SQL(
        "(select ev_id, ev_type, ev_data, ev_extra1 from cdc.get_batch_events({})) b"
    ).format(sql.Literal(batch))
    return spark.read.jdbc(url, query.as_string(conn), properties=props).cache()


Targets = dict[str, tuple[str, list[tuple[str, str]]]]  # source -> (Delta path, columns)


def _apply_all(spark: Any, events: Any, targets: Targets) -> int:
    """A batch's MERGEs, one per table it holds events of; returns its events."""
    tables = events.groupBy("ev_extra1").count().collect()
    for row in tables:
        if row["ev_extra1"] in targets:
            path, columns = targets[row["ev_extra1"]]
            _apply(spark, events, row["ev_extra1"], path, columns)
    return sum(row["count"] for row in tables)


@dataclass(frozen=True)
class Feed:
    """Where a drain reads and writes: the source (libpq DSN, JDBC URL and properties), the
    queue and consumer, and the targets."""

    dsn: str
    jdbc: tuple[str, dict[str, str]]
    queue: str
    consumer: str
    targets: Targets


def _step(spark: Any, conn: psycopg.Connection, feed: Feed) -> tuple[int, int] | None:
    """The next batch applied and finished: (its id, its events); None when none is ready."""
    found = conn.execute("select cdc.next_batch(%s, %s)", (feed.queue, feed.consumer))
    batch = found.fetchone()[0]
    if batch is None:
        return None
    events = _batch(spark, conn, *feed.jdbc, batch)
    count = _apply_all(spark, events, feed.targets)
    events.unpersist()
    conn.execute("select cdc.finish_batch(%s)", (batch,))
    return batch, count


def drain(spark: Any, feed: Feed) -> dict[str, Any]:
    """Drains the consumer's backlog into the targets; returns the events, batches and
    seconds."""
    events = batches = 0
    started = time.monotonic()
    with psycopg.connect(feed.dsn, autocommit=True) as conn:
        conn.execute("select cdc.ticker(%s)", (feed.queue,))
        while (done := _step(spark, conn, feed)) is not None:
            events += done[1]
            batches += 1
    return {"events": events, "batches": batches, "seconds": time.monotonic() - started}


def follow(spark: Any, feed: Feed, stopping: threading.Event, poll: float = 0.1) -> None:
    """The streaming form: ticks the queue, applies each batch as above, and polls every
    ``poll`` seconds when none is ready, until stopping is set. Logs a line per batch."""
    with psycopg.connect(feed.dsn, autocommit=True) as conn:
        conn.execute("select cdc.register_consumer(%s, %s)", (feed.queue, feed.consumer))
        while not stopping.is_set():
            tick = conn.execute("select cdc.ticker(%s)", (feed.queue,)).fetchone()[0]
            done = _step(spark, conn, feed)
            if done is None:
                stopping.wait(poll)
                continue
            # the line bench.follow.CdcProcess counts
            print(f"batch {done[0]} (tick {tick or 0}): {done[1]} events", flush=True)


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.textbook_drain --dsn DSN --root DIR --tables t1,t2 --columns
    "id bigint,v int"``: the streaming form in a process of its own, until SIGTERM."""
    from cdc import spark as cdc_spark
    from cdc.pg import jdbc

    parser = argparse.ArgumentParser(prog="bench.textbook_drain")
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--root", required=True, type=Path, help="targets: ROOT/<table>")
    parser.add_argument("--tables", required=True, help="public tables, comma-separated")
    parser.add_argument("--columns", required=True, help='"name type,...", the key first')
    parser.add_argument("--queue", default="bench")
    parser.add_argument("--consumer", default="textbook")
    parser.add_argument("--conf", default="{}", help="Spark settings, as a JSON object")
    args = parser.parse_args(argv)
    found = jdbc.jdbc_url(args.dsn)
    if found is None:
        print("bench.textbook_drain: JDBC needs a TCP DSN", file=sys.stderr)
        return 2
    columns = [tuple(c.strip().split(" ", 1)) for c in args.columns.split(",")]
    targets = {f"public.{t}": (str(args.root / t), columns) for t in args.tables.split(",") if t}
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    spark = cdc_spark.session("bench-textbook", json.loads(args.conf))
    follow(spark, Feed(args.dsn, found, args.queue, args.consumer, targets), stopping)
    return 0


if __name__ == "__main__":
    sys.exit(main())
