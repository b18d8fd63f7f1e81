"""``make demo``'s command, ``cdc demo``, run as a user runs it (a subprocess in an empty
folder): no warning or error from Spark, py4j or the JVM, and every log line in the one
format of cdc.logs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from cdc import logs

pytestmark = pytest.mark.spark

# what Spark, py4j and the JVM print when they are not kept quiet
NOISE = (" WARN ", "WARNING", "ERROR", "py4j", "incubator", "Setting default log level")


def cdc_command() -> list[str]:
    """``.venv/bin/cdc`` as the Makefile calls it, or the module beside this interpreter."""
    script = Path(sys.executable).with_name("cdc")
    return [str(script)] if script.exists() else [sys.executable, "-m", "cdc.cli"]


@pytest.mark.timeout(2400)  # the whole demo: minutes on a small shared machine
def test_demo_prints_no_spark_noise_and_one_log_format(tmp_path: Path) -> None:
    """cdc demo exits 0 with every table matching; no line of stdout or stderr carries a
    Spark / py4j / JVM warning or error; every stderr line is a log line in the one format,
    and the project's are at INFO (a clean run warns about nothing)."""
    proc = subprocess.run(
        [*cdc_command(), "demo", "--dir", str(tmp_path / "demo-output")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=2300,
        check=False,
    )
    shown = f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}"
    assert proc.returncode == 0, shown
    assert "All tables match." in proc.stdout, shown
    lines = proc.stdout.splitlines() + proc.stderr.splitlines()
    noisy = [line for line in lines if any(word in line for word in NOISE)]
    assert noisy == [], shown
    for line in proc.stderr.splitlines():
        assert re.match(logs.LINE_PATTERN, line), f"not in the log format: {line!r}\n{shown}"
        assert " INFO cdc" in line, f"not a project info line: {line!r}\n{shown}"
    # the drain's summary, one per drain run of the demo (three workload parts), then the two
    # of cdc verify's (its catch-up, and the one at its consistent point)
    summaries = [line for line in proc.stderr.splitlines() if "cdc.progress: drain: done" in line]
    assert len(summaries) == 5, shown
    # the apply modes it shows: a masked column and every version of a customer
    assert "customers.email, masked" in proc.stdout, shown
    assert "shop.customers -> customers_scd2: 46 rows in PostgreSQL, 46 in Delta: ok" in (
        proc.stdout
    ), shown
