"""The repository's top-level folders that ship inside the package: ``triggers/`` (the SQL that
runs inside PostgreSQL) and ``jobs/`` (spark-submit's scripts).

They sit at the top of the repository, where a user opening it looks for them
(``spark-submit jobs/drain.py``); pyproject.toml maps them into the package as it is built, so
an installed wheel holds them as ``cdc/triggers`` and ``cdc/job_scripts``. An editable install
does not map them: setuptools' editable finder maps only folders holding an ``__init__.py``,
and these hold SQL and scripts. There they are the checkout's own folders, beside the
package's.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
# each top-level folder and its name inside the built package (pyproject.toml's package-dir)
INSIDE = {"triggers": "triggers", "jobs": "job_scripts"}


def folder(name: str) -> Path:
    """A shipped folder: inside the installed package, else the checkout's (an editable
    install, or the source tree on the path)."""
    for candidate in (PACKAGE / INSIDE[name], PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        f"{name}/ is missing: neither {PACKAGE / INSIDE[name]} (an installed package) nor"
        f" {PACKAGE.parent / name} (a checkout) exists; reinstall the package"
    )
