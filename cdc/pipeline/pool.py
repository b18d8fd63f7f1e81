"""Per-table work of a batch, run concurrently in the drain's one Spark session.

A bounded pool of worker threads; each task runs on a child session of the drain's
(``SparkSession.newSession``), taken from a free list and given back after the task:

- its own SQL conf: Delta's idempotent-write marks of a MERGE (txnAppId / txnVersion) are
  session settings, so two tables committing at once never see each other's marks;
- its own temp views: the MERGE's source view has one name;
- the SparkContext, the cache and Delta's log cache shared.

A DataFrame belongs to the session it was made in; ``in_session`` binds its plan to another
(a cached plan is still found in the shared cache). Tasks never touch the drain's psycopg
connection: what they need from PostgreSQL is read before, on the main thread.

A task that raises stops the batch: the tasks not started are cancelled, those running are
waited for (a thread cannot be stopped), and the first error is raised. Tasks that must not
stop the batch (a table that cannot be applied) return their failure instead.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import queue
import threading
from collections.abc import Callable, Hashable
from typing import TypeVar

from pyspark.sql import DataFrame, SparkSession

__all__ = ["SessionPool", "in_session"]

# each worker thread has its own py4j connection, closed when the thread ends, which py4j
# logs at INFO level: one line per worker at the end of every run
logging.getLogger("py4j.clientserver").setLevel(logging.WARNING)

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


def in_session(frame: DataFrame, session: SparkSession) -> DataFrame:
    """The same rows as a DataFrame of session (its plan, re-bound; nothing is computed)."""
    if frame.sparkSession is session:
        return frame
    jvm = session._jvm
    assert jvm is not None
    plan = frame._jdf.queryExecution().logical()
    return DataFrame(
        jvm.org.apache.spark.sql.classic.Dataset.ofRows(session._jsparkSession, plan), session
    )


class SessionPool:
    """Runs tasks on at most ``workers`` threads, each on a child session (see the module)."""

    def __init__(
        self, spark: SparkSession, workers: int, conf: dict[str, str] | None = None
    ) -> None:
        """conf: settings of each child session."""
        if workers < 1:
            raise ValueError(f"workers must be 1 or more, not {workers}")
        self.spark = spark
        self.workers = workers
        self.conf = dict(conf or {})
        self._free: queue.SimpleQueue[SparkSession] = queue.SimpleQueue()
        self._executor: cf.ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None

    def _session(self) -> SparkSession:
        try:
            return self._free.get_nowait()
        except queue.Empty:
            session = self.spark.newSession()
            for key, value in self.conf.items():
                session.conf.set(key, value)
            return session

    def _call(self, task: Callable[[SparkSession], T]) -> T:
        session = self._session()
        jvm = session._jvm
        assert jvm is not None
        # Spark and Delta code that asks for "the active session" finds this one
        jvm.org.apache.spark.sql.SparkSession.setActiveSession(session._jsparkSession)
        try:
            return task(session)
        finally:
            jvm.org.apache.spark.sql.SparkSession.clearActiveSession()
            self._free.put(session)

    def run(self, tasks: list[tuple[K, Callable[[SparkSession], T]]]) -> dict[K, T]:
        """Each task's result by its key; the first error any task raised, once none runs."""
        if not tasks:
            return {}
        with self._lock:
            if self._executor is None:
                self._executor = cf.ThreadPoolExecutor(self.workers, thread_name_prefix="cdc-apply")
        futures = {self._executor.submit(self._call, task): key for key, task in tasks}
        results: dict[K, T] = {}
        error: BaseException | None = None
        for future in cf.as_completed(futures):
            if future.cancelled():
                continue
            exc = future.exception()
            if exc is None:
                results[futures[future]] = future.result()
            elif error is None:
                error = exc
                for other in futures:
                    other.cancel()
        if error is not None:
            raise error
        return results
