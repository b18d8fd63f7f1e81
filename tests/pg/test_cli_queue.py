"""The queue-side commands on a real server: cdc consumer list / register / unregister, cdc
queue config, cdc uninstall's refusal to drop consumed queues, cdc triggers' header and the
state of each capture (current, refreshed by the guard at the next write, or STALE)."""

from __future__ import annotations

import json

import psycopg
import pytest

from cdc import cli
from cdc.cli import exitcodes
from cdc.pg import capture
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Producer, Queue


def _cdc(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _consumers(conn: psycopg.Connection) -> list[str]:
    return [r[0] for r in conn.execute("select consumer_name from cdc.get_consumer_info('q')")]


def test_consumer_register_list_unregister(conn, dsn, capsys):
    """register subscribes at the queue's last tick (again: says so), list shows each with its
    exact pending events under a header, unregister removes it."""
    Queue(conn, "q").create()
    code, out, _ = _cdc(capsys, "consumer", "register", "q", "app", "--dsn", dsn)
    assert code == exitcodes.OK and "registered at the queue's last tick" in out
    code, out, _ = _cdc(capsys, "consumer", "register", "q", "app", "--dsn", dsn)
    assert code == exitcodes.OK and "was registered already" in out
    Producer(conn, "q").insert("t", "1")
    with conn.transaction():  # rolled back: never pending
        Producer(conn, "q").insert("t", "2")
        raise psycopg.Rollback()
    code, out, _ = _cdc(capsys, "consumer", "list", "q", "--dsn", dsn)
    header, row = out.splitlines()
    assert header.split()[:2] == ["consumer", "pending"]
    assert row.split()[:2] == ["app", "1"]
    code, out, _ = _cdc(capsys, "consumer", "list", "q", "--json", "--dsn", dsn)
    assert [(c["consumer"], c["pending_events"]) for c in json.loads(out)] == [("app", 1)]
    code, out, _ = _cdc(capsys, "consumer", "unregister", "q", "app", "--dsn", dsn)
    assert code == exitcodes.OK and _consumers(conn) == []
    code, out, _ = _cdc(capsys, "consumer", "list", "q", "--dsn", dsn)
    assert out == "queue 'q' has no consumer\n"


def test_consumer_errors_are_one_line_pointing_at_the_cli(conn, dsn, capsys):
    """An unknown consumer or queue, a missing name: one line, exit 1, hints that name cdc
    commands rather than SQL functions."""
    Queue(conn, "q").create()
    code, _, err = _cdc(capsys, "consumer", "unregister", "q", "nosuch", "--dsn", dsn)
    assert code == exitcodes.COULD_NOT_RUN and len(err.splitlines()) == 1
    assert "`cdc consumer list QUEUE`" in err and "register_consumer()" not in err
    code, _, err = _cdc(capsys, "consumer", "list", "nosuch", "--dsn", dsn)
    assert code == exitcodes.COULD_NOT_RUN and "`cdc queue create NAME`" in err
    assert "create_queue()" not in err
    code, _, err = _cdc(capsys, "consumer", "register", "q", "--dsn", dsn)
    assert code == exitcodes.COULD_NOT_RUN and "needs the consumer's name" in err
    Consumer(conn, "q", "app").register()
    code, _, err = _cdc(capsys, "queue", "drop", "q", "--dsn", dsn)
    assert code == exitcodes.COULD_NOT_RUN and "`cdc queue drop QUEUE --force`" in err


def test_queue_config_shows_and_sets(conn, dsn, capsys):
    """Without KEY=VALUE it shows every setting; with them it sets them all in one
    transaction (none: no limit) and shows the result."""
    Queue(conn, "q").create()
    code, out, _ = _cdc(capsys, "queue", "config", "q", "--dsn", dsn)
    shown = dict(line.split(None, 1) for line in out.splitlines())
    assert code == exitcodes.OK
    assert shown["ticker_max_count"] == "500" and shown["max_retries"] == "none"
    code, out, _ = _cdc(
        capsys, "queue", "config", "q", "max_retries=5", "ticker_idle_period=5 minutes",
        "--dsn", dsn,
    )  # fmt: skip
    shown = dict(line.split(None, 1) for line in out.splitlines())
    assert code == exitcodes.OK
    assert (shown["max_retries"], shown["ticker_idle_period"]) == ("5", "00:05:00")
    code, out, _ = _cdc(capsys, "queue", "config", "q", "max_retries=none", "--dsn", dsn)
    assert dict(line.split(None, 1) for line in out.splitlines())["max_retries"] == "none"


def test_queue_config_refuses_bad_settings_and_changes_nothing(conn, dsn, capsys):
    """An unknown key or a bad value: one line naming it, exit 1, and the good settings given
    with it are not applied either."""
    Queue(conn, "q").create()
    code, _, err = _cdc(capsys, "queue", "config", "q", "max_retries=5", "nosuch=1", "--dsn", dsn)
    assert code == exitcodes.COULD_NOT_RUN and "unknown queue parameter 'nosuch'" in err
    [(retries,)] = conn.execute("select queue_max_retries from cdc.queue").fetchall()
    assert retries is None
    code, _, err = _cdc(capsys, "queue", "config", "q", "ticker_max_count", "--dsn", dsn)
    assert code == exitcodes.COULD_NOT_RUN and "KEY=VALUE" in err
    code, _, err = _cdc(capsys, "queue", "info", "q", "max_retries=1", "--dsn", dsn)
    assert code == exitcodes.COULD_NOT_RUN and "go with `cdc queue config`" in err


def test_uninstall_refuses_queues_with_consumers_without_force(conn, dsn, capsys):
    """Not at a terminal, uninstall refuses while consumers are registered, listing queues and
    consumers, and drops nothing; --force drops them."""
    Queue(conn, "q").create()
    Queue(conn, "idle").create()
    Consumer(conn, "q", "delta").register()
    Consumer(conn, "q", "audit").register()
    code, _, err = _cdc(capsys, "uninstall", "--keep-roles", "--dsn", dsn)
    assert code == exitcodes.COULD_NOT_RUN
    assert "q: audit, delta" in err and "--force" in err and "idle" not in err
    assert sorted(_consumers(conn)) == ["audit", "delta"]
    code, out, _ = _cdc(capsys, "uninstall", "--keep-roles", "--force", "--dsn", dsn)
    assert code == exitcodes.OK and "cdc removed" in out
    assert conn.execute("select to_regnamespace('cdc')").fetchone() == (None,)


def test_uninstall_without_consumers_needs_no_force(conn, dsn, capsys):
    """Queues nobody consumes are dropped without asking."""
    Queue(conn, "q").create()
    code, _, _ = _cdc(capsys, "uninstall", "--keep-roles", "--dsn", dsn)
    assert code == exitcodes.OK
    assert conn.execute("select to_regnamespace('cdc')").fetchone() == (None,)


def _table(conn: psycopg.Connection) -> None:
    Queue(conn, "q").create()
    conn.execute("create table t (id int primary key, a text)")


def _trigger_rows(out: str) -> tuple[list[str], list[str]]:
    header, *rows = out.splitlines()
    return header.split(), rows


def test_triggers_has_a_header_and_says_current(conn, dsn, capsys):
    """A header line, then one line per capture: table, queue, format, trigger state."""
    _table(conn)
    capture.attach(conn, "public.t", CaptureOptions(queue="q"))
    code, out, _ = _cdc(capsys, "triggers", "--dsn", dsn)
    header, [row] = _trigger_rows(out)
    assert code == exitcodes.OK
    assert header == ["table", "queue", "format", "trigger", "options"]
    assert row.split()[:4] == ["public.t", "q", "json", "current"]


def test_a_change_the_guard_will_refresh_is_not_stale(conn, dsn, capsys):
    """Without event triggers, a column added since the trigger was generated is refreshed by
    the guard at the table's next write: shown so, exit 0; the write makes it current."""
    _table(conn)
    conn.execute("alter event trigger cdc_capture_ddl disable")
    capture.attach(conn, "public.t", CaptureOptions(queue="q"))
    conn.execute("alter table t add column note text")
    code, out, _ = _cdc(capsys, "triggers", "--dsn", dsn)
    assert code == exitcodes.OK
    assert "refreshed at next write" in out and "STALE" not in out
    code, out, _ = _cdc(capsys, "triggers", "--json", "--dsn", dsn)
    assert [r["state"] for r in json.loads(out)] == ["refreshed at next write"]
    conn.execute("insert into t values (1, 'a', 'n')")
    code, out, _ = _cdc(capsys, "triggers", "--dsn", dsn)
    assert _trigger_rows(out)[1][0].split()[3] == "current"


def test_a_change_nothing_will_refresh_is_stale(conn, dsn, capsys):
    """Captured while the event trigger ran (no guard), then changed while it was off:
    nothing regenerates the trigger, so STALE with what to do, exit 3 in text and JSON."""
    _table(conn)
    capture.attach(conn, "public.t", CaptureOptions(queue="q"))
    conn.execute("alter event trigger cdc_capture_ddl disable")
    conn.execute("alter table t add column note text")
    code, out, _ = _cdc(capsys, "triggers", "--dsn", dsn)
    assert code == exitcodes.UNHEALTHY
    assert "STALE: run cdc attach again" in out
    code, out, _ = _cdc(capsys, "triggers", "--json", "--dsn", dsn)
    assert code == exitcodes.UNHEALTHY
    assert [r["state"] for r in json.loads(out)] == ["STALE"]
