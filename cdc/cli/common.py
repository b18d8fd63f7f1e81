"""What the command groups share: the database of a --dsn command, and the pipeline and Spark
session of a --config command (the configuration first: a bad one fails before Spark starts)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from cdc import config, errors

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cdc.config import Pipeline


def dsn(args: argparse.Namespace) -> str:
    """The one database of a --dsn command (or $CDC_DSN)."""
    found = config.dsns_of(args.dsn)
    if not found:
        raise errors.ConfigError(f"no database given: pass --dsn or set {config.DSN_ENV}")
    return found[0]


def pipeline_and_spark(
    args: argparse.Namespace, app: str, check: str | None = None
) -> tuple[Pipeline, SparkSession]:
    """The --config pipeline and the Spark session of a Spark command (loaded in that order:
    a bad configuration fails before Spark starts). check: a command of
    ``cdc.pg.privileges.check`` whose privileges are checked before Spark starts too."""
    from cdc import spark as spark_module
    from cdc.pipeline.tables import resolved

    loaded = config.load(args.config)
    check_source(loaded, args.config)  # before the JVM: a wrong DSN fails in one line, at once
    pipeline = resolved(loaded)  # pattern entries: the tables they match
    if check:
        from cdc.pg import privileges

        privileges.check_pipeline(pipeline, check)
    session = spark_module.pipeline_session(pipeline, app, getattr(args, "conf", None) or ())
    # Spark's log levels (-v, -q) are set by the session factory (cdc.logs.quiet_spark)
    return pipeline, session


def check_source(pipeline: Pipeline, where: str) -> None:
    """Connects to the pipeline's source database once (before a Spark command starts a JVM);
    a ConfigError in one line when it cannot, naming the file (never the DSN: it may hold a
    password)."""
    import psycopg

    try:
        psycopg.connect(pipeline.source.dsn, connect_timeout=15).close()
    except psycopg.Error as exc:
        detail = "; ".join(x.strip() for x in str(exc).strip().splitlines() if x.strip())
        raise errors.ConfigError(
            f"cannot connect to the source database (source.dsn of {where}, or ${config.DSN_ENV}):"
            f" {detail[:400] or type(exc).__name__}"
        ) from None
