"""`cdc sql`: Spark SQL over a pipeline's replicated tables, each registered as a temporary
view under its target name (``/`` becomes ``_``; the quarantine is ``_quarantine``). Catalog
targets (``db.table``) are queried by their own names."""

from __future__ import annotations

import json
import re

from pyspark.sql import DataFrame, SparkSession

from cdc.config import Pipeline
from cdc.errors import ConfigError
from cdc.targets import delta_table

FORMATS = ("table", "json", "csv")


def view_name(target: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", target)


def register(pipeline: Pipeline, spark: SparkSession) -> list[str]:
    """Registers every path target that exists (and the quarantine) as a view; their names."""
    names = []
    for target in [*(t.target for t in pipeline.tables), pipeline.quarantine]:
        ref = pipeline.table(target)
        if not ref.is_path or not delta_table.exists(spark, ref):
            continue
        name = view_name(target)
        delta_table.read(spark, ref).createOrReplaceTempView(name)
        names.append(name)
    return names


def run(pipeline: Pipeline, spark: SparkSession, query: str, limit: int, fmt: str) -> str:
    if fmt not in FORMATS:
        raise ConfigError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    views = register(pipeline, spark)
    try:
        frame = spark.sql(query)
    except Exception as exc:  # Spark's analysis errors: say what is there to query
        if "TABLE_OR_VIEW_NOT_FOUND" in str(exc):
            raise ConfigError(
                f"{str(exc).splitlines()[0]} (tables here: {', '.join(views) or 'none yet'})"
            ) from None
        raise
    return render(frame, limit, fmt)


def render(frame: DataFrame, limit: int, fmt: str) -> str:
    rows = frame.limit(limit).collect() if limit > 0 else frame.collect()
    names = frame.columns
    if fmt == "json":
        return "\n".join(json.dumps(r.asDict(recursive=True), default=str) for r in rows)
    if fmt == "csv":
        import csv
        import io

        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(names)
        writer.writerows([["" if v is None else v for v in r] for r in rows])
        return out.getvalue().rstrip("\n")
    cells = [[("NULL" if v is None else str(v)) for v in r] for r in rows]
    widths = [max([len(n), *(len(c[i]) for c in cells)]) for i, n in enumerate(names)]
    lines = ["  ".join(n.ljust(w) for n, w in zip(names, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    lines.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(lines)
