"""`cdc sql` on Spark: Spark SQL over a pipeline's replicated tables (``--engine spark``, and
what ``auto`` takes for catalog targets and clusters: cdc.ops.query_engine).

What a query can name:

- a catalog target (``db.table``) by its own name: the session registers it when it starts
  (cdc.targets.catalog), so ``describe detail db.table`` and ``show tblproperties db.table``
  work;
- a path target by its target name (``/`` becomes ``_``; the quarantine is ``_quarantine``):
  with Spark's in-memory catalog (no metastore configured) a table of the session's
  ``default`` database, registered at its path (``describe detail`` works too); with a
  metastore, a temporary view (a query writes nothing into the metastore).

Read at a tick (``--at-tick``, ``--consistent``: the versions cdc.ops.query_engine pins),
each table is its version (``versionAsOf``), or its columns without rows when it had no data
yet: a path target is a temporary view of that name; a catalog target, in Spark's in-memory
catalog, a view of that name over the version (``SparkQueries.close`` drops it again). In a
metastore the name is the metastore's, which a query must not change: a ConfigError says how
to read the version instead (``VERSION AS OF``).

Every Spark error (a syntax error, an unknown table or column, a failure while running) is
one line: ``ConfigError`` with Spark's first line and, for an unknown table, the tables there
are. Rows come to Python as Arrow (``toArrow``), so that dates and timestamps outside
Python's years show too, and render as the datafusion engine's do (cdc.ops.query_text).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession

from cdc.config import Pipeline
from cdc.errors import ConfigError
from cdc.ops import query_text
from cdc.ops.query_text import check_format, split, view_name
from cdc.targets import catalog, delta_table
from cdc.targets.table import TableRef

__all__ = [
    "SparkQueries",
    "answer",
    "check_format",
    "execute",
    "one_line",
    "register",
    "result",
    "run",
    "split",
    "view_name",
]

log = logging.getLogger(__name__)

ENGINE = "spark"


def register(
    pipeline: Pipeline, spark: SparkSession, pins: Mapping[str, int | None] | None = None
) -> list[str]:
    """Names every target that exists (and the quarantine) for queries; the names. pins:
    target -> the version to read (None: none yet, its columns without rows); a target not
    in pins is read at its latest version."""
    if pins is not None:
        return _register_pinned(pipeline, spark, pins)
    names = []
    catalog.register(spark, pipeline, queries=True)  # catalog targets under their names
    catalog_names = {n.lower() for n in catalog.names(pipeline)}
    session_tables = not catalog.persistent(spark)
    for target in [*(t.target for t in pipeline.tables), pipeline.quarantine]:
        ref = pipeline.table(target)
        if not delta_table.exists(spark, ref):
            continue
        if ref.name:  # registered above
            names.append(ref.name)
            continue
        name = view_name(target)
        if not session_tables:
            delta_table.read(spark, ref).createOrReplaceTempView(name)
        elif f"default.{name}".lower() in catalog_names:
            log.warning(
                "target %s is not named %s: the catalog target of that name has it; query it"
                " as delta.`%s`", target, name, ref.location,
            )  # fmt: skip
            continue
        else:
            spark.catalog.dropTempView(name)
            catalog.register_table(spark, TableRef(ref.location, f"default.{name}"))
        names.append(name)
    return names


def _register_pinned(
    pipeline: Pipeline, spark: SparkSession, pins: Mapping[str, int | None]
) -> list[str]:
    names = []
    for target in [*(t.target for t in pipeline.tables), pipeline.quarantine]:
        ref = pipeline.table(target)
        if not delta_table.exists(spark, ref):
            continue
        pinned = target in pins
        version = pins.get(target)
        if ref.name:
            _pin_catalog_target(spark, ref, pinned, version)
            names.append(ref.name)
            continue
        frame = delta_table.read(spark, ref, version)
        if pinned and version is None:
            frame = frame.where("false")
        spark.catalog.dropTempView(view_name(target))
        frame.createOrReplaceTempView(view_name(target))
        names.append(view_name(target))
    return names


def _pin_catalog_target(
    spark: SparkSession, ref: TableRef, pinned: bool, version: int | None
) -> None:
    """The catalog target's name as a view of its pinned version, in Spark's in-memory
    catalog (a table the session registered there before is dropped first: its files stay)."""
    if not pinned:
        catalog.register_table(spark, ref)
        return
    source = ref.sql_name if version is None else f"{ref.sql_name} version as of {int(version)}"
    source = f"select * from {source}" + (" where false" if version is None else "")
    if catalog.persistent(spark, ref.name):
        how = "no version yet" if version is None else f"{ref.sql_name} VERSION AS OF {version}"
        raise ConfigError(
            f"catalog target {ref.name} is named by a metastore, which a read at a tick does not"
            f" change: query {how} instead, or drop --at-tick/--consistent"
        )
    found = catalog.parts(ref.name)
    database = ".".join(catalog.quoted(p) for p in found[:-1])
    spark.sql(f"create database if not exists {database}")
    current = catalog.registered_location(spark, ref.name)
    if current is not None and current[1] != "VIEW":
        spark.sql(f"drop table {catalog.quoted(ref.name)}")  # session-only, external
    spark.sql(f"create or replace view {catalog.quoted(ref.name)} as {source}")


def run(pipeline: Pipeline, spark: SparkSession, query: str, limit: int, fmt: str) -> str:
    """The result of one query, rendered."""
    check_format(fmt)
    return execute(spark, query, limit, fmt, register(pipeline, spark))


def execute(spark: SparkSession, statement: str, limit: int, fmt: str, names: list[str]) -> str:
    """Runs one statement and renders its rows; any Spark error as a one-line ConfigError."""
    return query_text.render(answer(spark, statement, limit, names), fmt)


def answer(spark: SparkSession, statement: str, limit: int, names: list[str]) -> query_text.Result:
    """Runs one statement: its rows (up to limit, 0: all); any Spark error as a one-line
    ConfigError."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    # PySpark logs each analysis error with its query context (logger SQLQueryContextLogger)
    # before raising it: the error is said once, as the one line below
    logging.getLogger("SQLQueryContextLogger").disabled = True
    try:
        return result(spark.sql(statement), limit)
    except (PySparkException, Py4JJavaError) as exc:
        raise ConfigError(one_line(exc, names)) from None


