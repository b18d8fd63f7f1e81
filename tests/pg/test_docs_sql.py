"""The SQL of README.md and docs/ against an installed schema: every ``sql`` block that calls a
``cdc.*`` function runs (unless marked ``skip: why``), and every ``cdc.name(...)`` the
documents mention anywhere, in a block of any language or in the prose, is a function of the
installed schema. A renamed or dropped SQL function then fails here, not in a user's session.

A block runs in a fresh database with cdc installed, queue ``cdc_events`` created, and table
``public.orders (id int primary key, status text)`` captured into it. pg_cron is not in the
test server: ``cron.schedule(name, schedule, command)`` here runs its command once, so a
block that schedules our functions runs what it schedules."""

from __future__ import annotations

import importlib.util
import re

import psycopg
import pytest
from psycopg import sql

import cdc
from cdc import Queue
from cdc.pg.capture import CaptureOptions, attach
from tests.support import doc_blocks

CALL = re.compile(r"\bcdc\.(\w+)\s*\(")

RUN = [b for b in doc_blocks.blocks("sql") if CALL.search(b.text) and not b.directive.skip]

CRON_STAND_IN = """
create schema cron;
create function cron.schedule(jobname text, schedule text, command text) returns bigint
language plpgsql as $$ begin execute command; return 1; end $$;
"""


def test_the_documents_call_cdc_functions_in_sql() -> None:
    assert RUN, "no sql block calling cdc.* was found: the test has nothing to run"


@pytest.mark.parametrize("block", RUN, ids=[b.where for b in RUN])
def test_sql_blocks_run(block: doc_blocks.Block, conn: psycopg.Connection) -> None:
    conn.execute(CRON_STAND_IN)
    Queue(conn, "cdc_events").create()
    conn.execute("create table public.orders (id int primary key, status text)")
    attach(conn, "public.orders", CaptureOptions(queue="cdc_events", format="json"))
    try:
        conn.execute(block.text.encode())
    except psycopg.Error as exc:
        pytest.fail(f"{block.where}: {type(exc).__name__}: {exc}")


def _python_name(name: str) -> bool:
    """cdc.<name> is the Python package's (cdc.config.load(...) and the like)."""
    return name in dir(cdc) or importlib.util.find_spec(f"cdc.{name}") is not None


def test_documented_functions_exist(conn: psycopg.Connection) -> None:
    mentioned: dict[str, str] = {}
    for block in doc_blocks.blocks():
        for name in CALL.findall(block.text):
            mentioned.setdefault(name, block.where)
    for span in doc_blocks.inline_spans():
        for name in CALL.findall(span.code):
            mentioned.setdefault(name, span.where)
    assert len(mentioned) >= 10, "the documents' cdc.* calls were not found"
    installed = {
        name
        for (name,) in conn.execute(
            sql.SQL(
                "select p.proname from pg_proc p join pg_namespace n on n.oid = p.pronamespace"
                " where n.nspname = {}"
            ).format(sql.Literal("cdc"))
        )
    }
    unknown = {
        name: where
        for name, where in mentioned.items()
        if name not in installed and not _python_name(name)
    }
    assert not unknown, "no such function in schema cdc: " + ", ".join(
        f"cdc.{name} ({where})" for name, where in sorted(unknown.items())
    )
