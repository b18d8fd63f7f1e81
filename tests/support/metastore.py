"""The tests' Hive metastore: a metastore server (Hive 2.3's thrift service,
``org.apache.hadoop.hive.metastore.HiveMetaStore``) on 127.0.0.1, its own Java process with
pyspark's jars (pyspark ships the metastore, Derby and DataNucleus for Spark's Hive client),
backed by a Derby database in a temporary folder whose schema it creates as it starts.

Every Spark session that names it (``spark_settings``: what a user writes in the pipeline
file's [spark] section) keeps its tables' names there, any number of processes at a time:
unlike an embedded Derby metastore, which admits one JVM. Started once per run, when a test
first asks for it (the ``metastore`` fixture); each test takes a database of its own.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.processes import free_port, stop

MAIN_CLASS = "org.apache.hadoop.hive.metastore.HiveMetaStore"
STARTUP_SECONDS = 180  # the schema is created at start: 8 s on a quiet 2-core machine
LOG_FILE = "hive.log"  # Hive's own log settings (hive-common's hive-log4j2.properties)
OUTPUT_FILE = "server.out"  # the JVM's stdout and stderr (log4j's own warnings, a crash)


@dataclass(frozen=True)
class Metastore:
    """A running metastore server (see the module docstring)."""

    uri: str  # thrift://127.0.0.1:<port>

    def spark_settings(self) -> dict[str, str]:
        """Spark's settings for this metastore (what a user writes in [spark])."""
        return {
            "spark.sql.catalogImplementation": "hive",
            "spark.hadoop.hive.metastore.uris": self.uri,
        }

    def database(self) -> str:
        """A database name no other test uses (the metastore lives for the whole run)."""
        return f"db_{uuid.uuid4().hex[:12]}"


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java:
        raise RuntimeError("no java for the metastore server (set JAVA_HOME)")
    return java


def command(folder: Path, port: int) -> list[str]:
    """The server's command line: its Derby database, warehouse and logs in folder."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    hiveconf = {
        "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={folder / 'db'};create=true",
        "datanucleus.schema.autoCreateAll": "true",  # the schema, made at the first start
        "hive.metastore.schema.verification": "false",  # no schema version recorded yet
        "hive.metastore.warehouse.dir": str(folder / "warehouse"),  # the default database
    }
    return [
        _java(),
        "-Xmx512m",
        "-cp",
        str(jars / "*"),
        # Hive's log settings ask for log4j's asynchronous loggers, whose library pyspark
        # does not ship: synchronous, to folder/hive.log
        "-Dhive.async.log.enabled=false",
        f"-Dhive.log.dir={folder}",
        f"-Dderby.stream.error.file={folder / 'derby.log'}",
        MAIN_CLASS,
        "-p",
        str(port),
        *(arg for key, value in hiveconf.items() for arg in ("--hiveconf", f"{key}={value}")),
    ]


def _accepting(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _tails(folder: Path) -> str:
    """The end of the server's output and of its log, to say why it did not start."""
    tails = []
    for name in (OUTPUT_FILE, LOG_FILE):
        path = folder / name
        text = path.read_text(errors="replace")[-2000:] if path.exists() else "(none)"
        tails.append(f"--- {name}:\n{text}")
    return "\n".join(tails)


@contextmanager
def metastore(folder: Path) -> Iterator[Metastore]:
    """Starts the server with its files in folder, returns once it accepts connections (it
    listens only after its schema exists); stops it on exit."""
    port = free_port()
    with (folder / OUTPUT_FILE).open("wb") as output:
        server = subprocess.Popen(
            command(folder, port),
            cwd=folder,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while not _accepting(port):
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"the metastore server did not start (exit {server.poll()}):\n" + _tails(folder)
                )
            time.sleep(0.2)
        yield Metastore(f"thrift://127.0.0.1:{port}")
    finally:
        stop(server)
