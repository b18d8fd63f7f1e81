"""The session factory as a pipeline command starts it (a process of its own: the test
session's Spark is already running): the file's [spark] settings reach Spark, and the warehouse
goes under target.path for catalog-named targets, never into the working directory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = """
import json, sys
from cdc import config, spark as spark_module

pipeline = config.load(sys.argv[1])
session = spark_module.pipeline_session(pipeline, "cdc-session-test")
conf = session.sparkContext.getConf()
session.range(3).write.format("delta").saveAsTable("default.t")
detail = session.sql("describe detail default.t").collect()[0]
print(json.dumps({
    "partitions": session.conf.get("spark.sql.shuffle.partitions"),
    "marker": conf.get("spark.cdc.test.marker"),
    "memory": conf.get("spark.driver.memory"),
    "warehouse": session.conf.get("spark.sql.warehouse.dir"),
    "location": detail["location"],
}))
"""


def test_pipeline_session_takes_the_spark_section_and_its_warehouse(tmp_path: Path) -> None:
    """[spark] settings reach the session; a catalog-named target's files go to
    target.path/_spark_warehouse; nothing appears in the working directory."""
    root = tmp_path / "delta"
    conf = tmp_path / "pipeline.toml"
    conf.write_text(
        "[source]\ndsn = 'postgresql://x/y'\nqueue = 'q'\nconsumer = 'c'\n"
        f"[target]\npath = '{root}'\n"
        "[[tables]]\nsource = 'public.t'\ntarget = 'default.t'\n"
        '[spark]\n"spark.sql.shuffle.partitions" = 3\n"spark.cdc.test.marker" = \'yes\'\n'
        'spark.driver.memory = "1g"\n'
    )
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(conf)],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (found["partitions"], found["marker"], found["memory"]) == ("3", "yes", "1g")
    warehouse = root / "_spark_warehouse"
    assert found["warehouse"].removeprefix("file:").rstrip("/") == str(warehouse)
    assert found["location"].removeprefix("file:").startswith(str(warehouse))
    assert (warehouse / "t" / "_delta_log").is_dir()
    assert list(work.iterdir()) == []
