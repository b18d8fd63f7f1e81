"""The columns of the source tables a batch touches, kept between batches.

Each batch asks one query for the digests of the tables it touches
(cdc.pg.pgtypes.fingerprints) and reads the catalog again only for a table whose digest
changed or that has none; a table that cannot be read keeps its error, which the table's
task classifies (cdc.failures).
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

from cdc.pg import pgtypes
from cdc.targets import schema_drift

__all__ = ["Found", "SourceColumns"]


@dataclass(frozen=True)
class Found:
    """A source table's columns and their fill, or why they could not be read."""

    columns: list[pgtypes.Column] | None = None
    fill: schema_drift.Fill | None = None
    error: Exception | None = None

    def get(self) -> tuple[list[pgtypes.Column], schema_drift.Fill]:
        if self.error is not None:
            raise self.error
        assert self.columns is not None and self.fill is not None
        return self.columns, self.fill


class SourceColumns:
    """The columns of source tables (pgtypes.keyed_columns) and their fill
    (schema_drift.fill_of), kept between batches: each batch asks one query for the digests
    of the tables it touches (pgtypes.fingerprints), and reads the catalog again only for a
    table whose digest changed or that has none (it does not exist: the error is kept)."""

    def __init__(self, conn: psycopg.Connection, queue: str | None) -> None:
        self.conn = conn
        self.queue = queue
        self._known: dict[tuple[str, str], tuple[str, Found]] = {}

    def lookup(self, names: list[tuple[str, str]]) -> dict[tuple[str, str], Found]:
        digests = pgtypes.fingerprints(self.conn, names, self.queue)
        found: dict[tuple[str, str], Found] = {}
        for name in names:
            digest = digests.get(name)
            known = self._known.get(name)
            if digest is not None and known is not None and known[0] == digest:
                found[name] = known[1]
                continue
            self._known.pop(name, None)
            try:
                columns = pgtypes.keyed_columns(self.conn, *name, self.queue)
                fill = schema_drift.fill_of(self.conn, *name)
            except psycopg.OperationalError:
                raise
            except Exception as exc:  # classified by the table's task (cdc.failures)
                found[name] = Found(error=exc)
                continue
            found[name] = Found(columns, fill)
            if digest is not None:
                # read after the digest: a change in between shows as a new digest next time
                self._known[name] = (digest, found[name])
        return found
