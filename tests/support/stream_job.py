"""A streaming job that copies the changes of ``public.a`` into a Delta table exactly once, as
docs/querying.md ("Streaming") shows: ``spark.readStream.format("cdc")`` with a consumer of
its own, ``foreachBatch``, and Delta's idempotent writes (``txnAppId`` / ``txnVersion``: the
micro-batch id, which a rerun of the micro-batch keeps). tests/e2e/test_stream.py runs it
in a process of its own, SIGKILLs it, and runs it again from its checkpoint::

    python -m tests.support.stream_job DSN CHECKPOINT TARGET [--available-now] [--kill-after N]

``--kill-after N``: the process SIGKILLs itself right after micro-batch N's Delta commit,
before Spark records the micro-batch as committed (the rerun must not write it twice).
"""

from __future__ import annotations

import argparse
import os
import signal

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdc import spark as spark_module
from cdc import stream

APP_ID = "a-changes"  # the Delta writer's txnAppId: one per streaming query and target


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dsn")
    parser.add_argument("checkpoint")
    parser.add_argument("target")
    parser.add_argument("--available-now", action="store_true")
    parser.add_argument("--kill-after", type=int, default=None)
    args = parser.parse_args(argv)

    spark = spark_module.session("cdc-stream-job", {"spark.sql.shuffle.partitions": "1"})
    stream.register(spark)
    events = (
        spark.readStream.format("cdc")
        .option("dsn", args.dsn)
        .option("queue", "q")
        .option("consumer", "changes")
        .option("table", "public.a")
        .load()
    )

    def write(batch: DataFrame, batch_id: int) -> None:
        changes = batch.select(
            "op", F.col("key")["id"].cast("int").alias("id"), "ev_id", "tick_id", "columns"
        )
        (
            changes.write.format("delta")
            .mode("append")
            .option("txnAppId", APP_ID)
            .option("txnVersion", batch_id)
            .save(args.target)
        )
        if batch_id == args.kill_after:
            os.kill(os.getpid(), signal.SIGKILL)

    writer = events.writeStream.foreachBatch(write).option("checkpointLocation", args.checkpoint)
    if args.available_now:
        writer = writer.trigger(availableNow=True)
    writer.start().awaitTermination()


if __name__ == "__main__":
    main()
