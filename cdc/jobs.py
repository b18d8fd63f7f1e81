"""The spark-submit entry points: one script per job in the repository's ``jobs/``, shipped
inside the package (cdc.shipped).

``spark-submit`` runs a Python file, not a module: each job is a script that calls the ``cdc``
command of the same name (the same code as ``cdc drain`` and the others, in the session
spark-submit started). ``cdc submit JOB`` builds the whole command line around them; in a
checkout the script is ``jobs/drain.py``, and where the package is installed ``script(JOB)``
is the file to give spark-submit by hand::

    spark-submit ... "$(python -c 'import cdc.jobs as j; print(j.script("drain"))')" \\
        --config pipeline.toml --until-caught-up
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from cdc import shipped
from cdc.errors import ConfigError

JOBS = ("drain", "snapshot", "maintain")
LOUDNESS = ("-v", "-vv", "-vvv", "--verbose", "-q", "--quiet")  # cdc's, before the command


def run(job: str, argv: Sequence[str]) -> int:
    """Runs the cdc command of a job with a script's arguments; -v / -q among them (cdc submit
    passes its own) go before the command, where cdc takes them."""
    from cdc.cli import main

    loudness = [a for a in argv if a in LOUDNESS]
    return main([*loudness, job, *(a for a in argv if a not in LOUDNESS)])


def script(job: str) -> Path:
    """The file of a job: ``jobs/<job>.py`` in a checkout, ``cdc/job_scripts/<job>.py`` where
    the package is installed."""
    if job not in JOBS:
        raise ConfigError(f"no job {job!r}: the jobs are {', '.join(JOBS)}")
    return shipped.folder("jobs") / f"{job}.py"
