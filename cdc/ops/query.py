"""`cdc sql`: Spark SQL over a pipeline's replicated tables.

What a query can name:

- a catalog target (``db.table``) by its own name: the session registers it when it starts
  (cdc.targets.catalog), so ``describe detail db.table`` and ``show tblproperties db.table``
  work;
- a path target by its target name (``/`` becomes ``_``; the quarantine is ``_quarantine``):
  with Spark's in-memory catalog (no metastore configured) a table of the session's
  ``default`` database, registered at its path (``describe detail`` works too); with a
  metastore, a temporary view (a query writes nothing into the metastore).

Every Spark error (a syntax error, an unknown table or column, a failure while running) is
one line: ``ConfigError`` with Spark's first line and, for an unknown table, the tables there
are. Without a query, ``interactive`` reads ``;``-terminated statements from the terminal or
stdin and runs them in the one session, until end of input or ``\\q``.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import TextIO

from pyspark.sql import DataFrame, SparkSession

from cdc.config import Pipeline
from cdc.errors import ConfigError
from cdc.targets import catalog, delta_table
from cdc.targets.table import TableRef

log = logging.getLogger(__name__)

FORMATS = ("table", "json", "csv")
QUIT = "\\q"
PROMPT, MORE = "cdc> ", "  -> "


def view_name(target: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", target)


def register(pipeline: Pipeline, spark: SparkSession) -> list[str]:
    """Names every target that exists (and the quarantine) for queries; the names."""
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


def check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise ConfigError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")


def run(pipeline: Pipeline, spark: SparkSession, query: str, limit: int, fmt: str) -> str:
    """The result of one query, rendered."""
    check_format(fmt)
    return execute(spark, query, limit, fmt, register(pipeline, spark))


def execute(spark: SparkSession, statement: str, limit: int, fmt: str, names: list[str]) -> str:
    """Runs one statement and renders its rows; any Spark error as a one-line ConfigError."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    # PySpark logs each analysis error with its query context (logger SQLQueryContextLogger)
    # before raising it: the error is said once, as the one line below
    logging.getLogger("SQLQueryContextLogger").disabled = True
    try:
        return render(spark.sql(statement), limit, fmt)
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


def render(frame: DataFrame, limit: int, fmt: str) -> str:
    """The frame's rows (up to limit, 0: all) as text; nothing for a statement without
    columns (DDL, SET)."""
    rows = frame.limit(limit).collect() if limit > 0 else frame.collect()
    names = frame.columns
    if not names:
        return ""
    if fmt == "json":
        return "\n".join(json.dumps(r.asDict(recursive=True), default=str) for r in rows)
    if fmt == "csv":
        import csv
        import io

        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
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


def split(text: str) -> tuple[list[str], str]:
    """The complete ``;``-terminated statements of text (quotes and comments respected;
    statements holding only comments left out), and the unfinished rest."""
    done: list[str] = []
    start, i, quote, content = 0, 0, "", False
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\" and quote != "`":
                i += 2
                continue
            if c == quote:
                quote = ""
        elif text.startswith("--", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:  # open until a later line closes it
                return done, text[start:]
            i = end + 2
            continue
        elif c == ";":
            if content:
                done.append(text[start:i].strip())
            start, content = i + 1, False
        elif not c.isspace():
            content = True
            quote = c if c in "'\"`" else ""
        i += 1
    return done, text[start:] if content or quote else ""


def _terminal_lines(read: Callable[[str], str], buffered: Callable[[], bool]) -> Iterator[str]:
    """Lines typed at a prompt (its continuation prompt while a statement is open)."""
    while True:
        try:
            yield read(MORE if buffered() else PROMPT)
        except (EOFError, KeyboardInterrupt):  # Ctrl-D, Ctrl-C at the prompt: quit
            return


def interactive(
    pipeline: Pipeline,
    spark: SparkSession,
    limit: int,
    fmt: str,
    lines: Iterable[str] | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Runs the statements of lines (default: the terminal's, at a prompt, or stdin's) one
    after the other in this session; an error is one line on err and the next statement
    runs. Stops at the end of input or a line ``\\q``. The number of statements that failed."""
    check_format(fmt)
    out, err = out or sys.stdout, err or sys.stderr
    names = register(pipeline, spark)
    buffer = ""
    if lines is None:
        if sys.stdin.isatty():
            import readline  # noqa: F401  (line editing and history for input())

            print(
                f"cdc sql: tables {', '.join(names) or 'none yet'}; end each statement with ;"
                f" and quit with {QUIT} or Ctrl-D",
                file=err,
            )
            lines = _terminal_lines(input, lambda: bool(buffer.strip()))
        else:
            lines = sys.stdin
    failed = 0
    for line in lines:
        if line.strip() == QUIT and not buffer.strip():
            break
        statements, buffer = split(buffer + line.rstrip("\n") + "\n")
        for statement in statements:
            failed += not _run_one(spark, statement, limit, fmt, names, out, err)
    last, rest = split(buffer + ";")
    for statement in last:  # a last statement without its ;
        failed += not _run_one(spark, statement, limit, fmt, names, out, err)
    if rest.strip():
        print(f"cdc: error: unfinished statement at the end: {rest.strip()[:80]}", file=err)
        failed += 1
    return failed


def _run_one(
    spark: SparkSession,
    statement: str,
    limit: int,
    fmt: str,
    names: list[str],
    out: TextIO,
    err: TextIO,
) -> bool:
    try:
        text = execute(spark, statement, limit, fmt, names)
    except ConfigError as exc:
        print(f"cdc: error: {exc}", file=err, flush=True)
        return False
    except KeyboardInterrupt:  # Ctrl-C while it runs: cancel it, go on with the next
        spark.sparkContext.cancelAllJobs()
        print("cdc: error: cancelled", file=err, flush=True)
        return False
    if text:
        print(text, file=out, flush=True)
    return True
