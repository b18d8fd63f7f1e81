"""The queue engine a pipeline consumes: our own (schema ``cdc``) or a real PgQ (``pgq``).

The choice is a value made here, once: an ``Engine`` names the schema that holds the queue's
functions and tables, the file of its named queries, and what it can do beyond what both
share. Code asks a flag (``engine.has_incarnations``), never the engine's name.

Both engines share the consumer's functions (``register_consumer``, ``force_tick``,
``ticker``, ``next_batch_custom``, ``get_batch_events``, ``finish_batch``) under the same
names, with the same results, and the tables ``queue``, ``consumer``, ``subscription`` and
``tick`` with the same columns. ``Engine.call`` runs one of its named queries and turns every
PostgreSQL error into the typed exception of ``cdc.errors``: the one place that does so for
the queue's clients (``cdc.pg.queue``, ``cdc.pg.consumer``, ``cdc.pg.batch``).

Adding an engine: one ``Engine`` value in ``ENGINES`` and one file of named queries beside
``cdc/pg/queries/queries.sql`` with the names the consumer calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from cdc import errors
from cdc.pg import sqlfiles

__all__ = ["CDC", "ENGINES", "PGQ", "Engine", "engine_of"]


@dataclass(frozen=True)
class Engine:
    """A queue engine and what it can do."""

    name: str
    """The schema of its functions and tables (also the configuration's ``queue_schema``)."""
    queries: str
    """Its named queries, a file under ``cdc/pg/queries`` (see ``cdc.pg.sqlfiles.queries``)."""
    has_incarnations: bool
    """``get_queue_incarnation``: tells a queue from an earlier one of the same name."""
    has_capture_registry: bool
    """Its triggers are attached by ``cdc attach``, which records them (the capture registry:
    ``get_capture_info``, ``get_capture_aliases``, the ``pkey=`` options)."""
    notifies_ticks: bool
    """Every tick sends a NOTIFY on channel ``cdc_tick``: a follow-mode drain LISTENs."""
    has_batch_slices: bool
    """``get_batch_events(batch, from, to)``: a slice of a batch by ev_id, read on its own."""

    @property
    def schema(self) -> sql.Identifier:
        return sql.Identifier(self.name)

    def query(self, name: str) -> str:
        """The text of one of its named queries; CdcError when the engine has no such call
        (PgQ has no ``open_batch_cursor``, and no administration through this package)."""
        try:
            return sqlfiles.queries(self.queries)[name]
        except KeyError:
            raise errors.CdcError(f"the {self.name} queue engine has no {name} call") from None

    def call(self, conn: psycopg.Connection, name: str, **params: Any) -> Any:
        """Run a named query; the first column of its first row (None without a row)."""
        try:
            row = conn.execute(self.query(name), params).fetchone()
        except psycopg.Error as exc:
            raise errors.translate(exc) from exc
        return None if row is None else row[0]

    def call_in_savepoint(self, conn: psycopg.Connection, name: str, **params: Any) -> Any:
        """``call`` in a savepoint: an error leaves the surrounding transaction usable."""
        try:
            with conn.transaction():
                return self.call(conn, name, **params)
        except psycopg.Error as exc:
            raise errors.translate(exc) from exc


CDC = Engine(
    "cdc",
    "queries.sql",
    has_incarnations=True,
    has_capture_registry=True,
    notifies_ticks=True,
    has_batch_slices=True,
)
PGQ = Engine(
    "pgq",
    "queries_pgq.sql",
    has_incarnations=False,
    has_capture_registry=False,
    notifies_ticks=False,
    has_batch_slices=False,
)
ENGINES = {engine.name: engine for engine in (CDC, PGQ)}


def engine_of(queue_schema: str) -> Engine:
    """The engine of a configuration's ``queue_schema``."""
    try:
        return ENGINES[queue_schema]
    except KeyError:
        raise errors.ConfigError(
            f"source.queue_schema must be one of {', '.join(ENGINES)}, not {queue_schema!r}"
        ) from None
