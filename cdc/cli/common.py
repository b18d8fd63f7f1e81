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


def pipeline_and_spark(args: argparse.Namespace, app: str) -> tuple[Pipeline, SparkSession]:
    """The --config pipeline and the Spark session of a Spark command (loaded in that order:
    a bad configuration fails before Spark starts)."""
    from cdc import spark as spark_module
    from cdc.pipeline.tables import resolved

    pipeline = resolved(config.load(args.config))  # pattern entries: the tables they match
    session = spark_module.pipeline_session(pipeline, app)
    # a failure reaches the user as one line (main); Spark's own logs of it (task failures
    # with their Java traces, many lines) only with -v
    session.sparkContext.setLogLevel("WARN" if args.verbose else "OFF")
    return pipeline, session
