"""The ticker daemon: ticks, retries and maintenance for one or more databases.

For each database it calls, each in its own transaction:

- ``cdc.ticker()`` every ``tick_period`` seconds (sub-second periods are fine);
- ``cdc.maint_retry_events()`` every ``retry_period`` seconds, until it returns 0;
- the calls of ``cdc.maint_operations()`` every ``maint_period`` seconds: rotation step 1 of
  every queue, then step 2, then each queue's ``queue_extra_maint`` functions and, when
  autovacuum is off, VACUUM of the engine's busy tables, each in a separate transaction.

One thread per database; ``stop()`` (or SIGTERM / SIGINT through the CLI) ends every loop
after the call in progress. A database that goes away is retried with a growing delay.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

import psycopg
from psycopg import sql

from cdc.pg import sqlfiles

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TickerSettings:
    tick_period: float = 1.0
    retry_period: float = 30.0
    maint_period: float = 120.0


class Ticker:
    """Ticks the queues of several databases until stopped."""

    def __init__(self, dsns: list[str], settings: TickerSettings | None = None) -> None:
        if not dsns:
            raise ValueError("the ticker needs at least one database")
        self.dsns = dsns
        self.settings = settings or TickerSettings()
        self.stopping = threading.Event()

    def stop(self) -> None:
        self.stopping.set()

    def run(self) -> None:
        """Run every database's loop until ``stop()``."""
        threads = [
            threading.Thread(target=self._loop, args=(dsn,), name=f"ticker-{i}", daemon=True)
            for i, dsn in enumerate(self.dsns)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        log.info("ticker stopped")

    def run_once(self) -> dict[str, int]:
        """One round of every duty in every database; totals per duty."""
        totals = {"ticks": 0, "retried": 0, "maintenance": 0}
        for dsn in self.dsns:
            with psycopg.connect(dsn, autocommit=True) as conn:
                for key, value in one_round(conn).items():
                    totals[key] += value
        return totals

    def _loop(self, dsn: str) -> None:
        delay = 1.0
        while not self.stopping.is_set():
            try:
                with psycopg.connect(dsn, autocommit=True) as conn:
                    log.info("ticking %s", _describe(conn))
                    delay = 1.0
                    self._serve(conn)
            except psycopg.OperationalError as exc:
                log.warning("database unavailable (%s); retrying in %.0f s", exc, delay)
                self.stopping.wait(delay)
                delay = min(delay * 2, 60.0)

    def _serve(self, conn: psycopg.Connection) -> None:
        s = self.settings
        next_retry = next_maint = time.monotonic()
        while not self.stopping.is_set():
            now = time.monotonic()
            ticks = tick(conn)
            if ticks:
                log.debug("%d queue(s) ticked", ticks)
            if now >= next_retry:
                retried = retry_events(conn)
                if retried:
                    log.info("%d retry event(s) back in their queues", retried)
                next_retry = now + s.retry_period
            if now >= next_maint:
                done = maintain(conn)
                if done:
                    log.info("%d maintenance operation(s) did work", done)
                next_maint = now + s.maint_period
            self.stopping.wait(s.tick_period)


def tick(conn: psycopg.Connection) -> int:
    """Tick every due queue once; the number of ticks made."""
    return conn.execute(sqlfiles.query("ticker_all")).fetchone()[0]


def retry_events(conn: psycopg.Connection) -> int:
    """Put every due retry event back into its queue; how many."""
    total = 0
    while moved := conn.execute(sqlfiles.query("maint_retry_events")).fetchone()[0]:
        total += moved
    return total


def maintain(conn: psycopg.Connection) -> int:
    """Run the operations ``cdc.maint_operations()`` lists, each in its own transaction; how
    many did work (a function that returned a true value, or a VACUUM that ran).

    ``conn`` must be in autocommit mode: each call commits on its own, and VACUUM cannot run
    inside a transaction. A row ``('vacuum', table)`` runs VACUUM on that table; any other
    row names a function, which is looked up in the catalog (as SQL resolves the name, taking
    one text argument or none) and called by its schema and name. An operation of a queue's
    ``queue_extra_maint`` (or a table) that does not exist or fails is logged as an error and
    the others still run; the engine's own rotation steps raise as before.
    """
    if not conn.autocommit:
        raise ValueError(
            "maintain() needs a connection in autocommit mode: each operation runs in its"
            " own transaction, and VACUUM outside any"
        )
    ops = conn.execute(sqlfiles.query("maint_operations")).fetchall()
    done = 0
    for func_name, func_arg in ops:
        ours = func_name in _ENGINE_STEPS
        try:
            if func_name == "vacuum":
                ran = _vacuum(conn, func_arg)
            else:
                ran = _call(conn, func_name, func_arg)
        except psycopg.Error as exc:
            if ours or conn.closed or conn.broken:
                raise
            log.error("maintenance %s(%s) failed: %s", func_name, func_arg or "", exc)
            continue
        if ran:
            done += 1
    return done


# the rows of cdc.maint_operations() that are the engine's own rotation
_ENGINE_STEPS = frozenset({"cdc.maint_rotate_tables_step1", "cdc.maint_rotate_tables_step2"})


def _call(conn: psycopg.Connection, func_name: str | None, func_arg: str | None) -> bool:
    """Call one maintenance function; whether it did work (returned a true value)."""
    if func_name is None:
        log.error(
            "maintenance: queue %s has a NULL element in queue_extra_maint; skipped", func_arg
        )
        return False
    row = conn.execute(
        sqlfiles.query("maint_function"), {"name": func_name, "with_arg": func_arg is not None}
    ).fetchone()
    if row is None:
        log.error(
            "maintenance: no function %s(%s) for queue %s (queue_extra_maint); skipped",
            func_name,
            "" if func_arg is None else "text",
            func_arg,
        )
        return False
    call = sql.SQL("select {}({})").format(
        sql.Identifier(*row),
        sql.SQL("") if func_arg is None else sql.Literal(func_arg),
    )
    result = conn.execute(call).fetchone()
    if result and result[0]:
        log.info("%s(%s): %s", func_name, func_arg or "", result[0])
        return True
    return False


def _vacuum(conn: psycopg.Connection, table: str | None) -> bool:
    """VACUUM one table named by a maintenance row; False when it does not exist."""
    row = conn.execute(sqlfiles.query("maint_table"), {"name": table}).fetchone()
    if row is None:
        log.error("maintenance: no table %s to vacuum; skipped", table)
        return False
    conn.execute(sql.SQL("vacuum {}").format(sql.Identifier(*row)))
    log.info("vacuum %s", table)
    return True


def one_round(conn: psycopg.Connection) -> dict[str, int]:
    """Tick, retry and maintain once."""
    return {"ticks": tick(conn), "retried": retry_events(conn), "maintenance": maintain(conn)}


def _describe(conn: psycopg.Connection) -> str:
    info = conn.info
    return f"database {info.dbname} on {info.host or 'local socket'}"
