"""Snapshot job for spark-submit: loads captured tables' existing rows into their Delta tables,
consistently with the queue (see cdc.pipeline.snapshot). Attach the tables' triggers first.

From the repository root, with the same packages as jobs/drain.py::

    spark-submit \
        --packages io.delta:delta-spark_4.2_2.13:4.4.0,org.postgresql:postgresql:42.7.14 \
        --conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension \
        --conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog \
        jobs/snapshot.py public.orders [public.customers ...] --config conf/pipeline.toml

The table is copied in chunks of ``--chunk-rows`` rows by key, each in its own short
PostgreSQL snapshot, while the drain goes on; killed, it resumes after the last chunk saved.
Over a TCP DSN the executors read each chunk in parallel, in ``--partitions`` key ranges.
"""

import sys

from cdc.cli import main

if __name__ == "__main__":
    sys.exit(main(["snapshot", *sys.argv[1:]]))
