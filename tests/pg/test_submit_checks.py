"""The checks a Spark command and ``cdc submit`` make before a JVM starts, against a real
server: the DSN connects, every ``${NAME}`` of [spark] is set. Each command runs in a new
process whose JAVA_HOME has no java, so one that went as far as starting a JVM fails with
"no Java found" instead."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from cdc.cli import exitcodes
from cdc.pg import capture
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Queue


def _config(tmp_path: Path, dsn: str) -> Path:
    """A pipeline whose queue, consumer and captured table exist, so that the privilege
    checks pass and the checks under test are the ones that answer."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        Queue(conn, "q").create()
        Consumer(conn, "q", "c").register()
        conn.execute("create table t (id int primary key)")
        capture.attach(conn, "public.t", CaptureOptions(queue="q"))
    path = tmp_path / "p.toml"
    path.write_text(
        f"[source]\ndsn = '{dsn}'\nqueue = 'q'\nconsumer = 'c'\n[target]\npath = '{tmp_path}'\n"
        "[[tables]]\nsource = 'public.t'\n[spark]\n"
        "'spark.hadoop.fs.s3a.secret.key' = '${CDC_TEST_SECRET_KEY}'\n"
    )
    return path


def _run(argv: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "CDC_TEST_SECRET_KEY"}
    environ.update(JAVA_HOME=str(cwd / "no-java"), **env)
    return subprocess.run(
        [sys.executable, "-m", "cdc.cli", *argv],
        capture_output=True, text=True, check=False, cwd=cwd, env=environ,
    )  # fmt: skip


@pytest.mark.parametrize("argv", [["drain"], ["submit", "drain"]], ids=" ".join)
def test_an_unset_variable_fails_before_spark(argv: list[str], dsn: str, tmp_path: Path) -> None:
    """The database answers, a ${NAME} of [spark] is unset: one line naming the setting and
    the variable, before any JVM."""
    done = _run([*argv, "--config", str(_config(tmp_path, dsn))], tmp_path)
    assert done.returncode == exitcodes.COULD_NOT_RUN
    assert done.stderr.startswith(
        'cdc: error: [spark] "spark.hadoop.fs.s3a.secret.key" refers to ${CDC_TEST_SECRET_KEY},'
        " which is not set"
    ), done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr


def test_past_the_checks_the_jvm_is_next(dsn: str, tmp_path: Path) -> None:
    """Database and variables fine: the command goes on to start Spark (here: finds no java),
    which is what makes the other messages proof that no JVM had started."""
    done = _run(
        ["drain", "--config", str(_config(tmp_path, dsn))], tmp_path, CDC_TEST_SECRET_KEY="s3cr3t"
    )
    assert done.returncode == exitcodes.COULD_NOT_RUN
    assert done.stderr.startswith("cdc: error: no Java found"), done.stderr
    assert "s3cr3t" not in done.stderr
