"""The package as a user installs it on a cluster: the wheel built from this checkout, installed
into a new virtual environment (no access to the repository), run with spark-submit from a
folder outside the repository, replicating a table into Delta.

The environment resolves the wheel's dependencies within constraints.txt from the package
index (pip's cache holds pyspark, the large one); without the index the test is skipped.
Two runs: ``spark-submit --jars <folder>`` by hand, as an old docstring said, stops in one
line before a batch is taken; ``cdc submit drain`` replicates the table."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from cdc import jars
from cdc.cli import exitcodes
from cdc.pg import capture, pgtypes
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Queue
from cdc.pipeline import compare
from tests.support.wheel import ROOT, build_wheel

pytestmark = pytest.mark.spark

SPARK_VARIABLES = ("SPARK_", "PYSPARK_", "_PYSPARK")  # this process's session's, not the user's


def _index_reachable() -> bool:
    """Whether pip reaches its package index (as pip is configured here: no host named)."""
    try:
        found = subprocess.run(
            [sys.executable, "-m", "pip", "index", "versions", "pip"],
            capture_output=True,
            timeout=120,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return False
    return found.returncode == 0


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtual environment holding the wheel of this checkout; its folder."""
    if not _index_reachable():
        pytest.skip("pip's package index is not reachable: the wheel's dependencies come from it")
    work = tmp_path_factory.mktemp("wheel")
    wheel = build_wheel(work)
    env = work / "venv"
    # a virtual environment of the interpreter this one's was made from, with nothing in it
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
    started = time.monotonic()
    # this checkout's pip installs into it (a new venv's own pip may be older than the one
    # whose cache holds the pyspark wheel built from its source distribution)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(env / "bin" / "python"), "install", "-q",
         "-c", str(ROOT / "constraints.txt"), str(wheel)],
        capture_output=True, text=True, check=False, cwd=work,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    print(f"\nwheel installed into a new virtual environment in {time.monotonic() - started:.0f} s")
    return env


def _environment(env: Path) -> dict[str, str]:
    """The shell of a user of the installed package: its bin first, nothing of the checkout."""
    environ = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV") and not k.startswith(SPARK_VARIABLES)
    }
    environ["PATH"] = f"{env / 'bin'}:{environ.get('PATH', '')}"
    return environ


def test_the_wheel_holds_the_jobs_and_the_example(installed: Path, tmp_path: Path) -> None:
    """The installed package, not the checkout, has the job scripts (jobs/), the SQL
    (triggers/), the example configuration and the log settings; its public API imports."""
    done = subprocess.run(
        [str(installed / "bin" / "python"), "-c",
         "import cdc, cdc.jobs as j; from importlib.resources import files;"
         "from cdc import shipped; from cdc.pg import sqlfiles;"
         "print(cdc.__file__); print(*(j.script(n) for n in j.JOBS));"
         "print(shipped.folder('triggers') / 'install.sql', sqlfiles.QUERIES / 'queries.sql');"
         "print(files('cdc') / 'conf/pipeline.toml'); print(files('cdc') / 'log4j2.properties');"
         "assert sqlfiles.expand('install.sql') and sqlfiles.queries();"
         "from cdc import Consumer, load_pipeline;"  # the README's public API, installed
         "assert all(getattr(cdc, name) for name in cdc.__all__)"],
        capture_output=True, text=True, check=True, cwd=tmp_path, env=_environment(installed),
    )  # fmt: skip
    paths = done.stdout.split()
    assert all(p.startswith(str(installed)) for p in paths), paths
    assert all(Path(p).is_file() for p in paths[1:]), paths
    example = Path(paths[-2]).read_text()
    assert example == (ROOT / "conf" / "pipeline.toml").read_text()
    assert Path(paths[1]).read_text() == (ROOT / "jobs" / "drain.py").read_text()


