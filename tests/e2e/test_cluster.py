"""The drain job on a real cluster manager: a Spark standalone master and one worker started
from the pyspark install, and `spark-submit --master spark://...` running jobs/drain.py, with
sql-format events so that the executors (other processes) run the package's Python too."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psycopg
import pyspark
import pytest

from cdc import jars, jobs
from cdc.pg import capture, pgtypes
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Queue
from cdc.pipeline import compare

pytestmark = pytest.mark.spark

SPARK_HOME = Path(pyspark.__file__).parent


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _master_state(ui_port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as r:
        return json.loads(r.read())


@pytest.fixture
def standalone(tmp_path):
    """A master and a worker (1 core, 1 GB) on this machine; yields the master URL and the
    master UI port."""
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOG_DIR": str(tmp_path)}
    port, ui, worker_ui = _port(), _port(), _port()
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    logs = [open(tmp_path / name, "w") for name in ("master.log", "worker.log")]  # noqa: SIM115
    master = subprocess.Popen(
        [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
         "--port", str(port), "--webui-port", str(ui)],
        env=env, stdout=logs[0], stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"spark://127.0.0.1:{port}"
    worker = subprocess.Popen(
        [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
         "--cores", "1", "--memory", "1g", "--webui-port", str(worker_ui),
         "--work-dir", str(tmp_path / "work")],
        env=env, stdout=logs[1], stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                if _master_state(ui).get("aliveworkers", 0) >= 1:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "master.log").read_text()[-3000:]
            time.sleep(1)
        yield url, ui
    finally:
        for proc in (worker, master):
            proc.terminate()
            proc.wait(60)
        for log in logs:
            log.close()


def test_drain_job_on_a_standalone_cluster(standalone, dsn, spark, tmp_path):
    url, ui = standalone
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
        "SPARK_HOME": str(SPARK_HOME),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    done = subprocess.run(
        [str(SPARK_HOME / "bin" / "spark-submit"), "--master", url,
         "--executor-memory", "512m", "--total-executor-cores", "1",
         "--jars", ",".join(str(j) for j in found),
         "--conf", "spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension",
         "--conf",
         "spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog",
         str(jobs.script("drain")), "--config", str(conf), "--until-caught-up"],
        env=env, capture_output=True, text=True, timeout=900, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    apps = _master_state(ui)["completedapps"]
    assert [a["name"] for a in apps] == ["cdc-drain"]
    assert apps[0]["cores"] >= 1  # ran with an executor of the worker
    with psycopg.connect(dsn) as conn:
        cols = pgtypes.columns(conn, "public", "c")
        expected = compare.source_rows(conn, "public", "c")
    assert compare.delta_rows(spark, str(tmp_path / "delta" / "c"), cols) == expected
