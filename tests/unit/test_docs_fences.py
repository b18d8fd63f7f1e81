"""Every fenced block of README.md and docs/*.md names its language, and every doc-test
directive before a block parses and fits it (tests/support/doc_blocks)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import doc_blocks
from tests.support.doc_blocks import LANGUAGES, Directive

RUN_WITH_FIXTURES = ("python", "sql")  # the languages whose blocks run (fixtures NAME, ...)


def test_every_block_names_a_known_language() -> None:
    """A bare ``` fence, or a language the doc tests do not know, is named with its place."""
    known = ", ".join(sorted(LANGUAGES))
    bad = [
        f"{b.where}: a bare ``` fence: name its language ({known})"
        if not b.language
        else f"{b.where}: ```{b.language}: not a language of the doc tests ({known})"
        for b in doc_blocks.blocks()
        if b.language not in LANGUAGES
    ]
    assert not bad, "\n".join(bad)


def test_directives_fit_their_blocks() -> None:
    """fragment belongs to toml blocks, fixtures to the blocks that run (python, sql)."""
    bad = []
    for b in doc_blocks.blocks():
        if b.directive.fragment and b.language != "toml":
            bad.append(f"{b.where}: doc-test fragment is for toml blocks, not {b.language}")
        if b.directive.fixtures and b.language not in RUN_WITH_FIXTURES:
            bad.append(f"{b.where}: doc-test fixtures are for python and sql, not {b.language}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("skip: needs a cluster", Directive(skip="needs a cluster")),
        ("fragment", Directive(fragment=True)),
        ("fixtures conn, spark", Directive(fixtures=("conn", "spark"))),
        ("fixtures pipeline spark", Directive(fixtures=("pipeline", "spark"))),
    ],
)
def test_a_directive_parses(body: str, expected: Directive) -> None:
    """skip with its reason, fragment, fixtures by name (commas or spaces)."""
    assert Directive.parse(body, "x.md:1") == expected


@pytest.mark.parametrize("body", ["skip", "skip:", "skip:  ", "fragments", "run"])
def test_a_directive_without_its_reason_or_unknown_is_refused(body: str) -> None:
    """A skip without a reason, or a word the doc tests do not know, names its place."""
    with pytest.raises(ValueError, match=r"^x\.md:1: "):
        Directive.parse(body, "x.md:1")


def test_a_directive_before_prose_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A directive that is not right before a fence would do nothing: refused, not ignored."""
    monkeypatch.setattr(doc_blocks, "ROOT", tmp_path)
    page = tmp_path / "page.md"
    page.write_text("<!-- doc-test: skip: why -->\n\nsome prose\n\n```sh\ncdc rules\n```\n")
    with pytest.raises(ValueError, match=r"^page\.md:1: a doc-test directive goes right before"):
        doc_blocks._read(page)
    page.write_text("<!-- doc-test: skip: why -->\n\n```sh\ncdc rules\n```\n")
    [block], _ = doc_blocks._read(page)
    assert block.directive.skip == "why" and block.line == 3
