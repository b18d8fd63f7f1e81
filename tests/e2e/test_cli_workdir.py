"""``cdc drain`` run from the command line leaves nothing in the working directory: Spark's
warehouse (``spark-warehouse/`` by default) goes to a temporary folder, or under target.path
when a target is a catalog name."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from cdc.pg import capture
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Queue

pytestmark = pytest.mark.spark


def drain_in(work: Path, conf: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "cdc.cli", "drain", "--config", str(conf)],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.parametrize("target", ["a", "default.a"])
def test_cli_drain_leaves_no_spark_warehouse_in_the_working_directory(
    conn: psycopg.Connection, dsn: str, spark, tmp_path: Path, target: str
) -> None:
    """A drain into a path target, or into a catalog-named one (whose files go to
    target.path/_spark_warehouse), applies the rows and leaves the working directory empty."""
    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()
    conn.execute("create table a (id int primary key, v text)")
    capture.attach(conn, "public.a", CaptureOptions(queue="q"))
    conn.execute("insert into a select g, 'v' || g from generate_series(1, 9) g")
    root = tmp_path / "delta"
    conf = tmp_path / "pipeline.toml"
    conf.write_text(
        f"[source]\ndsn = '{dsn}'\nqueue = 'q'\nconsumer = 'delta'\n[target]\npath = '{root}'\n"
        f"[[tables]]\nsource = 'public.a'\ntarget = '{target}'\n"
        '[spark]\n"spark.sql.shuffle.partitions" = 3\n'
    )
    work = tmp_path / "work"
    work.mkdir()
    drain_in(work, conf)
    assert list(work.iterdir()) == []
    table = root / "a" if target == "a" else root / "_spark_warehouse" / "a"
    assert spark.read.format("delta").load(str(table)).count() == 9
