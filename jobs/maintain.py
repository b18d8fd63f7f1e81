"""Maintenance job for spark-submit: OPTIMIZE (ordered by the first key column) and VACUUM the
pipeline's Delta tables; safe beside a running drain (see cdc.ops.maintain).

With the same packages as jobs/drain.py::

    spark-submit \
        --packages io.delta:delta-spark_4.2_2.13:4.4.0,org.postgresql:postgresql:42.7.14 \
        --conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension \
        --conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog \
        jobs/maintain.py --config conf/pipeline.toml [--retain-hours 168] [TARGET ...]
"""

import sys

from cdc.cli import main

if __name__ == "__main__":
    sys.exit(main(["maintain", *sys.argv[1:]]))
