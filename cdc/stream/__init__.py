"""A Spark streaming source over the queue: ``spark.readStream.format("cdc")``.

Any Spark job consumes the captured changes with a consumer of its own, beside the drain::

    from cdc import stream

    stream.register(spark)                        # the format "cdc" in this session
    events = (
        spark.readStream.format("cdc")
        .option("config", "conf/pipeline.toml")   # its [source]; or dsn and queue
        .option("consumer", "reports")            # the stream's own consumer
        .load()
    )
    orders = stream.read(spark, table="public.orders", config=..., consumer=...)  # typed

The pieces:

- ``options``: the options, checked;
- ``offsets``: offsets are ticks; how the queue follows Spark's checkpoint (plain values);
- ``events``: an event as a row (table, op, key, columns as text, ev_id, ticks, reason);
- ``feed``: the driver's side of the queue (register, settle, open the next batch, tick);
- ``reading``: an executor's slice of a micro-batch, read from PostgreSQL;
- ``source``: the Python data source Spark calls (the one module here that needs Spark,
  with ``typed``: one table's values cast to their Spark types by the drain's casts).

docs/querying.md ("Streaming") shows a job that writes a Delta table exactly once.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from cdc.pg.pgtypes import Column

__all__ = ["FORMAT", "read", "register", "table_columns"]

FORMAT = "cdc"


def register(spark: SparkSession) -> None:
    """Makes ``spark.readStream.format("cdc")`` known to this session (again: the same)."""
    from pyspark.errors import AnalysisException

    from cdc.errors import ConfigError
    from cdc.stream.source import CdcSource

    # the source runs in Python workers started by the JVM, in its folder: a relative
    # config path is resolved against this process's (a class made here travels by value)
    here = type("CdcSourceHere", (CdcSource,), {"base_dir": os.getcwd()})
    try:
        spark.dataSource.register(here)
    except AnalysisException as exc:
        if exc.getCondition() != "DATA_SOURCE_ALREADY_EXISTS":
            raise
        raise ConfigError(
            "Spark refuses to register the format cdc in this session: another session of"
            " this application registered it, and Spark 4 lets no session made before that"
            " use or register it. Register it first, in the session that reads, before"
            " making others with newSession()"
        ) from None


def table_columns(table: str, **options: str) -> list[Column]:
    """The columns of a source table (schema.table), with their Spark types and key, read
    from the catalog of the stream's source (the same options as the stream)."""
    import psycopg

    from cdc.pg.pgtypes import keyed_columns
    from cdc.stream.options import parse

    source = parse(options).source
    schema, _, name = table.partition(".")
    with psycopg.connect(source.dsn, autocommit=True) as conn:
        return keyed_columns(conn, schema, name, source.capture_queue)


def read(spark: SparkSession, table: str | None = None, **options: str) -> DataFrame:
    """The stream of the queue's events (options: cdc.stream.options); with ``table``, only
    that table's events, with ``row``: their values cast to the columns' Spark types
    (cdc.stream.typed)."""
    from cdc.stream.typed import typed

    register(spark)
    reader = spark.readStream.format(FORMAT).options(**options)
    if table is None:
        return reader.load()
    return typed(reader.option("table", table).load(), table_columns(table, **options))
