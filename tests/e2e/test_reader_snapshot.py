"""The snapshot and the drain run as a plain ``cdc_reader`` member with SELECT on the table (the
role the docs give them), for a table without a primary key captured with --pkey and --ignore:
the snapshot's capture check and key lookup read the registry through cdc.get_capture_info()."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from cdc.pg import capture, pgtypes
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Queue
from cdc.pipeline import compare, snapshot
from cdc.pipeline.drain import Drain
from tests.support import drainkit
from tests.support.roles import LoginRoles

pytestmark = pytest.mark.spark


def test_reader_snapshots_and_drains_a_table_captured_with_pkey(
    admin_dsn: str, dsn: str, conn: psycopg.Connection, spark, tmp_path
) -> None:
    """As a cdc_reader member: the snapshot loads the rows, the drain applies later changes
    by the --pkey columns, and Delta equals the source without the ignored column."""
    Queue(conn, "q").create()
    conn.execute(
        "create table nk (a int not null, b text not null, v text, secret text, unique (a, b))"
    )
    conn.execute("insert into nk select g, 'b' || g, 'v' || g, 's' from generate_series(1, 50) g")
    capture.attach(
        conn, "public.nk", CaptureOptions(queue="q", pkey=("a", "b"), ignore=("secret",))
    )
    roles = LoginRoles(admin_dsn, dsn)
    try:
        member = roles.connect("cdc_reader").info.user
        conn.execute(sql.SQL("grant select on nk to {}").format(sql.Identifier(member)))
        pipe = drainkit.pipeline(
            make_conninfo(dsn, user=member), str(tmp_path), [{"source": "public.nk"}]
        )
        result = snapshot.Snapshot(pipe, spark, progress=False).run("public.nk")
        assert result.rows == 50
        conn.execute("update nk set v = 'changed' where a % 5 = 0")
        conn.execute("delete from nk where a % 7 = 0")
        conn.execute("insert into nk values (51, 'b51', 'new', 's')")
        with Drain(pipe, spark) as drain:
            assert drain.run() >= 1
    finally:
        roles.cleanup()
    cols = pgtypes.keyed_columns(conn, "public", "nk", "q")
    assert [c.name for c in cols if c.is_key] == ["a", "b"]
    assert "secret" not in [c.name for c in cols]
    expected = compare.source_rows(conn, "public", "nk", cols)
    assert len(expected) == 51 - 7
    assert compare.delta_rows(spark, str(tmp_path / "nk"), cols) == expected
