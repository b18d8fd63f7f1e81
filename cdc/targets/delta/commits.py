"""Delta's commits: the identity a write carries, the conflicts of concurrent writers, and
what the log's files say without reading the table.

A write given a Commit (cdc.targets.table) carries Delta's idempotent-write marks
(txnAppId / txnVersion; delta-rs writes the same ``txn`` action): a rerun of the batch after
a crash skips it. Delta commits optimistically; ``retry_conflicts`` is the one place that
recognises a concurrent modification and runs the step again. The log's files are read here
only: the latest version of a local table (``local_log_head``), the commits an appId made
(``app_commits``), whether a log holds any commit (``is_commit_file``).
"""

from __future__ import annotations

import logging
import os
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeVar

from cdc.targets.table import Commit, TableRef

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "CONFLICTS",
    "app_commits",
    "commit_stat",
    "committing",
    "is_commit_file",
    "is_concurrent_conflict",
    "local_log_head",
    "retry_conflicts",
]

log = logging.getLogger("cdc.merge")
T = TypeVar("T")

TXN_APP = "spark.databricks.delta.write.txnAppId"
# what a commit records of how it was written (Commit.user_metadata: the engines' route, a
# batch's tick and appId)
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"
CONFLICTS = (
    "CommitFailedError",  # delta-rs (cdc.targets.delta.delta_rs)
    "ConcurrentAppendException",
    "ConcurrentDeleteReadException",
    "ConcurrentDeleteDeleteException",
    "ConcurrentTransactionException",
    "ConcurrentWriteException",
    "MetadataChangedException",
    "ProtocolChangedException",
    "DELTA_CONCURRENT",
)


@contextmanager
def committing(spark: SparkSession, commit: Commit | None) -> Iterator[None]:
    """Delta's txnAppId / txnVersion for the SQL writes in the block, and the commit's
    user_metadata as commitInfo.userMetadata (none without a commit)."""
    if commit is None:
        yield
        return
    spark.conf.set(TXN_APP, commit.app_id)
    spark.conf.set(TXN_VERSION, str(commit.version))
    recorded = commit.user_metadata
    if recorded is not None:
        spark.conf.set(USER_METADATA, recorded)
    try:
        yield
    finally:
        spark.conf.unset(TXN_APP)
        spark.conf.unset(TXN_VERSION)
        spark.conf.unset(USER_METADATA)


def is_concurrent_conflict(exc: BaseException) -> bool:
    """Whether a Spark error is one of Delta's concurrent-modification conflicts."""
    text = f"{type(exc).__name__} {exc}"
    return any(marker in text for marker in CONFLICTS)


def retry_conflicts(step: Callable[[], T], what: str, attempts: int = 5) -> T:
    """Runs step, again after a concurrent-modification conflict (with a growing pause)."""
    for attempt in range(1, attempts + 1):
        try:
            return step()
        except Exception as exc:
            if attempt == attempts or not is_concurrent_conflict(exc):
                raise
            log.info("%s: concurrent Delta commit, retrying (%d/%d)", what, attempt, attempts)
            time.sleep(0.5 * attempt)
    raise AssertionError("unreachable")


def is_commit_file(name: str) -> bool:
    """A file of a Delta log that makes it a table: a commit, a checkpoint, the checkpoint
    pointer, or the folder of coordinated commits."""
    stem = name.split(".", 1)[0]
    return (stem.isdigit() and len(stem) == 20) or name in ("_last_checkpoint", "_commits")


def commit_stat(path: str, version: int) -> tuple[int, int, int] | None:
    """(inode, mtime, size) of a local table's commit file of version, None without one: a
    log's commits are never rewritten, so another file there is a table made again."""
    try:
        found = os.stat(os.path.join(path, "_delta_log", f"{version:020d}.json"))
    except OSError:
        return None
    return (found.st_ino, found.st_mtime_ns, found.st_size)


def local_log_head(ref: TableRef) -> int | None:
    """The latest version of a table on a local path, from its log's file names only (no
    JVM, no log parsing: Delta never removes the latest commit file): -1 when it has no
    log. None when this cannot be told so (a catalog table, a remote path)."""
    if not ref.is_path:
        return None
    location = ref.location
    if "://" in location or location.startswith("file:"):
        if not location.startswith("file:"):
            return None
        location = urllib.parse.urlparse(location).path
    try:
        names = os.listdir(os.path.join(location, "_delta_log"))
    except FileNotFoundError:
        return -1
    except OSError:
        return None
    versions = [
        int(n[:20]) for n in names if len(n) == 25 and n.endswith(".json") and n[:20].isdigit()
    ]
    return max(versions, default=-1)


def app_commits(
    spark: SparkSession, ref: TableRef, app_ids: Iterable[str]
) -> list[tuple[int, int]]:
    """(version, txn version) of the table's commits marked with one of app_ids, from its
    log's ``txn`` actions, in version order: for a drain's commits, which tick each version
    holds. The commit files are read as JSON by Spark (any storage; a checkpoint's JSON part
    names no version and is left out)."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    location = ref.location
    if not ref.is_path:  # a catalog table: its folder
        location = str(DeltaTable.forName(spark, ref.location).detail().first()["location"])
    rows = (
        spark.read.schema("txn struct<appId: string, version: long>")
        .json(location.rstrip("/") + "/_delta_log/*.json")
        .where(F.col("txn").isNotNull() & F.col("txn.appId").isin(*sorted(app_ids)))
        .select(
            F.regexp_extract(F.input_file_name(), r"(\d{20})\.json$", 1).cast("long").alias("v"),
            F.col("txn.version").alias("tick"),
        )
        .where(F.col("v").isNotNull())  # a commit, not a checkpoint's JSON part
    )
    return sorted((int(r[0]), int(r[1])) for r in rows.collect())
