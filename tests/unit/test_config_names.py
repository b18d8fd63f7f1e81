"""The configuration's table names (any legal PostgreSQL name, quoted where needed) and its
file errors (not UTF-8, a directory), which print one line, not a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cdc import config
from cdc.errors import ConfigError


def pipeline(source: str) -> config.Pipeline:
    return config.parse(
        {
            "source": {"dsn": "host=x", "queue": "q", "consumer": "c"},
            "target": {"path": "/tmp/t"},
            "tables": [{"source": source, "target": "t"}],
        }
    )


@pytest.mark.parametrize(
    ("text", "schema", "name"),
    [
        ("public.orders", "public", "orders"),
        ("public.My Table", "public", "My Table"),
        ('"public"."My Table"', "public", "My Table"),
        ('public."My.Table"', "public", "My.Table"),
        ('"sch.x"."t"', "sch.x", "t"),
        ('public."say ""hi"""', "public", 'say "hi"'),
        ("ünï.cödé 中", "ünï", "cödé 中"),
        ("Public.Orders", "Public", "Orders"),
    ],
)
def test_source_names(text: str, schema: str, name: str) -> None:
    """A source names schema and table as the catalog spells them: bare, or double-quoted
    (holding dots, quotes, spaces, any character)."""
    table = pipeline(text).tables[0]
    assert (table.schema, table.name) == (schema, name)
    assert table.source == f"{schema}.{name}"  # as the events' ev_extra1 names it


@pytest.mark.parametrize(
    "text", ["public.a.b", '"public', 'public."a"b', "public.", ".t", "orders", 'pub"lic.t']
)
def test_bad_source_names(text: str) -> None:
    """An ambiguous or malformed name is refused, naming the key and the rule."""
    with pytest.raises(ConfigError, match=r"tables\[1\]\.source must be schema\.table"):
        pipeline(text)


def test_command_line_names_match_quoted_or_not() -> None:
    """cdc snapshot / resync / verify find a table by its quoted or its plain name."""
    pipe = pipeline('public."My.Table"')
    assert pipe.mirrors(['public."My.Table"'])[0].name == "My.Table"
    assert pipe.mirrors(["public.My.Table"])[0].name == "My.Table"


def cdc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cdc.cli", *args], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("kind", ["latin1", "directory", "missing"])
def test_config_file_errors_are_one_line(tmp_path: Path, kind: str) -> None:
    """--config naming a file that is not UTF-8, a directory or nothing: exit 1, one line
    saying so, no traceback."""
    path = tmp_path / "pipeline.toml"
    if kind == "latin1":
        path.write_bytes("[source]\ndsn = 'caf\xe9'\n".encode("latin-1"))
    elif kind == "directory":
        path.mkdir()
    with pytest.raises(ConfigError):
        config.load(path)
    proc = cdc("status", "--config", str(path))
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("cdc: error:"), proc.stderr
    assert str(path) in proc.stderr
    assert {"latin1": "not UTF-8", "directory": "is a directory", "missing": "does not exist"}[
        kind
    ] in proc.stderr
