"""Drain job for spark-submit: applies queue batches to Delta tables, exactly once.

With the package installed in the Python that Spark's driver and executors use
(``pip install cdc-delta``), from the repository root::

    spark-submit \
        --packages io.delta:delta-spark_4.2_2.13:4.4.0,org.postgresql:postgresql:42.7.14 \
        --conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension \
        --conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog \
        jobs/drain.py --config conf/pipeline.toml [--once | --until-caught-up | --follow]

Instead of ``--packages``, ``--jars`` can list the folder that ``cdc jars`` fills. ``cdc drain``
runs the same code in a local Spark session.
"""

import sys

from cdc.cli import main

if __name__ == "__main__":
    sys.exit(main(["drain", *sys.argv[1:]]))
