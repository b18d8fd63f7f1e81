"""The Python of README.md and docs/ without a server: every block compiles, its imports run,
and every attribute it takes of a module of ``cdc`` exists (a renamed module or function
fails here, also in a block whose run is skipped); the public API (``cdc.__all__``) resolves,
is the README's table, and ``import cdc`` imports nothing heavy. The blocks run in
tests/e2e/test_docs_python.py, with the fixtures they declare."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

import cdc
from tests.support import doc_blocks

PYTHON = doc_blocks.blocks("python")


def _ids(blocks: list[doc_blocks.Block]) -> list[str]:
    return [b.where for b in blocks]


def test_the_documents_hold_python() -> None:
    assert len(PYTHON) >= 5, "the documents' python blocks were not found"


def _imports(block: doc_blocks.Block) -> tuple[ast.Module, dict[str, object]]:
    """The block's tree, and the names its import statements bind, imported for real."""
    tree = ast.parse(block.text, filename=block.where)
    names: dict[str, object] = {}
    statements = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
    code = compile(ast.Module(body=statements, type_ignores=[]), block.where, "exec")
    exec(code, names)  # the imports only
    names.pop("__builtins__", None)
    return tree, names


@pytest.mark.parametrize("block", PYTHON, ids=_ids(PYTHON))
def test_blocks_compile_and_import(block: doc_blocks.Block) -> None:
    try:
        tree, names = _imports(block)
    except ImportError as exc:
        pytest.fail(f"{block.where}: {exc} (what the public API exports: cdc.__all__)")
    missing = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            value = names.get(node.value.id)
            is_ours = isinstance(value, types.ModuleType) and value.__name__.startswith("cdc")
            if is_ours and not hasattr(value, node.attr):
                missing.append(f"{value.__name__}.{node.attr} (line {node.lineno})")
    assert not missing, f"{block.where}: no such name: {', '.join(missing)}"


def test_the_public_api_resolves() -> None:
    for name in cdc.__all__:
        assert getattr(cdc, name) is not None, name
    assert cdc.Consumer.__module__ == "cdc.pg.consumer"
    assert cdc.load_pipeline.__name__ == "load"
    with pytest.raises(AttributeError, match="no attribute 'queue_client'"):
        cdc.queue_client  # noqa: B018


def test_type_checkers_see_the_same_public_names() -> None:
    """cdc/__init__.py names its exports twice (the lazy table, and the imports under
    TYPE_CHECKING that type checkers read): the two lists are the same."""
    tree = ast.parse(Path(cdc.__file__).read_text())
    [guard] = [
        n for n in tree.body if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test)
    ]
    seen = {alias.asname or alias.name for n in guard.body for alias in n.names}
    assert seen == set(cdc.__all__) - {"__version__"}


def test_the_readme_names_the_public_api() -> None:
    """The README's table of the public API lists exactly what cdc exports."""
    readme = (doc_blocks.ROOT / "README.md").read_text()
    section = readme.split("## The Python API", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    listed = {name for row in rows for name in re.findall(r"`(\w+)`", row.split("|")[1])}
    assert listed == set(cdc.__all__) - {"__version__"}


def test_import_cdc_imports_nothing_heavy() -> None:
    """``cdc sql`` starts on the DataFusion engine without psycopg or Spark: the public
    names are imported when first used."""
    heavy = "('psycopg', 'pyspark', 'pyarrow')"
    probe = f"import sys, cdc; print(sorted(m for m in {heavy} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
