"""Snapshot job for spark-submit: loads captured tables' existing rows into their Delta tables,
consistently with the queue (see cdc.pipeline.snapshot). Attach the tables' triggers first.

``cdc submit`` builds the command (``--print`` shows it)::

    cdc submit snapshot public.orders [public.customers ...] --config pipeline.toml

By hand: as in jobs/drain.py, with this script (``jobs/snapshot.py`` in a checkout,
``cdc.jobs.script("snapshot")`` where the package is installed).

The table is copied in chunks of ``--chunk-rows`` rows by key, each in its own short
PostgreSQL snapshot, while the drain goes on; killed, it resumes after the last chunk saved.
Over a TCP DSN the executors read each chunk in parallel, in ``--partitions`` key ranges.
"""

import sys

from cdc.jobs import run

if __name__ == "__main__":
    sys.exit(run("snapshot", sys.argv[1:]))
