"""The pipeline configuration (``conf/pipeline.toml``), checked with messages naming the key.

::

    [source]
    dsn = "postgresql://..."      # or the environment's CDC_DSN
    queue = "cdc_events"
    consumer = "delta"
    queue_schema = "cdc"          # "pgq" consumes a real PgQ queue
    max_events = 1000000          # several ticks join into one batch up to this many events
    jdbc_min_events = 2000000     # larger batches: Spark reads them over JDBC, in slices
                                  # (default: 2000000 on a local master, 600000 on a cluster)
    jdbc_partitions = 8           # ... this many, by ev_id ranges
    jdbc_url = "jdbc:postgresql://db:5432/shop"  # JDBC's URL instead of the DSN's (which has
                                  # none over a unix socket); the DSN's role and password go
                                  # with it (no ${NAME} in [source]: values as written)

    [target]
    path = "/data/delta"          # one Delta table per source table below it

    [[tables]]
    source = "public.orders"      # schema.table; quote names holding dots: '"my.schema"."T"'
    target = "orders"             # a path under target.path, or a catalog table name
    mode = "mirror"               # or "history"

    [[tables]]                    # a RULE: its source holds * or ? (globs, cdc.names)
    source = "sales.*"            # every table of schema sales ...
    exclude = ["sales.tmp_*"]     # ... but these (schema.table globs)
    target = "sales_{table}"      # a template: {schema}, {table}; default "{table}"
    mode = "mirror"

    [drain]
    memory_budget = "2GiB"        # the driver's memory for a batch, beside the JVM heap
    spill_dir = "/mnt/shared/cdc" # a larger batch is spilled here, for Spark (default: a
                                  # temporary folder on a local master; a cluster needs one
                                  # that every executor reads)
    engine = "auto"               # auto: the route planner picks per table
                                  # (cdc.engines.planner); "spark", "arrow" or "arrow+spark"
                                  # (the driver's fold, Spark's MERGE) forces one

    [metrics]
    port = 9187                   # a --follow drain serves Prometheus metrics here

    [spark]                       # optional: Spark settings of the session (cdc.spark)
    master = "local[4]"           # the setting spark.master (default local[2])
    "spark.driver.memory" = "4g"  # any Spark setting, by its full name; strings, numbers, booleans
    "spark.sql.shuffle.partitions" = 8
    "spark.hadoop.fs.s3a.secret.key" = "${AWS_SECRET_ACCESS_KEY}"  # from the environment

The ``[spark]`` settings go over the local session's defaults (cdc.spark.LOCAL_CONF); a
command's ``--conf NAME=VALUE`` goes over them. Under ``spark-submit`` a setting the submitter
gave (``--conf``, ``--driver-memory``) wins over the file's. ``${NAME}`` in a value is the
environment variable NAME, read when the session starts (cdc.spark.resolve_settings), so that
credentials need not be written in the file; no message or log shows a value.
``spark.sql.warehouse.dir`` defaults to ``_spark_warehouse`` under target.path when a target
is a catalog name, else to a temporary folder: never a ``spark-warehouse`` folder in the
working directory. A catalog-named target (``db.table``) keeps its files below
``target.path/_spark_warehouse`` and is registered in Spark's catalog under its name
(cdc.targets.catalog).

A ``[[tables]]`` entry whose source holds * or ? is a rule, resolved against the catalog by
``cdc.pipeline.tables`` (cdc.config.model says what ``Pipeline`` holds before and after). Two
explicit entries whose targets are one table (``default.Orders`` and ``default.orders``;
``a/b`` and ``a//b/``) are a ConfigError naming both (cdc.config.claims).

The package: ``model`` holds the values (``Pipeline``, ``Source``, ``TableMap``...) and their
defaults, ``load`` reads and checks the file, ``claims`` the targets kept beside the tables,
``spark_settings`` the ``[spark]`` section, ``arguments`` the --config and --dsn options.
Callers import the names below from ``cdc.config``. It imports nothing of cdc.pipeline and
of cdc.targets only what names a target (catalog_names, registry, table).
"""

from cdc.config.arguments import add_config_argument, add_dsn_argument, dsns_of
from cdc.config.claims import QUARANTINE, RESERVED_SUFFIXES, clash_text, reserved_claims
from cdc.config.load import SIZE, SIZE_UNITS, load, parse, parse_size
from cdc.config.model import (
    DSN_ENV,
    MODES,
    QUEUE_SCHEMAS,
    DrainSettings,
    Pipeline,
    Refused,
    Source,
    TableMap,
    default,
)
from cdc.config.spark_settings import ENV_REFERENCE
from cdc.names import parse_table_name  # where the commands have long imported it from

__all__ = [
    "DSN_ENV",
    "ENV_REFERENCE",
    "MODES",
    "QUARANTINE",
    "QUEUE_SCHEMAS",
    "RESERVED_SUFFIXES",
    "SIZE",
    "SIZE_UNITS",
    "DrainSettings",
    "Pipeline",
    "Refused",
    "Source",
    "TableMap",
    "add_config_argument",
    "add_dsn_argument",
    "clash_text",
    "default",
    "dsns_of",
    "load",
    "parse",
    "parse_size",
    "parse_table_name",
    "reserved_claims",
]
