"""Drain job for spark-submit: applies queue batches to Delta tables, exactly once.

``cdc submit`` builds the command (Delta's jars, the Spark settings of the pipeline file,
quiet logs); ``--print`` shows it instead of running it::

    cdc submit drain --config pipeline.toml --until-caught-up -- --master yarn

By hand, with the package installed in the Python of Spark's driver and executors (the wheel:
docs/operations.md, "Running on a cluster"), this file (from a checkout, or
``python -c 'import cdc.jobs as j; print(j.script("drain"))'`` where the package is
installed)::

    spark-submit \
        --packages io.delta:delta-spark_4.2_2.13:4.4.0,org.postgresql:postgresql:42.7.14 \
        --conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension \
        --conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog \
        jobs/drain.py --config pipeline.toml [--once | --until-caught-up | --follow]

Instead of ``--packages``, ``--jars`` takes the jars ``cdc jars`` fetched as a comma-separated
list of files (``$(ls DIR/*.jar | paste -sd,)``), not their folder. ``cdc drain`` runs the same
code in a local Spark session.
"""

import sys

from cdc.jobs import run

if __name__ == "__main__":
    sys.exit(run("drain", sys.argv[1:]))
