"""The command line: one definition per default and per shared option, and a package of small
modules (the commands' behaviour is tested where they run: tests/pg, tests/e2e)."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cdc import cli, config
from cdc.config import Source
from cdc.ops import maintain
from cdc.pg.capture import CaptureOptions
from cdc.pg.ticker import TickerSettings
from cdc.pipeline import snapshot, verify

ROOT = Path(__file__).resolve().parents[2]


def defaults(*argv: str) -> argparse.Namespace:
    return cli.build_parser().parse_args(list(argv))


def test_ticker_defaults_are_the_settings_defaults() -> None:
    """cdc ticker's periods default to TickerSettings' fields."""
    args = defaults("ticker")
    assert TickerSettings(args.tick_period, args.retry_period, args.maint_period) == (
        TickerSettings()
    )


@pytest.mark.parametrize(
    ("argv", "name", "expected"),
    [
        (("snapshot", "s.t", "--config", "c"), "partitions", snapshot.PARTITIONS),
        (("snapshot", "s.t", "--config", "c"), "nice", snapshot.NICE),
        (("resync", "s.t", "--config", "c"), "partitions", snapshot.PARTITIONS),
        (("verify", "--config", "c"), "limit", verify.LIMIT),
        (("maintain", "--config", "c"), "retain_hours", maintain.DEFAULT_RETAIN_HOURS),
        (("attach", "s.t", "--queue", "q"), "format", CaptureOptions("q").format),
        (("attach", "s.t", "--queue", "q"), "mode", CaptureOptions("q").mode),
    ],
)
def test_command_defaults_come_from_their_owner(
    argv: tuple[str, ...], name: str, expected: object
) -> None:
    """A command's default is the one its module defines."""
    assert getattr(defaults(*argv), name) == expected


def test_ticker_help_shows_the_defaults() -> None:
    """The ticker's help shows its periods as before: (1), (30), (120)."""
    sub = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    text = sub.choices["ticker"].format_help()
    for shown in ("seconds between ticks (1)", "retry runs (30)", "maintenance (120)"):
        assert shown in re.sub(r"\s+", " ", text)


def test_source_defaults_are_the_dataclass_defaults() -> None:
    """A [source] without the optional keys gets Source's defaults."""
    pipe = config.parse(
        {
            "source": {"dsn": "postgresql://x/y", "queue": "q", "consumer": "c"},
            "target": {"path": "/d"},
            "tables": [{"source": "public.t"}],
        }
    )
    assert pipe.source == Source("postgresql://x/y", "q", "c")
    assert pipe.tables[0].mode == config.default(config.TableMap, "mode")
    assert pipe.quarantine == config.default(config.Pipeline, "quarantine")


def test_dsn_option_is_declared_once() -> None:
    """--dsn is declared by config.add_dsn_argument only, and every command without --config
    has it (the ticker repeatable)."""
    declared = [
        path for path in (ROOT / "cdc").rglob("*.py") if 'add_argument("--dsn"' in path.read_text()
    ]
    assert declared == [ROOT / "cdc" / "config" / "arguments.py"]
    sub = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    with_dsn = {
        name
        for name, parser in sub.choices.items()
        if any("--dsn" in a.option_strings for a in parser._actions)
    }
    assert with_dsn == {
        "install", "uninstall", "queue", "attach", "detach", "triggers", "rules", "ticker",
        "consumer", "grant",
    }  # fmt: skip
    assert defaults("ticker", "--dsn", "a", "--dsn", "b").dsn == ["a", "b"]


def test_dsn_falls_back_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No --dsn: $CDC_DSN; neither: no database."""
    monkeypatch.setenv(config.DSN_ENV, "postgresql://env/db")
    assert config.dsns_of(None) == ["postgresql://env/db"]
    assert config.dsns_of("postgresql://given/db") == ["postgresql://given/db"]
    monkeypatch.delenv(config.DSN_ENV)
    assert config.dsns_of(None) == []


def test_cli_modules_are_small() -> None:
    """No module of the cdc.cli package is over 400 lines."""
    sizes = {p.name: len(p.read_text().splitlines()) for p in (ROOT / "cdc" / "cli").glob("*.py")}
    assert {"__init__.py", "parser.py", "queue.py", "capture.py", "pipeline.py", "ops.py"} <= set(
        sizes
    )
    assert max(sizes.values()) <= 400, sizes


def test_python_m_cdc_cli_runs_the_command() -> None:
    """python -m cdc.cli is the cdc command: usage errors exit 2, a missing database 1."""
    run = [sys.executable, "-m", "cdc.cli"]
    env_free = {k: v for k, v in os.environ.items() if k != config.DSN_ENV}
    usage = subprocess.run([*run, "nosuch"], capture_output=True, text=True, env=env_free)
    assert usage.returncode == 2 and "invalid choice" in usage.stderr
    missing = subprocess.run([*run, "install"], capture_output=True, text=True, env=env_free)
    assert missing.returncode == 1
    assert missing.stderr.strip() == "cdc: error: no database given: pass --dsn or set CDC_DSN"


@pytest.mark.parametrize(("argv", "lowered"), [((), snapshot.NICE), (("--nice", "0"), 0)])
def test_snapshot_lowers_its_priority_before_its_session(
    tmp_path: Path, argv: tuple[str, ...], lowered: int
) -> None:
    """cdc snapshot lowers its own CPU priority (by --nice) before it reads its pipeline
    file and starts Spark, so its JVM inherits it; a missing file still fails as before."""
    script = (
        "import os, sys; from cdc import cli; before = os.nice(0);"
        " rc = cli.main(sys.argv[1:]); print(rc, os.nice(0) - before)"
    )
    missing = tmp_path / "missing.toml"
    argv = ("snapshot", "s.t", "--config", str(missing), *argv)
    done = subprocess.run(
        [sys.executable, "-c", script, *argv], capture_output=True, text=True, check=True
    )
    rc, delta = done.stdout.split()
    assert int(rc) != 0 and "missing.toml" in done.stderr
    assert int(delta) == min(lowered, 19 - os.nice(0))


@pytest.mark.parametrize("value", ["-5", "20", "ten"])
def test_snapshot_refuses_a_nice_outside_0_to_19(value: str, capsys) -> None:
    """--nice takes 0 to 19: raising priority would need root, and is never what it is for."""
    with pytest.raises(SystemExit):
        defaults("snapshot", "s.t", "--config", "c", "--nice", value)
    assert "--nice: a whole number from 0 to 19" in capsys.readouterr().err
