"""What the drain and the snapshot read as a plain ``cdc_reader`` member (the role the docs give
them) with SELECT on the table: the capture registry, through cdc.get_capture_info(), for
the table's pkey= and ignore= options."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from cdc.errors import ConfigError
from cdc.pg import capture, pgtypes
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Queue
from tests.support.roles import LoginRoles


@pytest.fixture
def reader(admin_dsn: str, dsn: str, conn: psycopg.Connection) -> Iterator[psycopg.Connection]:
    """A cdc_reader member that may SELECT from table nk, captured into q with --pkey a,b and
    --ignore secret (nk has no primary key, a unique index on (a, b))."""
    Queue(conn, "q").create()
    conn.execute(
        "create table nk (a int not null, b text not null, v text, secret text, unique (a, b))"
    )
    capture.attach(
        conn, "public.nk", CaptureOptions(queue="q", pkey=("a", "b"), ignore=("secret",))
    )
    roles = LoginRoles(admin_dsn, dsn)
    member = roles.connect("cdc_reader")
    conn.execute(sql.SQL("grant select on nk to {}").format(sql.Identifier(member.info.user)))
    yield member
    roles.cleanup()


def test_reader_reads_the_registry_through_get_capture_info(reader: psycopg.Connection) -> None:
    """The reader may not read cdc.capture, but may execute cdc.get_capture_info()."""
    assert reader.execute(
        "select has_table_privilege('cdc.capture', 'select'),"
        " has_function_privilege('cdc.get_capture_info()', 'execute')"
    ).fetchone() == (False, True)
    rows = reader.execute("select table_name, queue_name from cdc.get_capture_info()").fetchall()
    assert rows == [("public.nk", "q")]


@pytest.mark.parametrize("required", [False, True])
def test_reader_folds_a_table_captured_with_pkey(
    reader: psycopg.Connection, required: bool
) -> None:
    """A table without a primary key, captured with --pkey, is keyed by those columns for the
    reader (the drain, and the snapshot which requires the registry); ignored columns are left
    out."""
    cols = pgtypes.keyed_columns(reader, "public", "nk", "q", registry_required=required)
    assert [(c.name, c.is_key) for c in cols] == [("a", True), ("b", True), ("v", False)]


def test_reader_is_refused_the_table_for_a_queue_it_is_not_captured_into(
    reader: psycopg.Connection, conn: psycopg.Connection
) -> None:
    """For a queue the table is not captured into there are no pkey= columns: the refusal
    says to capture it with --pkey (the lookup finds the capture of that queue, not any)."""
    Queue(conn, "other").create()
    with pytest.raises(ConfigError, match="capture the table with --pkey"):
        pgtypes.keyed_columns(reader, "public", "nk", "other")
