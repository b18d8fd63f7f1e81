"""Every toml block of README.md and docs/*.md parses with the pipeline loader
(cdc.config.parse): a block with a [source] table is a whole pipeline file; a block marked
``<!-- doc-test: fragment -->`` is a part of one, checked inside EXAMPLE (its [[tables]]
appended, its other sections merged over EXAMPLE's). A block without [source] must be marked
fragment; one marked ``skip: why`` is not parsed. Parsing needs no server and no file."""

from __future__ import annotations

import copy
import tomllib
from typing import Any

import pytest

from cdc import config
from cdc.errors import ConfigError
from tests.support import doc_blocks
from tests.support.doc_blocks import Block

# the smallest pipeline a fragment completes; its table's target is one no example uses
EXAMPLE: dict[str, Any] = {
    "source": {"dsn": "postgresql:///doc_test", "queue": "doc_test", "consumer": "doc_test"},
    "target": {"path": "/nonexistent/doc_test"},
    "tables": [{"source": "doc_test.example", "target": "doc_test_example"}],
}
BLOCKS = doc_blocks.blocks("toml")


def within_example(fragment: dict[str, Any]) -> dict[str, Any]:
    """The fragment's sections merged over EXAMPLE's, its [[tables]] after EXAMPLE's."""
    data = copy.deepcopy(EXAMPLE)
    for key, value in fragment.items():
        if key == "tables" and isinstance(value, list):
            data["tables"] += value
        elif isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key].update(value)
        else:
            data[key] = value
    return data


def check(block: Block) -> None:
    """Parses one block as the module docstring says, failing with its place."""
    try:
        data = tomllib.loads(block.text)
    except tomllib.TOMLDecodeError as exc:
        pytest.fail(f"{block.where}: not valid TOML: {exc}")
    if block.directive.fragment:
        data = within_example(data)
    elif "source" not in data:
        pytest.fail(
            f"{block.where}: a toml block without [source] is part of a pipeline file: mark it"
            " <!-- doc-test: fragment --> (or skip: why)"
        )
    try:
        config.parse(data)
    except ConfigError as exc:
        kind = "the fragment, inside the example pipeline," if block.directive.fragment else ""
        pytest.fail(f"{block.where}: {kind or 'the pipeline'} is refused: {exc}")


@pytest.mark.parametrize("block", BLOCKS, ids=[b.where for b in BLOCKS])
def test_a_toml_block_parses_with_the_pipeline_loader(block: Block) -> None:
    """Whole pipeline or fragment, the loader accepts it (or the block says why not)."""
    if block.directive.skip:
        pytest.skip(f"{block.where}: {block.directive.skip}")
    check(block)


def test_the_example_pipeline_parses_alone() -> None:
    """EXAMPLE itself is a pipeline (a fragment's refusal is the fragment's)."""
    assert config.parse(copy.deepcopy(EXAMPLE)).source.queue == "doc_test"


def test_a_fragment_merges_into_the_example() -> None:
    """Tables appended, a section's keys over EXAMPLE's, EXAMPLE untouched."""
    merged = within_example(
        {"source": {"jdbc_url": "jdbc:postgresql://db/x"}, "tables": [{"source": "a.b"}]}
    )
    assert merged["source"]["queue"] == "doc_test" and "jdbc_url" in merged["source"]
    assert [t["source"] for t in merged["tables"]] == ["doc_test.example", "a.b"]
    assert len(EXAMPLE["tables"]) == 1 and "jdbc_url" not in EXAMPLE["source"]


@pytest.mark.parametrize(
    ("text", "fragment", "expected"),
    [
        ('[[tables]]\nsource = "public.orders"\n', False, "mark it <!-- doc-test: fragment"),
        ('[[tables]]\nsource = "public.orders"\nmode = "mirrror"\n', True, "mode must be"),
        ('[[tables]]\nsource = "public.orders\n', True, "not valid TOML"),
        ('[source]\nqueue = "q"\n', False, "the pipeline is refused"),
    ],
)
def test_a_wrong_block_is_named(text: str, fragment: bool, expected: str) -> None:
    """Unmarked fragments, refused keys and broken TOML fail with the block's place."""
    block = Block(
        doc_blocks.ROOT / "x.md", 3, "toml", text, doc_blocks.Directive(fragment=fragment)
    )
    with pytest.raises(pytest.fail.Exception, match=rf"^x\.md:3: .*{expected}"):
        check(block)
