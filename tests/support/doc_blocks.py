"""The examples of README.md and docs/*.md, as the documentation tests read them.

A fenced block is an example: its info string names its language (every block has one;
``text`` for output, layouts and diagrams that are not run). The line before a fence (blank
lines between are allowed) may be a directive, an HTML comment the rendered page hides::

    <!-- doc-test: fixtures conn -->        run with these pytest fixtures (python: variables)
    <!-- doc-test: skip: why -->            not run; the reason is required
    <!-- doc-test: fragment -->             a toml block checked inside the example pipeline

A directive anywhere else (prose after it, no fence) is an error: it would silently do nothing.
A block inside a list item is indented; its text here is dedented by its fence's indent.
Inline code spans (``cdc drain --follow``) are found in the prose between blocks.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LANGUAGES = frozenset({"python", "toml", "sql", "sh", "text", "json", "mermaid"})

_FENCE = re.compile(r"^(?P<indent> *)```(?P<info>[^`]*)$")
_DIRECTIVE = re.compile(r"^\s*<!--\s*doc-test:\s*(?P<body>.*?)\s*-->\s*$")
_INLINE = re.compile(r"(?<!`)`(?P<code>[^`\n]+)`(?!`)")


@dataclass(frozen=True)
class Directive:
    """What a block's directive comment says; the default runs it with no fixtures."""

    skip: str | None = None
    fragment: bool = False
    fixtures: tuple[str, ...] = ()

    @classmethod
    def parse(cls, body: str, where: str) -> Directive:
        if body.startswith("skip"):
            reason = body.removeprefix("skip").lstrip(":").strip()
            if not reason:
                raise ValueError(f"{where}: a doc-test skip names its reason: 'skip: why'")
            return cls(skip=reason)
        if body == "fragment":
            return cls(fragment=True)
        if body.startswith("fixtures"):
            names = re.split(r"[,\s]+", body.removeprefix("fixtures").strip())
            return cls(fixtures=tuple(n for n in names if n))
        raise ValueError(
            f"{where}: unknown doc-test directive {body!r}"
            " (skip: why | fragment | fixtures NAME, ...)"
        )


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, its text and its directive."""

    path: Path
    line: int  # of the opening fence, 1-based
    language: str
    text: str
    directive: Directive = field(default_factory=Directive)

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


@dataclass(frozen=True)
class Inline:
    """One inline code span of the prose."""

    path: Path
    line: int
    code: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def documents() -> list[Path]:
    """README.md and every page of docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@functools.cache  # read once per run: every test module asks for the blocks
def _read(path: Path) -> tuple[tuple[Block, ...], tuple[Inline, ...]]:
    blocks: list[Block] = []
    inlines: list[Inline] = []
    lines = path.read_text().splitlines()
    i = 0
    directive: tuple[str, int] | None = None  # the last directive's body and line
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence is None:
            said = _DIRECTIVE.match(line)
            if said:
                directive = (said.group("body"), i + 1)
            elif line.strip():
                if directive is not None:
                    raise ValueError(
                        f"{path.relative_to(ROOT)}:{directive[1]}: a doc-test directive goes"
                        " right before a fence (blank lines between are allowed), not before prose"
                    )
                inlines += [Inline(path, i + 1, m.group("code")) for m in _INLINE.finditer(line)]
            i += 1
            continue
        indent = len(fence.group("indent"))
        start = i + 1
        body: list[str] = []
        i += 1
        while i < len(lines) and not re.match(rf"^ {{0,{indent}}}```\s*$", lines[i]):
            text = lines[i]
            body.append(text[indent:] if text[:indent].strip() == "" else text.lstrip())
            i += 1
        if i == len(lines):
            raise ValueError(f"{path.relative_to(ROOT)}:{start}: the block is never closed")
        where = f"{path.relative_to(ROOT)}:{start}"
        said_here = Directive.parse(directive[0], where) if directive else Directive()
        info = fence.group("info").strip()
        blocks.append(Block(path, start, info, "\n".join(body) + "\n", said_here))
        directive = None
        i += 1
    return tuple(blocks), tuple(inlines)  # cached: shared by every caller, so frozen


def blocks(language: str | None = None) -> list[Block]:
    """Every fenced block of the documents, or those of one language."""
    found = [b for path in documents() for b in _read(path)[0]]
    return [b for b in found if language is None or b.language == language]


def inline_spans() -> list[Inline]:
    """Every inline code span of the documents' prose."""
    return [span for path in documents() for span in _read(path)[1]]


@dataclass(frozen=True)
class Command:
    """A cdc command shown: the words after ``cdc``, and whether it is a command line to type
    (a line of an ``sh`` block, or a ``$ `` prompt of a transcript) or a span of the prose,
    which may name a command without the options it needs."""

    where: str
    text: str
    typed: bool


# a command where a shell line starts one (at its start, after && or ;), VAR=value prefixes
# and a path to the script (.venv/bin/cdc) allowed; not after | (the docs' alternatives)
_RUNS = re.compile(r"(?:^|&&|;)\s*(?:\w+=\S*\s+)*(?:\S*/)?cdc\s+(?P<rest>[a-z-].*)$")


def _shell_lines(text: str) -> Iterator[tuple[int, str]]:
    """(offset of its first line, 1-based; the line) of a shell text, continuations joined."""
    pending: list[str] = []
    first = 1
    for offset, line in enumerate(text.splitlines(), start=1):
        if not pending:
            first = offset
        if line.rstrip().endswith("\\"):
            pending.append(line.rstrip()[:-1])
            continue
        yield first, " ".join([*pending, line])
        pending = []
    if pending:
        yield first, " ".join(pending)


def cdc_command_lines() -> Iterator[Command]:
    """Every cdc command shown: each command of an ``sh`` block's lines that runs cdc
    (``.venv/bin/cdc``, ``CDC_JARS_DIR=... cdc``, after ``&&`` or ``;`` too; continued lines
    joined), each ``$ cdc`` prompt of a ``text`` block (a transcript), and each inline span
    that starts with ``cdc`` and a command word."""
    for block in blocks():
        if block.language not in ("sh", "text"):
            continue
        for offset, line in _shell_lines(block.text):
            where = f"{block.path.relative_to(ROOT)}:{block.line + offset}"
            if block.language == "text":
                if line.startswith("$ "):
                    found = _RUNS.match(line.removeprefix("$ "))
                    if found:
                        yield Command(where, found["rest"], typed=True)
                continue
            for part in re.split(r"\s(?=&&|;)", line):
                found = _RUNS.search(part.strip())
                if found and not part.lstrip().startswith("#"):
                    yield Command(where, found["rest"], typed=True)
    for span in inline_spans():
        found = re.match(r"^cdc\s+(?P<rest>[a-z-].*)$", span.code)
        if found:
            yield Command(span.where, found["rest"], typed=False)
