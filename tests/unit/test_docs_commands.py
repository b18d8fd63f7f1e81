"""Every cdc command line that README.md and docs/*.md show parses with the CLI's parser: its
commands and options exist, and a line without placeholders is accepted whole
(tests/support/doc_commands says how a line is read)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from tests.support import doc_blocks, doc_commands
from tests.support.doc_blocks import Command
from tests.support.doc_commands import Parsers

BY_DOCUMENT: dict[str, list[Command]] = defaultdict(list)
for _command in doc_blocks.cdc_command_lines():
    BY_DOCUMENT[_command.where.partition(":")[0]].append(_command)


@pytest.fixture(scope="module")
def parsers() -> Parsers:
    """The full parser (it imports pyspark) and cdc sql's, built once for the module."""
    return Parsers.build()


@pytest.mark.parametrize("document", sorted(BY_DOCUMENT))
def test_the_command_lines_of_a_document_parse(parsers: Parsers, document: str) -> None:
    """Each problem names its file:line, the line and the bad word."""
    bad = [
        f"{c.where}: `cdc {c.text}`: {problem}"
        for c in BY_DOCUMENT[document]
        for problem in doc_commands.problems(parsers, c)
    ]
    assert not bad, "\n".join(bad)


def _problems(parsers: Parsers, text: str, *, typed: bool = True) -> list[str]:
    return doc_commands.problems(parsers, Command("x.md:1", text, typed))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("drian --config p.toml", "cdc has no command 'drian' (did you mean drain"),
        ("quarantine lsit --config p.toml", "cdc quarantine has no command 'lsit'"),
        ("drain --config p.toml --folow", "--folow is not an option of cdc drain (did you mean"),
        ("drain -v --config p.toml", "-v is not an option of cdc drain: cdc's own options go"),
        ("grant ROLE --as drain|verfy", "cdc grant --as is one of drain, verify"),
        ("consumer lst|register QUEUE", "cdc consumer's action is one of list, register"),
        ("submit drain --config p.toml --folow", "--folow is not an option of cdc submit drain"),
        ("submit drian --config p.toml", "cdc submit's job is one of drain, snapshot, maintain"),
        ("snapshot public.t --config p.toml --nice 30", "cdc refuses 'snapshot public.t"),
        ("submit snapshot --config p.toml", "cdc refuses 'snapshot --config p.toml'"),
        ("drain", "the following arguments are required: --config"),
        ("sql 'select 1' --config p.toml --engine duck", "cdc sql --engine is one of auto,"),
        ("maintain --config p.toml --retain-hours x", "argument --retain-hours: invalid int"),
        ("drain --config FILE [--bogus]", "--bogus is not an option of cdc drain"),
        ("maintain --retain-hours --bogus", "--bogus is not an option of cdc maintain"),
        ('sql "select 1 --config p.toml', "the shell cannot split it"),
    ],
)
def test_a_wrong_line_is_named(parsers: Parsers, text: str, expected: str) -> None:
    """A misspelt command, option or choice, a root option after the command, a value the
    command refuses, a submitted job's own arguments: each a problem naming the word."""
    found = _problems(parsers, text)
    assert any(expected in p for p in found), found


@pytest.mark.parametrize(
    "text",
    [
        "drain --config p.toml --follow",
        "-vv drain --config p.toml",
        "submit drain --config p.toml --print -- --master yarn --num-executors 4",
        "submit --print maintain --config p.toml",
        "quarantine discard --config p.toml --table public.t --before 2026-11-01 --yes",
        "queue config q ticker_idle_period='5 minutes' max_retries=10",
        "drain --config FILE [--once | --until-caught-up | --follow]",
        "grant ROLE --as drain|verify|writer|admin [--tables ...] [--print]",
        "submit JOB [the job's arguments] [-- spark-submit's arguments]",
        'sql --at-tick N "select ..."',
        "--version",
    ],
)
def test_a_right_line_passes(parsers: Parsers, text: str) -> None:
    """Whole lines, placeholders (ALL-CAPS words, ..., [ ], a|b) and spark-submit's own
    arguments after --."""
    assert _problems(parsers, text) == []


def test_a_span_of_the_prose_may_name_a_command_without_what_it_needs(parsers: Parsers) -> None:
    """`cdc drain` and `cdc attach --ignore` in a sentence pass; typed, they are refused."""
    for text in ("drain", "attach --ignore", "quarantine list"):
        assert _problems(parsers, text, typed=False) == []
        assert _problems(parsers, text, typed=True) != []
    assert _problems(parsers, "drain --folow", typed=False) != []


PAGE = """\
Run `cdc status` (not `cdc.status`, nor `cdc`):

```sh
.venv/bin/cdc install --dsn x            # a comment
CDC_JARS_DIR=/j /opt/v/bin/cdc jars
make x && cdc rules
# cdc drain, a comment
cdc snapshot public.t \\
    --config p.toml
```

```text
$ cdc sql --config p.toml
cdc: error: run cdc attach again
```
"""


def test_the_lines_are_found_where_users_copy_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sh blocks (a path, VAR= prefixes, after &&, continued lines; not comments), a
    transcript's $ prompts (not its output), spans of the prose that start with cdc."""
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    monkeypatch.setattr(doc_blocks, "ROOT", tmp_path)
    monkeypatch.setattr(doc_blocks, "documents", lambda: [page])
    assert list(doc_blocks.cdc_command_lines()) == [
        Command("page.md:4", "install --dsn x            # a comment", True),
        Command("page.md:5", "jars", True),
        Command("page.md:6", "rules", True),
        Command("page.md:8", "snapshot public.t      --config p.toml", True),
        Command("page.md:13", "sql --config p.toml", True),
        Command("page.md:1", "status", False),
    ]
