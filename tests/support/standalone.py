"""A Spark standalone cluster on this machine: a master and one worker started from the pyspark
install (``spark-class``), as a user's cluster manager runs them. The cluster tests
(tests/e2e/test_cluster.py) and the cluster mode of bench/drain_vs_textbook.py use it.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyspark

from tests.support.processes import free_port, stop

SPARK_HOME = Path(pyspark.__file__).parent
STARTUP_SECONDS = 180


@dataclass(frozen=True)
class Standalone:
    """A running master and worker: the master's URL and its web UI's port."""

    url: str  # spark://127.0.0.1:<port>
    ui_port: int

    def state(self) -> dict:
        """The master's state as its UI's JSON gives it (workers, applications)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as r:
            return json.loads(r.read())


@contextmanager
def standalone(folder: Path, cores: int = 1, memory: str = "1g") -> Iterator[Standalone]:
    """A master and a worker of ``cores`` cores and ``memory`` for executors, logging into
    folder; stopped on exit. Waits until the master counts the worker alive."""
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOG_DIR": str(folder)}
    port, ui, worker_ui = free_port(), free_port(), free_port()
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    url = f"spark://127.0.0.1:{port}"
    commands = {
        "master": [
            spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
            "--port", str(port), "--webui-port", str(ui),
        ],
        "worker": [
            spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
            "--cores", str(cores), "--memory", memory, "--webui-port", str(worker_ui),
            "--work-dir", str(folder / "work"),
        ],
    }  # fmt: skip
    with ExitStack() as stack:
        for name, command in commands.items():
            log = stack.enter_context(open(folder / f"{name}.log", "w"))
            proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
            stack.callback(stop, proc)  # the worker stops first
        cluster = Standalone(url, ui)
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            try:
                if cluster.state().get("aliveworkers", 0) >= 1:
                    break
            except (OSError, ValueError):  # not listening yet, or an empty page while it starts
                pass
            if time.monotonic() > deadline:
                log_text = (folder / "master.log").read_text()[-3000:]
                raise RuntimeError(f"the standalone cluster did not start:\n{log_text}")
            time.sleep(0.5)
        yield cluster
