"""A whole database onboarded with patterns: a capture rule attaches every matching table
(and, through the event trigger, tables created later), its snapshot signal makes the drain
copy the rows a table held before its triggers, and the drain replicates a table created
while it runs, without a configuration edit or a restart. Real PostgreSQL, Spark and Delta."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from cdc.ops import status
from cdc.pg import capture, capture_rules, pgtypes
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Queue
from cdc.pipeline import compare, snapshot
from cdc.pipeline.drain import Drain
from cdc.targets import snapshots
from tests.support import drainkit

pytestmark = pytest.mark.spark

SHOP = """
create table customers (id int primary key, name text);
insert into customers select g, 'c' || g from generate_series(1, 300) g;
create table orders (id bigint primary key, customer int, total numeric(12, 2));
insert into orders select g, g % 300 + 1, g * 1.25 from generate_series(1, 500) g;
create table audit_log (id int primary key, line text);
insert into audit_log values (1, 'kept out by the exclude');
create table keyless (v text);
insert into keyless values ('no key');
"""


def _rows(dsn: str, spark, root: Path, name: str) -> tuple[list, list]:
    with psycopg.connect(dsn) as conn:
        cols = pgtypes.columns(conn, "public", name)
        expected = compare.source_rows(conn, "public", name)
    got = compare.delta_rows(spark, str(root / name), cols)
    return sorted(got, key=repr), sorted(expected, key=repr)


def test_a_rule_onboards_existing_and_later_tables_with_their_rows(dsn, spark, tmp_path):
    """Tables that held rows before their triggers reach Delta through the drain's snapshot;
    a table created while the drain runs (CREATE TABLE AS, rows included) is captured by the
    event trigger and replicated by the same drain; excluded and keyless tables are not."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        Queue(conn, "q").create()
        conn.execute(SHOP)
        result = capture_rules.add(
            conn, "public.*", CaptureOptions(queue="q"), exclude=("public.audit_*",)
        )
        attached = {row.table for row in result.rows if row.action == capture_rules.ATTACHED}
        skipped = {
            row.table: row.reason for row in result.rows if row.action == capture_rules.SKIPPED
        }
    assert attached == {"public.customers", "public.orders"}
    assert "no primary key" in (skipped.get("public.keyless") or "")
    pipe = drainkit.pipeline(
        dsn,
        str(tmp_path),
        [{"source": "public.*", "exclude": ["public.audit_*"], "target": "{table}"}],
    )
    with Drain(pipe, spark) as drain:
        drain.run()
        for name in ("customers", "orders"):
            got, expected = _rows(dsn, spark, tmp_path, name)
            assert len(expected) > 0 and got == expected, name
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                "create table late as select g as id, 'x' || g as v from generate_series(1, 50) g"
            )
            conn.execute("alter table late add primary key (id)")
            conn.execute("update customers set name = 'changed' where id <= 10")
            conn.execute("insert into late values (51, 'after')")
        drain.run()
        resolved = drain.pipeline
    assert not (tmp_path / "audit_log").exists()
    assert not (tmp_path / "keyless").exists()
    for name in ("customers", "orders", "late"):
        got, expected = _rows(dsn, spark, tmp_path, name)
        assert got == expected, name
    states = snapshots.read_local(snapshot.store_of(pipe))
    assert {name: states[name].state for name in ("customers", "orders", "late")} == {
        "customers": snapshots.DONE,
        "orders": snapshots.DONE,
        "late": snapshots.DONE,
    }
    shown = status.collect(resolved)
    assert {t.target: t.snapshot for t in shown.tables} == {
        "customers": snapshots.DONE,
        "orders": snapshots.DONE,
        "late": snapshots.DONE,
        "keyless": None,  # matched by the rule, never captured: no target, no snapshot
    }
    assert "done" in status.render(shown)


def test_a_later_table_of_another_sources_catalog_table_is_refused(dsn, spark, tmp_path):
    """public."Orders", created while public.orders is replicated under default.{table} (one
    catalog table: Spark ignores case), is refused: the drain goes on, the Delta table holds
    public.orders' rows only, the refused table's events are quarantined with the reason
    naming both tables, and cdc status lists it (unhealthy)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        Queue(conn, "q").create()
        conn.execute("create table orders (id int primary key, v text)")
        capture.attach(conn, "public.orders", CaptureOptions(queue="q"))
        conn.execute("insert into orders values (1, 'lower')")
    pipe = drainkit.pipeline(
        dsn, str(tmp_path), [{"source": "public.*", "target": "default.{table}"}]
    )
    with Drain(pipe, spark) as drain:
        drain.run()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute('create table "Orders" (id int primary key, v text)')
            capture.attach(conn, 'public."Orders"', CaptureOptions(queue="q"))
            conn.execute("""insert into "Orders" values (1, 'UPPER'), (2, 'UPPER')""")
            conn.execute("insert into orders values (3, 'lower')")
        drain.run()
        resolved = drain.pipeline
    rows = spark.read.format("delta").load(pipe.location("default.orders")).collect()
    assert sorted((r.id, r.v) for r in rows) == [(1, "lower"), (3, "lower")]
    bad = spark.read.format("delta").load(pipe.location(pipe.quarantine)).collect()
    assert [r.ev_extra1 for r in bad] == ["public.Orders", "public.Orders"]
    assert all(
        r.reason.startswith(
            "table refused by the configuration: the targets 'default.orders' of public.orders"
        )
        and "public.Orders (matched by rule tables[1]" in r.reason
        for r in bad
    ), bad[0].reason
    state = status.collect(resolved)
    assert [(r.source, r.quarantined) for r in state.refused] == [("public.Orders", 2)]
    assert state.health.state == status.UNHEALTHY
    assert "REFUSED public.Orders" in status.render(state)
