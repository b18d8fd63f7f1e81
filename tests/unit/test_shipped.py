"""The top-level folders that ship inside the package (triggers/, jobs/), found both in this
checkout (an editable install) and in a wheel built from it and installed elsewhere.

The wheel is installed with ``--target`` beside this environment's dependencies: about 10 s,
no server and no Spark."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from cdc import jobs, shipped
from cdc.pg import sqlfiles
from tests.support.wheel import ROOT, build_wheel


def _setuptools() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_pyproject_lists_every_package_and_maps_the_folders():
    """The packages are listed by hand (discovery cannot map a folder into the package): the
    list is every folder of cdc/ with an __init__.py, plus the mapped folders, each mapped
    to the name cdc.shipped looks for."""
    config = _setuptools()
    found = sorted(
        ".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "cdc").rglob("__init__.py")
    )
    mapped = {f"cdc.{inside}": top for top, inside in shipped.INSIDE.items()}
    assert config["package-dir"] == mapped
    missing = sorted(set(found) - set(config["packages"]))
    assert not missing, f"add {missing} to [tool.setuptools] packages in pyproject.toml"
    assert sorted(config["packages"]) == sorted([*found, *mapped])


def test_the_checkout_finds_its_own_folders():
    """In the checkout, the files read and run are the repository's top-level ones."""
    assert shipped.folder("triggers") == ROOT / "triggers"
    assert sqlfiles.read("install.sql") == (ROOT / "triggers" / "install.sql").read_text()
    assert [jobs.script(job) for job in jobs.JOBS] == [ROOT / "jobs" / f"{j}.py" for j in jobs.JOBS]
    assert sqlfiles.QUERIES == ROOT / "cdc" / "pg" / "queries"


@pytest.mark.timeout(120)
def test_an_installed_wheel_holds_and_finds_them(tmp_path: Path) -> None:
    """The wheel holds every file of triggers/ and jobs/ and the runtime queries; installed
    outside the checkout, the package reads and runs its own copies."""
    wheel = build_wheel(tmp_path)
    names = set(zipfile.ZipFile(wheel).namelist())
    for top, inside in shipped.INSIDE.items():
        files = [p for p in (ROOT / top).rglob("*") if p.is_file() and "__pycache__" not in p.parts]
        assert files
        expected = {f"cdc/{inside}/{p.relative_to(ROOT / top).as_posix()}" for p in files}
        assert expected <= names, sorted(expected - names)
    assert {f"cdc/pg/queries/{p.name}" for p in sqlfiles.QUERIES.glob("*.sql")} <= names
    assert not any(n.startswith(("triggers/", "jobs/", "cdc/sql/")) for n in names)

    target = tmp_path / "installed"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target),
         str(wheel)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    probe = (
        "import cdc, cdc.jobs as j; from cdc.pg import sqlfiles;"
        "print(cdc.__file__); print(*(j.script(n) for n in j.JOBS));"
        "print(len(sqlfiles.expand('install.sql')), len(sqlfiles.queries()));"
        "print(sqlfiles.read('queue/functions/cdc.next_batch.sql') =="
        f" open({str(ROOT / 'triggers/queue/functions/cdc.next_batch.sql')!r}).read())"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True, text=True, check=True, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(target)},
    )  # fmt: skip
    package, scripts, sizes, same = done.stdout.splitlines()
    assert package == str(target / "cdc" / "__init__.py")
    assert scripts.split() == [str(target / "cdc" / "job_scripts" / f"{j}.py") for j in jobs.JOBS]
    assert sizes == f"{len(sqlfiles.expand('install.sql'))} {len(sqlfiles.queries())}"
    assert same == "True"
