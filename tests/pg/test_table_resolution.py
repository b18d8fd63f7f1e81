"""Pattern entries resolved against a real catalog (cdc.pg.catalog, cdc.pipeline.tables):
which relations are candidates, and a resolver that picks up a table created later."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from cdc import config
from cdc.pg.catalog import candidate_tables
from cdc.pg.queue import Consumer, Queue
from cdc.pipeline.tables import TableResolver, resolved

SETUP = """
create schema app;
create table public.a (id int primary key);
create table app."Mixed Case" (id int primary key);
create unlogged table app.u (id int primary key);
create table public.p (id int, at date, primary key (id, at)) partition by range (at);
create table public.p_2026 partition of public.p
    for values from ('2026-01-01') to ('2027-01-01');
create table public.p_rest partition of public.p default;
create view public.v as select * from public.a;
create materialized view public.mv as select * from public.a;
create sequence public.s;
create table cdc.not_a_source (id int);
create temp table scratch (id int);
"""

EXPECTED = [("public", "a"), ("app", "Mixed Case"), ("app", "u"), ("public", "p")]  # as created


def pipeline(dsn: str, *tables: dict[str, Any]) -> config.Pipeline:
    return config.parse(
        {
            "source": {"dsn": dsn, "queue": "q", "consumer": "c"},
            "target": {"path": "/tmp/t"},
            "tables": list(tables),
        }
    )


def test_candidates_are_tables_not_partitions_views_or_cdc(conn: psycopg.Connection) -> None:
    """Ordinary and partitioned tables only, in the order they were created: no partition,
    view, materialized view, sequence, temporary table, nor anything in schema cdc or the
    system schemas."""
    conn.execute(SETUP)
    assert list(candidate_tables(conn)) == EXPECTED


def test_candidates_on_a_connection_outside_autocommit(dsn: str) -> None:
    """On a connection that is not autocommit, the listing leaves no transaction open."""
    with psycopg.connect(dsn) as c:
        c.execute("create table public.t (id int primary key)")
        c.commit()
        assert list(candidate_tables(c)) == [("public", "t")]
        assert c.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_resolver_picks_up_a_table_created_later(
    conn: psycopg.Connection, dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A rule covers the tables of the catalog, then one created later, each logged once;
    the pipeline object stays the same while the catalog does."""
    conn.execute(SETUP)
    pipe = pipeline(
        dsn,
        {"source": "public.a", "target": "a_explicit"},
        {"source": "*.*", "target": "{schema}_{table}"},
        {"source": "nosuch.*"},
    )
    resolver = TableResolver(pipe, conn)
    with caplog.at_level(logging.INFO, logger="cdc"):
        first = resolver.current()
        assert resolver.current() is first
    assert [(t.source, t.target) for t in first.tables] == [
        ("public.a", "a_explicit"),
        ("app.Mixed Case", "app_Mixed Case"),
        ("app.u", "app_u"),
        ("public.p", "public_p"),
    ]
    messages = [r.getMessage() for r in caplog.records]
    assert "table app.u matches rule tables[2] (*.*): replicated into target app_u (mirror)" in (
        messages
    )
    assert not any("public.a " in m for m in messages)  # listed explicitly: no rule's
    assert messages.count("rule tables[3] (nosuch.*) matches no table") == 1

    caplog.clear()
    conn.execute("create table public.later (id int primary key)")
    conn.execute("create view public.later_view as select 1 as x")
    with caplog.at_level(logging.INFO, logger="cdc"):
        second = resolver.current()
        assert resolver.current() is second
    assert second is not first
    assert [t.source for t in second.tables] == [
        "public.a",
        "app.Mixed Case",
        "app.u",
        "public.later",
        "public.p",
    ]
    assert second.mirrors(["public.later"])[0].target == "public_later"
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        "table public.later matches rule tables[2] (*.*): replicated into target"
        " public_later (mirror)"
    ]


def test_resolver_without_rules_asks_nothing(dsn: str) -> None:
    """A pipeline of explicit entries resolves to itself, without a query (closed connection)."""
    pipe = pipeline(dsn, {"source": "public.a"})
    closed = psycopg.connect(dsn)
    closed.close()
    assert TableResolver(pipe, closed).current() is pipe
    assert resolved(pipe) is pipe


def test_resolved_opens_its_own_connection(conn: psycopg.Connection, dsn: str) -> None:
    """resolved() lists the catalog of source.dsn, as cdc snapshot / verify / resync use it."""
    conn.execute(SETUP)
    pipe = resolved(pipeline(dsn, {"source": "app.*", "exclude": ["app.u"]}))
    assert [t.source for t in pipe.tables] == ["app.Mixed Case"]


def test_a_new_table_that_collides_is_refused(
    conn: psycopg.Connection, dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A table created later whose target resolves to a table another source already has
    (public."Orders" beside public.orders under default.{table}: one catalog table) is
    refused, logged once with both names; the other tables go on, and so does a resolution
    from scratch (a restart); dropping it ends the refusal."""
    conn.execute("create table public.orders (id int); create table public.items (id int)")
    pipe = pipeline(dsn, {"source": "public.*", "target": "default.{table}"})
    resolver = TableResolver(pipe, conn)
    assert [t.source for t in resolver.current().tables] == ["public.items", "public.orders"]
    conn.execute('create table public."Orders" (id int); create table public.later (id int)')
    with caplog.at_level(logging.WARNING, logger="cdc"):
        resolver.current()
        conn.execute("create table public.other (id int)")  # the catalog changes again
        current = resolver.current()
    assert [t.source for t in current.tables] == [
        "public.items",
        "public.later",
        "public.orders",
        "public.other",
    ]
    ((source, target),) = [(r.source, r.target) for r in current.refused]
    assert (source, target) == ("public.Orders", "default.Orders")
    (message,) = [r.getMessage() for r in caplog.records if "not replicated" in r.getMessage()]
    assert message.startswith("table public.Orders is not replicated: the targets")
    assert "'default.orders' of public.orders (matched by rule tables[1]" in message
    assert "'default.Orders' of public.Orders (matched by rule tables[1]" in message
    assert "one catalog table, spark_catalog.default.orders" in message
    assert [r.source for r in resolved(pipe).refused] == ["public.Orders"]  # a restart
    conn.execute('drop table public."Orders"')
    assert resolver.current().refused == ()


def test_status_lists_the_tables_a_pattern_matches(
    conn: psycopg.Connection, dsn: str, tmp_path: Path
) -> None:
    """cdc status resolves the patterns first: every matched table has its line."""
    conn.execute(SETUP)
    Queue(conn, "q").create()
    Consumer(conn, "q", "c").register()
    conf = tmp_path / "pipeline.toml"
    conf.write_text(
        f"[source]\ndsn = {json.dumps(dsn)}\nqueue = 'q'\nconsumer = 'c'\n"
        f"[target]\npath = {json.dumps(str(tmp_path / 'delta'))}\n"
        "[[tables]]\nsource = 'app.*'\ntarget = '{schema}_{table}'\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "cdc.cli", "status", "--config", str(conf), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    tables = json.loads(proc.stdout)["tables"]
    assert [(t["source"], t["target"]) for t in tables] == [
        ("app.Mixed Case", "app_Mixed Case"),
        ("app.u", "app_u"),
    ]
