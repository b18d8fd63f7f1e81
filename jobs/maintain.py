"""Maintenance job for spark-submit: OPTIMIZE (ordered by the first key column) and VACUUM the
pipeline's Delta tables; safe beside a running drain (see cdc.ops.maintain).

``cdc submit`` builds the command (``--print`` shows it)::

    cdc submit maintain --config pipeline.toml [--retain-hours 168] [TARGET ...]

By hand: as in jobs/drain.py, with this script (``jobs/maintain.py`` in a checkout,
``cdc.jobs.script("maintain")`` where the package is installed).
"""

import sys

from cdc.jobs import run

if __name__ == "__main__":
    sys.exit(run("maintain", sys.argv[1:]))