def _source(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        Queue(conn, "q").create()
        Consumer(conn, "q", "delta").register()
        conn.execute("create table w (id int primary key, v text, n numeric(8,2), t timestamptz)")
        capture.attach(conn, "public.w", CaptureOptions(queue="q", format="sql"))
        conn.execute(
            "insert into w select g, 'v' || g, g / 4.0, timestamptz '2026-01-01' + g * interval"
            " '1 hour' from generate_series(1, 300) g"
        )
        conn.execute("update w set v = 'changed', n = n * 2 where id % 7 = 0")
        conn.execute("delete from w where id % 11 = 0")


def _position(dsn: str) -> tuple[object, ...]:
    """The consumer's open batch and last tick."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "select sub_batch, sub_last_tick from cdc.subscription"
            " join cdc.consumer on co_id = sub_consumer where co_name = 'delta'"
        ).fetchone()
    assert row is not None
    return tuple(row)


@pytest.mark.timeout(1800)  # three JVMs (two spark-submits and the comparing session)
def test_spark_submit_outside_the_repository(installed, dsn, spark, tmp_path) -> None:
    """By hand with --jars naming a folder: one line saying what to pass, no batch taken.
    With ``cdc submit drain``: the table replicated, equal to its source."""
    _source(dsn)
    before = _position(dsn)
    work = tmp_path / "elsewhere"
    work.mkdir()
    conf = work / "pipeline.toml"
    conf.write_text(
        f"[source]\ndsn = '{dsn}'\nqueue = 'q'\nconsumer = 'delta'\n"
        f"[target]\npath = '{work / 'delta'}'\n[[tables]]\nsource = 'public.w'\n"
        "[spark]\nmaster = 'local[1]'\n'spark.driver.memory' = '1g'\n"
        "'spark.sql.shuffle.partitions' = '${CDC_TEST_PARTITIONS}'\n"
    )
    environ = _environment(installed)
    environ["CDC_TEST_PARTITIONS"] = "1"
    folder = jars.present()
    assert folder, "run `cdc jars` first (scripts/setup.sh does)"
    python = str(installed / "bin" / "python")
    script = subprocess.run(
        [python, "-c", "import cdc.jobs as j; print(j.script('drain'))"],
        capture_output=True, text=True, check=True, cwd=work, env=environ,
    ).stdout.strip()  # fmt: skip

    by_hand = subprocess.run(
        [str(installed / "bin" / "spark-submit"), "--master", "local[1]",
         "--jars", str(folder[0].parent),
         "--conf", "spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension",
         "--conf",
         "spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog",
         script, "--config", str(conf), "--until-caught-up"],
        capture_output=True, text=True, timeout=600, cwd=work,
        env={**environ, "PYSPARK_PYTHON": python},
    )  # fmt: skip
    # spark-submit copies the Python driver's stderr to its stdout
    output = by_hand.stdout + by_hand.stderr
    assert by_hand.returncode == exitcodes.COULD_NOT_RUN, output[-4000:]
    errors = [x for x in output.splitlines() if x.startswith("cdc: error:")]
    assert len(errors) == 1 and "not on Spark's classpath" in errors[0], output[-4000:]
    assert "--jars takes files, not a folder" in errors[0]
    assert "Py4JJavaError" not in output and "Traceback" not in output
    assert _position(dsn) == before and before[0] is None  # no batch was taken
    assert not (work / "delta").exists()

    printed = subprocess.run(
        ["cdc", "submit", "drain", "--print", "--config", "pipeline.toml"],
        capture_output=True, text=True, check=True, cwd=work, env=environ,
    ).stdout  # fmt: skip
    assert printed.startswith(f"{installed / 'bin' / 'spark-submit'} --master 'local[1]' --jars ")
    assert f"{script} --config {conf}" in printed and "CDC_TEST_PARTITIONS" not in printed

    done = subprocess.run(
        ["cdc", "submit", "drain", "--config", "pipeline.toml", "--until-caught-up"],
        capture_output=True, text=True, timeout=900, cwd=work, env=environ,
    )  # fmt: skip
    assert done.returncode == exitcodes.OK, (done.stdout + done.stderr)[-4000:]
    print(done.stdout[-2000:], done.stderr[-2000:])
    with psycopg.connect(dsn) as conn:
        cols = pgtypes.columns(conn, "public", "w")
        expected = compare.source_rows(conn, "public", "w")
    assert len(expected) == 300 - 300 // 11
    assert compare.delta_rows(spark, str(work / "delta" / "w"), cols) == expected
