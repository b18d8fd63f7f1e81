"""pyproject.toml's dependency ranges and constraints.txt's exact versions agree: every
dependency the tests install is pinned, within its range, and the packages a cluster brings
are ranges, not pins."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
CLUSTER_PROVIDED = ("pyspark", "delta-spark", "pandas", "pyarrow")


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not an exact pin"
            pins[canonicalize_name(name)] = version.strip()
    return pins


def _requirements() -> list[Requirement]:
    extras = [r for group in PROJECT["optional-dependencies"].values() for r in group]
    return [Requirement(r) for r in [*PROJECT["dependencies"], *extras]]


def test_every_dependency_is_pinned_within_its_range() -> None:
    """setup.sh installs with constraints.txt: each requirement has a pin its range admits."""
    pins = _pins()
    for req in _requirements():
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is not pinned in constraints.txt"
        assert req.specifier.contains(pins[name]), f"{req.name}=={pins[name]} not in {req}"


def test_packages_a_cluster_brings_are_ranges() -> None:
    """pyspark, delta-spark, pandas and pyarrow are ranges, so a cluster's own are kept."""
    for req in _requirements():
        if canonicalize_name(req.name) in CLUSTER_PROVIDED:
            assert not any(s.operator in ("==", "===") for s in req.specifier), req


def test_setup_installs_with_the_constraints() -> None:
    assert (
        "pip install --quiet -c constraints.txt -e '.[dev]'"
        in (ROOT / "scripts" / "setup.sh").read_text()
    )
