"""The scheduling examples in conf/ are commands the CLI accepts: systemd units, cron lines and
the Airflow DAG (compiled; its job arguments parsed)."""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import pytest

from cdc import cli
from cdc.cli import submit

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


def _parse_cdc(argv: list[str]) -> None:
    """A cdc command line; for ``cdc submit``, the job's own arguments too."""
    _parse(argv)
    if argv[0] == "submit":
        job_args, _, _ = submit.split_arguments(argv[2:])
        _parse([argv[1], *job_args])


def test_cron_lines_run_the_jobs() -> None:
    lines = [
        x
        for x in (CONF / "cron" / "cdc.cron").read_text().splitlines()
        if x and not x.startswith("#") and "=" not in x.split()[0]
    ]
    assert len(lines) == 3
    submitted = []
    for line in lines:
        fields = line.split(None, 6)
        assert len(fields) == 7 and fields[5] == "cdc"  # five times, the user, the command
        # the cdc command itself (after a flock, or a shell's ;)
        command = re.search(r"(?:^|; |flock -n \S+ )cdc (.*?)(?: >>|$)", fields[6])
        assert command, line
        argv = shlex.split(command.group(1))
        _parse_cdc(argv)
        submitted += argv[1:2] if argv[0] == "submit" else []
    assert submitted == ["drain", "maintain"]


def test_the_airflow_dag_compiles_and_its_commands_parse() -> None:
    source = (CONF / "airflow" / "cdc_dag.py").read_text()
    tree = ast.parse(source)
    compile(tree, "cdc_dag.py", "exec")
    commands = [
        ast.unparse(kw.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "BashOperator"
        for kw in node.keywords
        if kw.arg == "bash_command"
    ]
    assert len(commands) == 3
    for command in commands:  # f'{CDC} submit drain --config {CONFIG} ...'
        text = command.removeprefix("f").strip("'\"").replace("{CONFIG}", "conf.toml")
        argv = shlex.split(text)
        assert argv[0] == "{CDC}"
        _parse_cdc(argv[1:])
    assert 'CDC = "/opt/cdc/venv/bin/cdc"' in source
