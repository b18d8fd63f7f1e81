"""A widened column's rewrite (cdc.targets.delta.reshape.rewrite_types, the default
``type_changes`` of tables up to cdc.targets.schema_changes.REWRITE_MAX_BYTES): seconds by
table size, on the drain's own Spark session (a local master).

Run from the repository root::

    .venv/bin/python -m bench.rewrite --rows 1000000,4000000,16000000 --json out.json
    .venv/bin/python -m bench.rewrite --quick              # smoke run: 200,000 rows

Per size, a Delta table of ``--rows`` rows like a replicated one (an int key, an int column
to widen, a numeric(12,2), a text of about 40 characters, a timestamp) is written by Spark in
files of Spark's default size, then rewritten with the int column as bigint: one commit, as
the drain does it. Measured: the rewrite's seconds (the median of ``--reps``, each on a fresh
copy of the table), the table's bytes (its live files), and seconds per GiB; the rows are
checked after each rewrite (count, and the widened column's sum).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import git_state, machine_info, progress, write_json

GIB = 1 << 30


def _table(spark: Any, path: str, rows: int) -> None:
    from pyspark.sql import functions as F

    frame = spark.range(rows).select(
        F.col("id").cast("int").alias("id"),
        (F.col("id") * 7 % 1_000_003).cast("int").alias("x"),
        (F.col("id") / 100).cast("decimal(12,2)").alias("p"),
        F.concat(F.lit("customer-"), F.sha1(F.col("id").cast("string")).substr(1, 31)).alias("v"),
        F.timestamp_seconds(F.col("id") + 1_700_000_000).alias("ts"),
    )
    frame.write.format("delta").save(path)


def measure(spark: Any, work: Path, rows: int, reps: int) -> dict[str, Any]:
    """The rewrite's seconds on a table of rows, reps times (each on a fresh copy)."""
    from pyspark.sql import functions as F

    from cdc.targets import delta_table
    from cdc.targets.table import TableRef

    source = str(work / f"t{rows}")
    _table(spark, source, rows)
    expected = spark.read.format("delta").load(source).agg(F.sum("x")).first()[0]
    seconds = []
    size = 0
    for rep in range(reps):
        copy = work / f"t{rows}-{rep}"
        shutil.copytree(source, copy)
        ref = TableRef(str(copy))
        found = delta_table.detail(spark, ref)
        size = found.size
        started = time.monotonic()
        delta_table.rewrite_types(spark, ref, {"x": "bigint"}, found, "x int -> long", {})
        seconds.append(time.monotonic() - started)
        check = spark.read.format("delta").load(str(copy))
        assert dict(check.dtypes)["x"] == "bigint"
        assert check.count() == rows and check.agg(F.sum("x")).first()[0] == expected
        shutil.rmtree(copy)
    median = statistics.median(seconds)
    progress(
        f"{rows:,} rows, {size / GIB:.3f} GiB: {median:.1f} s ({median / (size / GIB):.1f} s/GiB)"
    )
    return {
        "rows": rows,
        "bytes": size,
        "seconds": seconds,
        "median_s": median,
        "s_per_gib": median / (size / GIB),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="1000000,4000000,16000000", help="table sizes, in rows")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one small table, one rep")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    sizes = [200_000] if args.quick else [int(n) for n in args.rows.split(",")]
    reps = 1 if args.quick else args.reps

    from cdc import spark as spark_module

    spark = spark_module.session("bench-rewrite")
    with tempfile.TemporaryDirectory(prefix="bench-rewrite-") as folder:
        results = [measure(spark, Path(folder), rows, reps) for rows in sizes]
    spark.stop()
    facts = {"machine": machine_info(), "git": git_state(), "results": results}
    if args.json:
        write_json(args.json, facts)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
