"""``cdc sql``: a query, or statements read from the terminal or stdin, over a pipeline's
replicated tables, on the engine cdc.ops.query_engine chooses: DataFusion through delta-rs
without a JVM (nothing of Spark imported: cdc.cli.parser builds this command's parser alone),
or Spark SQL."""

from __future__ import annotations

import argparse
import logging

from cdc import config, errors
from cdc.cli import exitcodes
from cdc.cli.common import check_source
from cdc.config import add_config_argument
from cdc.ops import query_engine, query_shell, query_text
from cdc.ops.query_shell import Queries
from cdc.pipeline.tables import resolved

log = logging.getLogger("cdc.sql")

HELP = "SQL over the replicated tables (named as their targets), on DataFusion or Spark"


def add_arguments(sp: argparse.ArgumentParser) -> None:
    """The options of ``cdc sql`` (but --conf, which every Spark command takes: cdc.cli.parser)."""
    sp.add_argument(
        "query",
        nargs="?",
        help="a query, e.g. 'select count(*) from orders'; without one, statements ending in ;"
        " are read from the terminal or stdin (\\q or end of input quits)",
    )
    add_config_argument(sp)
    sp.add_argument("--limit", type=int, default=100, help="rows shown, 0 for all (%(default)s)")
    sp.add_argument("--format", default="table", help="table, json (lines) or csv")
    sp.add_argument(
        "--engine",
        choices=query_engine.ENGINES,
        default=query_engine.AUTO,
        help="datafusion: delta-rs' DataFusion SQL, no JVM; spark: Spark SQL; auto: datafusion"
        " when every table is a path delta-rs reads and the master is local, else spark"
        " (-v says why) (%(default)s)",
    )
    tick = sp.add_mutually_exclusive_group()
    tick.add_argument(
        "--at-tick",
        type=int,
        metavar="N",
        help="read every table as of tick N (each at its last version whose tick is at or below N)",
    )
    tick.add_argument(
        "--consistent",
        action="store_true",
        help="read every table as of the last tick whose batch is finished: no source"
        " transaction shows in one table without its rows in the others",
    )


def cmd_sql(args: argparse.Namespace) -> int:
    """A query (or interactive statements) over the pipeline's tables."""
    query_text.check_format(args.format)  # before the JVM starts
    queries = open_queries(args)
    try:
        if args.query is None:  # interactive: statements from the terminal or stdin
            failed = query_shell.interactive(queries, args.limit, args.format)
            return exitcodes.COULD_NOT_RUN if failed else exitcodes.OK
        text = queries.run(args.query, args.limit, args.format)
        if text:
            print(text)
        return exitcodes.OK
    finally:
        queries.close()


def open_queries(args: argparse.Namespace) -> Queries:
    """The session of the engine cdc.ops.query_engine chooses, over the --config pipeline's
    tables (at --at-tick's or --consistent's versions): DataFusion through delta-rs without a
    JVM, or Spark (auto takes Spark when a table turns out to have a feature delta-rs'
    QueryBuilder refuses). The choice and why: a debug line (-v)."""
    loaded = config.load(args.config)
    if args.engine == query_engine.SPARK:
        check_source(loaded, args.config)  # before the JVM: a wrong DSN fails at once
    pipeline = resolved(loaded)  # pattern entries: the tables they match
    settings = query_engine.settings(pipeline, args.conf)
    choice = query_engine.choose(pipeline, args.engine, settings, args.query)
    pins = query_engine.pins(pipeline, args.at_tick, args.consistent)
    versions = None if pins is None else pins.versions
    if choice.engine == query_engine.DATAFUSION:
        from cdc.ops.query_datafusion import DataFusionQueries, NotReadable

        try:
            queries = DataFusionQueries(pipeline, versions, settings)
            log.debug("cdc sql: engine %s: %s", choice.engine, choice.reason)
            return queries
        except NotReadable as exc:
            if args.engine != query_engine.AUTO:
                raise errors.ConfigError(f"{exc}: query it with --engine spark") from None
            choice = query_engine.Choice(query_engine.SPARK, str(exc))
    log.debug("cdc sql: engine %s: %s", choice.engine, choice.reason)
    from cdc import spark
    from cdc.ops.query import SparkQueries

    if args.engine != query_engine.SPARK:
        check_source(loaded, args.config)
    return SparkQueries(pipeline, spark.pipeline_session(pipeline, "cdc-sql", args.conf), versions)
