"""Snapshot job for spark-submit: loads captured tables' existing rows into their Delta tables,
consistently with the queue (see cdc.pipeline.snapshot). Attach the tables' triggers first.

From the repository root, with the same packages as jobs/drain.py::

    spark-submit \
        --packages io.delta:delta-spark_4.2_2.13:4.4.0,org.postgresql:postgresql:42.7.14 \
        --conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension \
        --conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog \
        jobs/snapshot.py public.orders [public.customers ...] --config conf/pipeline.toml

Over a TCP DSN the executors read the table in parallel, in ranges of an integer first key
column (``--partitions``, default 8), all in one PostgreSQL snapshot.
"""

import sys

from cdc.cli import main

if __name__ == "__main__":
    sys.exit(main(["snapshot", *sys.argv[1:]]))
