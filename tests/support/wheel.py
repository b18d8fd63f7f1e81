"""The wheel of this checkout, as a user builds it (``pip wheel --no-deps``).

It is built from a copy of the checkout: an in-tree build keeps ``build/``, whose files from
an earlier build (a moved or deleted module) would ship too."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LEFT_OUT = ("tests", "docs", "bench", ".*", "build", "dist", "*.egg-info", "__pycache__", "var")
LEFT_OUT += ("demo-output",)


def build_wheel(work: Path) -> Path:
    """The wheel, built in work/dist from a copy of the checkout in work/source."""
    source = work / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*LEFT_OUT))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(work / "dist"),
         str(source)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    [wheel] = (work / "dist").glob("cdc_delta-*.whl")
    return wheel
