"""What went wrong, in one line: the classification of the errors a drain (or a snapshot,
verify, resync) meets, for the one-line messages of the ``cdc`` command and for the drain's
isolation of a failing table.

- **Infrastructure** (the target folder is read-only or full, PostgreSQL went away, out of
  memory): nothing is wrong with one table; the run stops with a one-line message, nothing
  finished, nothing lost, and a rerun after the fix goes on.
- **Table** (a table's data or schema cannot be applied: Spark's analysis or a cast refused
  its MERGE, the table is gone, ``TableUnappliable``): that table is marked failing and the
  others go on (cdc.pipeline.drain).
- Anything else stops the run like an infrastructure failure (when unsure, stop: a rerun is
  cheaper than a resync).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import psycopg

from cdc.errors import CdcError, ConfigError, TableUnappliable

INFRA = "infrastructure"
TABLE = "table"
OTHER = "other"

# (marker in the error's text, what it means, what to do); the first that matches wins
_INFRA_MARKERS: tuple[tuple[str, str, str], ...] = (
    (
        "No space left on device",
        "the disk of {where} is full",
        "free space (cdc maintain with VACUUM, a shorter --retain-hours), then run again",
    ),
    (
        "Disk quota exceeded",
        "the disk quota of {where} is exhausted",
        "free space or raise the quota, then run again",
    ),
    (
        "Read-only file system",
        "{where} is on a read-only file system",
        "make it writable, then run again",
    ),
    (
        "Mkdirs failed",
        "{where} is read-only or not a folder (a folder could not be created in it)",
        "make it a writable folder, then run again",
    ),
    (
        "Not a directory",
        "{where} is not a folder (a path component is a file)",
        "make it a writable folder, then run again",
    ),
    (
        "ParentNotDirectoryException",
        "{where} is not a folder (a path component is a file)",
        "make it a writable folder, then run again",
    ),
    (
        "Permission denied",
        "{where} is not writable (permission denied)",
        "give the drain's user write access, then run again",
    ),
    (
        "AccessDeniedException",
        "{where} is not writable (access denied)",
        "give the drain's user write access, then run again",
    ),
    (
        "OutOfMemoryError",
        "out of memory",
        "give Spark more memory (spark.driver.memory) or lower source.max_events, then run again",
    ),
    (
        "Java heap space",
        "out of memory",
        "give Spark more memory (spark.driver.memory) or lower source.max_events, then run again",
    ),
    (
        "Connection refused",
        "a connection was refused",
        "check that the server is up, then run again",
    ),
    (
        "Py4JNetworkError",
        "the Spark JVM went away",
        "look at the JVM's log (run with -v), then run again",
    ),
)

# Spark / Delta error classes and markers of a table's data or schema that cannot be applied
_TABLE_MARKERS = (
    "AnalysisException",
    "CAST_INVALID_INPUT",
    "CAST_OVERFLOW",
    "NUMERIC_VALUE_OUT_OF_RANGE",
    "DATATYPE_MISMATCH",
    "DELTA_FAILED_TO_MERGE_FIELDS",
    "DELTA_NOT_NULL_CONSTRAINT_VIOLATED",
    "NOT_NULL_CONSTRAINT_VIOLATED",
    "DELTA_DUPLICATE_COLUMNS_FOUND",
    "COLUMN_ALREADY_EXISTS",
    "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE",
    "DELTA_COLUMN_NOT_FOUND",
    "UNRESOLVED_COLUMN",
    "INVALID_IDENTIFIER",
    "SparkNumberFormatException",
    "SparkDateTimeException",
    "SparkArithmeticException",
)

_PATH = re.compile(
    r"(?:file:|hdfs://|s3a?://|abfss?://|gs://)[^\s'\"(),]+|(?<![\w.])/[^\s'\"(),:]+"
)


@dataclass(frozen=True)
class Failure:
    kind: str  # INFRA, TABLE or OTHER
    message: str  # one line: the cause and what to do


def _text(exc: BaseException) -> str:
    """The error's text with its causes (Py4J errors carry the Java trace in str())."""
    parts = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        parts.append(f"{type(current).__name__}: {current}")
        current = current.__cause__ or current.__context__
    return "\n".join(parts)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("at ", "JVM stacktrace", "Traceback")):
            return line[:400]
    return type(exc).__name__


def _where(text: str, marker: str, folder: str | None) -> str:
    """The path the error names (on the line of the marker, else anywhere), else folder."""
    lines = [line for line in text.splitlines() if marker in line] + text.splitlines()
    for line in lines:
        found = _PATH.search(line)
        if found:
            path = found.group(0).removeprefix("file:")
            return f"target folder {folder} ({path})" if folder else path
    return f"target folder {folder}" if folder else "the target folder"


def classify(exc: BaseException, folder: str | None = None) -> Failure:
    """The kind of an error and its one-line message. folder: the pipeline's target folder,
    named in the message of a storage failure."""
    if isinstance(exc, TableUnappliable):
        return Failure(TABLE, str(exc))
    if isinstance(exc, psycopg.OperationalError):
        return Failure(
            INFRA,
            f"PostgreSQL connection failed or was lost: {_first_line(exc)}; check the server,"
            " then run again (nothing was finished: the batch is still open)",
        )
    if isinstance(exc, ConfigError):
        return Failure(TABLE, str(exc))
    if isinstance(exc, CdcError | psycopg.Error):
        return Failure(OTHER, str(exc))
    if isinstance(exc, MemoryError):
        return Failure(INFRA, "out of memory: lower source.max_events, then run again")
    text = _text(exc)
    for marker, what, todo in _INFRA_MARKERS:
        if marker in text:
            where = _where(text, marker, folder)
            lines = (line.strip().lstrip(": ") for line in text.splitlines() if marker in line)
            detail = next(lines, marker)
            return Failure(
                INFRA,
                f"{what.format(where=where)}: {detail[:300]}; {todo}"
                " (nothing was finished: the batch is still open, nothing is lost)",
            )
    if any(marker in text for marker in _TABLE_MARKERS):
        return Failure(TABLE, f"{type(exc).__name__}: {_first_line(exc)}")
    return Failure(OTHER, f"{type(exc).__name__}: {_first_line(exc)}")
