"""The scheduling examples in conf/ are commands the CLI accepts: systemd units, cron lines and
the Airflow DAG (compiled; its job arguments parsed)."""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import pytest

from cdc import cli

CONF = Path(__file__).resolve().parents[2] / "conf"


def _parse(argv: list[str]) -> None:
    try:
        cli.build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse's way of refusing
        pytest.fail(f"cdc refuses {argv}: exit {exc.code}")


@pytest.mark.parametrize("unit", sorted((CONF / "systemd").glob("*.service")), ids=str)
def test_systemd_units_run_cdc_commands(unit: Path) -> None:
    text = unit.read_text()
    [line] = [x for x in text.splitlines() if x.startswith("ExecStart=")]
    argv = shlex.split(line.removeprefix("ExecStart="))
    assert argv[0].endswith("/cdc")
    _parse(argv[1:])
    assert "[Install]" in text and "Restart=" in text


def test_cron_lines_run_the_jobs() -> None:
    lines = [
        x
        for x in (CONF / "cron" / "cdc.cron").read_text().splitlines()
        if x and not x.startswith("#") and "=" not in x.split()[0]
    ]
    assert len(lines) == 3
    for line in lines:
        fields = line.split(None, 6)
        assert len(fields) == 7 and fields[5] == "cdc"  # five times, the user, the command
        job = re.search(r"/jobs/(\w+)\.py (.*?)(?: >>|$)", fields[6])
        if job:
            _parse([job.group(1), *shlex.split(job.group(2))])
            continue
        command = re.search(r"(?:^|; )cdc (.*?)(?: >>|$)", fields[6])  # the cdc command itself
        assert command, line
        _parse(shlex.split(command.group(1)))


def test_the_airflow_dag_compiles_and_its_jobs_parse() -> None:
    source = (CONF / "airflow" / "cdc_dag.py").read_text()
    tree = ast.parse(source)
    compile(tree, "cdc_dag.py", "exec")
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "SparkSubmitOperator"
    ]
    assert len(calls) == 2
    for call in calls:
        kw = {k.arg: k.value for k in call.keywords if k.arg}
        app = ast.unparse(kw["application"])
        command = re.search(r"/(\w+)\.py", app).group(1)
        args = [ast.literal_eval(a) if not isinstance(a, ast.Name) else "conf.toml"
                for a in kw["application_args"].elts]  # fmt: skip
        _parse([command, *args])
    assert 'bash_command=f"cdc verify --config {CONFIG}"' in source
