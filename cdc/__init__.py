"""Change data capture from PostgreSQL into Delta Lake, with PgQ's queue model in pure SQL.

The public API is what this package exports (``__all__``), imported from ``cdc`` itself::

    from cdc import Consumer, load_pipeline, at_tick

Those names are kept from release to release; the modules behind them (``cdc.pg.consumer``,
``cdc.config.load``, ...) are the layout of the day and may move. The names are imported when
first used, so ``import cdc`` costs nothing (``cdc sql`` starts without psycopg or Spark).
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

try:
    __version__ = version("cdc-delta")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.1.0"

if TYPE_CHECKING:  # what the names are, for type checkers and editors ("as": re-exported)
    from cdc.config import Pipeline as Pipeline
    from cdc.config import load as load_pipeline  # noqa: F401 (re-exported)
    from cdc.errors import CdcError as CdcError
    from cdc.errors import ConfigError as ConfigError
    from cdc.errors import NotInstalled as NotInstalled
    from cdc.errors import QueueError as QueueError
    from cdc.ops import at_tick as at_tick
    from cdc.pg.batch import Batch as Batch
    from cdc.pg.batch import BatchInfo as BatchInfo
    from cdc.pg.batch import Event as Event
    from cdc.pg.consumer import Consumer as Consumer
    from cdc.pg.queue import Producer as Producer
    from cdc.pg.queue import Queue as Queue

# public name -> (module, attribute in it; None: the module itself)
_PUBLIC: dict[str, tuple[str, str | None]] = {
    # the queue's clients: PostgreSQL only, no Spark
    "Queue": ("cdc.pg.queue", "Queue"),  # create, configure, tick a queue
    "Producer": ("cdc.pg.queue", "Producer"),  # insert events
    "Consumer": ("cdc.pg.consumer", "Consumer"),  # register, take and finish batches
    "Batch": ("cdc.pg.batch", "Batch"),  # a batch's events: chunks, Arrow, retry, finish
    "BatchInfo": ("cdc.pg.batch", "BatchInfo"),
    "Event": ("cdc.pg.batch", "Event"),
    # the pipeline file (conf/pipeline.toml), every key checked
    "load_pipeline": ("cdc.config", "load"),
    "Pipeline": ("cdc.config", "Pipeline"),
    # reading the replicas as of a tick (docs/querying.md)
    "at_tick": ("cdc.ops.at_tick", None),
    # errors: the bases; cdc.errors holds one class per SQLSTATE (docs/queue.md#errors)
    "CdcError": ("cdc.errors", "CdcError"),
    "ConfigError": ("cdc.errors", "ConfigError"),
    "NotInstalled": ("cdc.errors", "NotInstalled"),
    "QueueError": ("cdc.errors", "QueueError"),
}

__all__ = [*_PUBLIC, "__version__"]


def __getattr__(name: str) -> Any:
    """A public name, imported on first use (PEP 562)."""
    try:
        module, attribute = _PUBLIC[name]
    except KeyError:
        raise AttributeError(f"module 'cdc' has no attribute {name!r}") from None
    value = importlib.import_module(module)
    if attribute is not None:
        value = getattr(value, attribute)
    globals()[name] = value  # once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})