def one_line(exc: BaseException, names: list[str]) -> str:
    """A Spark error as one line that says what to do."""
    text = str(exc).strip()
    if hasattr(exc, "java_exception"):  # Py4JJavaError: the Java message, not py4j's frame
        text = str(exc.java_exception.getMessage() or exc.java_exception.toString())
    first = text.splitlines()[0].strip() if text else type(exc).__name__
    here = f"tables here: {', '.join(names) or 'none yet'}"
    if "PARSE_SYNTAX_ERROR" in first or type(exc).__name__ == "ParseException":
        return f"{first}: fix the statement's syntax"
    if "TABLE_OR_VIEW_NOT_FOUND" in first:
        return f"{first} ({here})"
    if "EXPECT_TABLE_NOT_VIEW" in first or "EXPECT_PERMANENT_VIEW_NOT_TEMP" in first:
        return f"{first}: with a metastore, path targets are views: name the table delta.`path`"
    return first


def result(frame: DataFrame, limit: int) -> query_text.Result:
    """The frame's rows (up to limit, 0: all) as plain values: through Arrow, or collected
    when a column's type has no Arrow form (an interval of months and days)."""
    if not frame.columns:  # a statement without columns (DDL, SET) has run
        return query_text.Result([], [])
    rows = frame.limit(limit) if limit > 0 else frame
    try:
        from pyspark.sql.pandas.types import to_arrow_schema

        to_arrow_schema(frame.schema, timezone="UTC")
    except Exception as exc:  # PySpark's error for a type Arrow does not carry
        log.debug("rows collected, not through Arrow: %s", str(exc).splitlines()[0])
        return query_text.from_rows(frame.columns, rows.collect())
    return query_text.from_arrow(rows.toArrow())


class SparkQueries:
    """The Spark engine's session over a pipeline's tables (cdc.ops.query_shell.Queries)."""

    engine = ENGINE
    backslash = True  # Spark SQL's quotes take backslash escapes

    def __init__(
        self,
        pipeline: Pipeline,
        spark: SparkSession,
        pins: Mapping[str, int | None] | None = None,
    ) -> None:
        self.spark = spark
        self._pinned = pins is not None
        self._catalog_targets = [
            pipeline.table(n) for n in catalog.names(pipeline) if pins is not None
        ]
        self.names = register(pipeline, spark, pins)

    def run(self, statement: str, limit: int, fmt: str) -> str:
        return execute(self.spark, statement, limit, fmt, self.names)

    def answer(self, statement: str, limit: int = 0) -> query_text.Result:
        return answer(self.spark, statement, limit, self.names)

    def cancel(self) -> None:
        self.spark.sparkContext.cancelAllJobs()

    def close(self) -> None:
        """Drops what a read at a tick put under the targets' names (the temporary views, the
        catalog targets' views: a later query in this session registers their tables)."""
        if not self._pinned:
            return
        for name in self.names:
            if "." not in name:
                self.spark.catalog.dropTempView(name)
        for ref in self._catalog_targets:
            found = catalog.registered_location(self.spark, ref.name)
            if found is not None and found[1] == "VIEW":
                self.spark.sql(f"drop view {catalog.quoted(ref.name)}")
