"""cdc.failures: which errors stop a run (infrastructure) and which isolate one table, and
the one-line messages (pure functions, no server)."""

from __future__ import annotations

import psycopg
import pytest

from cdc import failures
from cdc.errors import ConfigError, TableUnappliable
from cdc.targets import failing

MKDIRS = (
    "An error occurred while calling o123.save.\n: java.io.IOException: Mkdirs failed to create"
    " file:/data/delta/orders/_delta_log (exists=false, cwd=file:/work)\n"
    "\tat org.apache.hadoop.fs.ChecksumFileSystem.create(ChecksumFileSystem.java:515)\n" * 40
)


class Py4JJavaError(Exception):
    """Stands for py4j's error class: its str() carries the Java trace."""


@pytest.mark.parametrize(
    ("exc", "kind", "words"),
    [
        (Py4JJavaError(MKDIRS), failures.INFRA, ["/data/delta", "writable folder", "still open"]),
        (
            OSError("[Errno 28] No space left on device: '/data/delta/x'"),
            failures.INFRA,
            ["full", "free space"],
        ),
        (
            Py4JJavaError("java.lang.OutOfMemoryError: Java heap space\n\tat x"),
            failures.INFRA,
            ["out of memory", "spark.driver.memory"],
        ),
        (psycopg.OperationalError("server closed the connection"), failures.INFRA, ["PostgreSQL"]),
        (TableUnappliable("public.t", "key moved"), failures.TABLE, ["public.t", "key moved"]),
        (ConfigError("source table public.gone does not exist"), failures.TABLE, ["gone"]),
        (
            Py4JJavaError(
                "[DELTA_DUPLICATE_COLUMNS_FOUND] Found duplicate column(s): name\n\tat x"
            ),
            failures.TABLE,
            ["DELTA_DUPLICATE_COLUMNS_FOUND"],
        ),
        (ValueError("something else"), failures.OTHER, ["ValueError", "something else"]),
    ],
)
def test_classify(exc: BaseException, kind: str, words: list[str]) -> None:
    """Each error gets its kind and a single line holding the cause and what to do."""
    failure = failures.classify(exc, "/data/delta")
    assert failure.kind == kind
    assert "\n" not in failure.message
    for word in words:
        assert word in failure.message, failure.message


def test_a_targets_last_mark_is_its_state() -> None:
    """A target marked failing, then resynced, is not failing; marked again, it is."""
    rows = [
        {"target": "t", "source": "s.t", "state": "failing", "reason": "r1", "tick_id": 3, "at": 1},
        {"target": "t", "source": "s.t", "state": "resynced", "reason": "", "tick_id": 5, "at": 2},
        {"target": "u", "source": "s.u", "state": "failing", "reason": "r2", "tick_id": 4, "at": 1},
    ]
    assert list(failing.current(rows)) == ["u"]
    rows.append({**rows[0], "at": 3, "tick_id": 9})
    assert failing.current(rows)["t"].tick_id == 9
