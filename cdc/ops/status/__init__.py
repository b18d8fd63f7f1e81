"""Status and metrics: the queue, the consumer and every target table of a pipeline, read
from PostgreSQL and from the Delta logs (delta-rs, no JVM), for a terminal, for scripts (JSON)
and for Prometheus: the same health in all three, with the same exit code.

- ``model``: what the status holds, and the health judged from it (what *pending*,
  *draining*, *orphan* and *unhealthy* mean);
- ``queries``: the queue and its consumers, read from PostgreSQL;
- ``gather``: one pipeline's status in one pass (``collect``);
- ``text``: for a terminal and for scripts (``render``, ``to_json``);
- ``prometheus``: as metrics (``registry`` of a ``--follow`` drain, ``to_prometheus``, the
  ticker's ``TickerCollector``).

Callers import the names below from ``cdc.ops.status``.
"""

from cdc.ops.status.gather import collect
from cdc.ops.status.model import (
    DRAINING,
    MAX_PENDING_AGE,
    OK,
    UNHEALTHY,
    ConsumerState,
    Health,
    QueueState,
    RefusedTable,
    Status,
    TableState,
    health,
)
from cdc.ops.status.prometheus import (
    PipelineCollector,
    TickerCollector,
    metrics,
    registry,
    to_prometheus,
)
from cdc.ops.status.queries import (
    QUERIES,
    capture_guards,
    consumers,
    drain_lock_held,
    queue_config,
    queue_state,
    registered_consumers,
)
from cdc.ops.status.text import render, render_consumers, to_json

__all__ = [
    "DRAINING",
    "MAX_PENDING_AGE",
    "OK",
    "QUERIES",
    "UNHEALTHY",
    "ConsumerState",
    "Health",
    "PipelineCollector",
    "QueueState",
    "RefusedTable",
    "Status",
    "TableState",
    "TickerCollector",
    "capture_guards",
    "collect",
    "consumers",
    "drain_lock_held",
    "health",
    "metrics",
    "queue_config",
    "queue_state",
    "registered_consumers",
    "registry",
    "render",
    "render_consumers",
    "to_json",
    "to_prometheus",
]
