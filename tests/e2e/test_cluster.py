"""The drain job on a real cluster manager: a Spark standalone master and one worker started
from the pyspark install, and `spark-submit --master spark://...` running jobs/drain.py, with
sql-format events so that the executors (other processes) run the package's Python too."""

from __future__ import annotations

import os
import subprocess
import sys

import psycopg
import pytest

from cdc import jars, jobs
from cdc.pg import capture, pgtypes
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Queue
from cdc.pipeline import compare
from tests.support import standalone

pytestmark = pytest.mark.spark


@pytest.fixture
def cluster(tmp_path):
    """A master and a worker (1 core, 1 GB) on this machine (tests.support.standalone)."""
    with standalone.standalone(tmp_path) as running:
        yield running


def test_drain_job_on_a_standalone_cluster(cluster, dsn, spark, tmp_path):
    with psycopg.connect(dsn, autocommit=True) as conn:
        Queue(conn, "q").create()
        Consumer(conn, "q", "delta").register()
        conn.execute("create table c (id int primary key, v text, n numeric(8,2))")
        capture.attach(conn, "public.c", CaptureOptions(queue="q", format="sql"))
        conn.execute("insert into c select g, 'v' || g, g / 4.0 from generate_series(1, 500) g")
        conn.execute("update c set v = 'changed' where id % 7 = 0")
        conn.execute("delete from c where id % 11 = 0")
    conf = tmp_path / "pipeline.toml"
    conf.write_text(
        f"[source]\ndsn = '{dsn}'\nqueue = 'q'\nconsumer = 'delta'\n"
        f"[target]\npath = '{tmp_path / 'delta'}'\n[[tables]]\nsource = 'public.c'\n"
        "target = 'c'\n"
    )
    found = jars.present()
    assert found, "run `cdc jars` first (scripts/setup.sh does)"
    env = {
        **os.environ,
        "SPARK_HOME": str(standalone.SPARK_HOME),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    done = subprocess.run(
        [str(standalone.SPARK_HOME / "bin" / "spark-submit"), "--master", cluster.url,
         "--executor-memory", "512m", "--total-executor-cores", "1",
         "--jars", ",".join(str(j) for j in found),
         "--conf", "spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension",
         "--conf",
         "spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog",
         str(jobs.script("drain")), "--config", str(conf), "--until-caught-up"],
        env=env, capture_output=True, text=True, timeout=900, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    apps = cluster.state()["completedapps"]
    assert [a["name"] for a in apps] == ["cdc-drain"]
    assert apps[0]["cores"] >= 1  # ran with an executor of the worker
    with psycopg.connect(dsn) as conn:
        cols = pgtypes.columns(conn, "public", "c")
        expected = compare.source_rows(conn, "public", "c")
    assert compare.delta_rows(spark, str(tmp_path / "delta" / "c"), cols) == expected
