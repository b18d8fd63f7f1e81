"""The ticker daemon (cdc.ticker and `cdc ticker`), against real databases."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import psycopg

from cdc.pg.queue import Consumer, Producer, Queue
from cdc.pg.ticker import Ticker, TickerSettings, maintain


def ticks(dsn: str) -> int:
    """The latest tick id (old ticks are removed by maintenance, so not a count)."""
    with psycopg.connect(dsn) as conn:
        return conn.execute("select coalesce(max(tick_id), 0) from cdc.tick").fetchone()[0]


def test_run_once_serves_every_database(admin_dsn, template_dsn, dsn):
    """One round ticks due queues in each database given, and re-inserts due retries."""
    from tests.support.databases import TEMPLATE, create_database, drop_database

    other = create_database(admin_dsn, "cdc_test_ticker_other", template=TEMPLATE)
    try:
        for target in (dsn, other):
            with psycopg.connect(target, autocommit=True) as conn:
                Queue(conn, "q").create()
                Queue(conn, "q").force_tick()
        before = [ticks(dsn), ticks(other)]
        totals = Ticker([dsn, other]).run_once()
        assert totals["ticks"] == 2
        assert [ticks(dsn), ticks(other)] == [b + 1 for b in before]
    finally:
        drop_database(admin_dsn, "cdc_test_ticker_other")


def test_maintain_rotates_in_two_transactions(conn):
    """One maintenance run does rotation step 1 and then step 2, in separate transactions."""
    q = Queue(conn, "q")
    q.create()
    q.set_config("rotation_period", "1 microsecond")
    assert maintain(conn) == 2
    row = conn.execute("select queue_cur_table, queue_switch_step2 from cdc.queue").fetchone()
    assert row[0] == 1 and row[1] is not None


def test_retries_come_back_through_the_daemon_round(conn, dsn):
    """A retried event is re-inserted by the ticker round and delivered again."""
    q = Queue(conn, "q")
    q.create()
    c = Consumer(conn, "q", "c")
    c.register()
    ev = Producer(conn, "q").insert("I", "x")
    q.force_tick()
    q.tick()
    with c.batch() as batch:
        batch.retry(ev, seconds=0)
    totals = Ticker([dsn], TickerSettings()).run_once()
    assert totals["retried"] == 1
    q.force_tick()
    q.tick()
    with c.batch() as batch:
        assert [(e.ev_id, e.ev_retry) for e in batch.events()] == [(ev, 1)]


def test_daemon_ticks_and_stops_on_sigterm(conn, dsn):
    """`cdc ticker` ticks sub-second until SIGTERM, then exits 0 and says it stopped."""
    Queue(conn, "q").create()
    Queue(conn, "q").set_config("ticker_idle_period", "10 milliseconds")
    Queue(conn, "q").set_config("ticker_max_lag", "10 milliseconds")
    start = ticks(dsn)
    proc = subprocess.Popen(
        [sys.executable, "-m", "cdc.cli", "ticker", "--dsn", dsn, "--tick-period", "0.05"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        deadline = time.monotonic() + 30
        while ticks(dsn) < start + 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ticks(dsn) >= start + 3
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
    assert "received SIGTERM, stopping" in out and "ticker stopped" in out


def test_daemon_retries_an_unreachable_database():
    """A database that cannot be reached is retried, not fatal; stop() still ends the loop."""
    t = Ticker(["host=/nonexistent dbname=x connect_timeout=1"], TickerSettings(0.05, 1, 1))
    runner = threading.Thread(target=t.run)
    runner.start()
    time.sleep(0.5)
    t.stop()
    runner.join(timeout=10)
    assert not runner.is_alive()
