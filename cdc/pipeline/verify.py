"""Verify: a mirror target equals its source table, compared at one consistent point.

The point is a tick T made while the verified source tables are locked in SHARE mode (for a
few milliseconds: writers wait, readers do not), with a REPEATABLE READ transaction taking
its snapshot under the same locks: that snapshot and T see the same committed changes of
those tables. The drain then applies batches one tick at a time up to T, and under the drain
lock the Delta versions at T are noted; the source as of the snapshot is compared with the
Delta tables at those versions, while writers and later drains go on.

The comparison streams both sides once: row counts and an order-independent hash (the sum of
a digest of every row, in cdc.pipeline.compare's normal form). Only on a mismatch does a second pass
find the differing primary keys (a bounded list): missing in Delta, extra in Delta, changed.
"""

from __future__ import annotations

import decimal
import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import psycopg
from psycopg import sql
from pyspark.sql import SparkSession

from cdc.config import Pipeline, TableMap
from cdc.errors import CdcError
from cdc.pg import pgtypes
from cdc.pg import source as source_module
from cdc.pg.consumer import Consumer
from cdc.pipeline import compare
from cdc.pipeline.drain import Drain
from cdc.targets import delta_table

LOCK_TIMEOUT = "5s"  # waiting longer for the SHARE locks gives up: run verify again
LIMIT = 20  # differing keys shown per table


@dataclass
class Verdict:
    source: str
    target: str
    tick_id: int
    delta_version: int
    source_rows: int = 0
    delta_rows: int = 0
    source_hash: str = ""
    delta_hash: str = ""
    differences: int = 0  # keys that differ, when the hashes do
    keys: list[dict[str, Any]] = field(default_factory=list)  # the first ones: kind, key

    @property
    def ok(self) -> bool:
        return self.source_rows == self.delta_rows and self.source_hash == self.delta_hash

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def _canonical(value: Any) -> str:
    if isinstance(value, decimal.Decimal):
        return "D" + str(value.normalize())
    if isinstance(value, tuple):
        return "(" + ",".join(_canonical(v) for v in value) + ")"
    return type(value).__name__ + ":" + repr(value)


def digest(row: tuple[Any, ...]) -> int:
    """A 64-bit digest of a row in normal form."""
    text = "\x1f".join(_canonical(v) for v in row)
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def _summary(rows: Iterable[tuple[Any, ...]]) -> tuple[int, str]:
    count, total = 0, 0
    for row in rows:
        count += 1
        total = (total + digest(row)) % (1 << 64)
    return count, f"{total:016x}"


class Verifier:
    """Compares the pipeline's mirror targets with their sources (see the module)."""

    def __init__(self, pipeline: Pipeline, spark: SparkSession, limit: int = LIMIT) -> None:
        self.pipeline = pipeline
        self.spark = spark
        self.limit = limit

    def run(self, tables: list[str] | None = None) -> list[Verdict]:
        maps = self.pipeline.mirrors(tables or [])
        with Drain(self.pipeline, self.spark) as catch_up:  # registers the consumer, ticks
            catch_up.run()
        tick_id, snapshot = self._consistent_point(maps)
        try:
            with Drain(self.pipeline, self.spark, tick=False) as to_tick:
                to_tick.run(stop_at_tick=tick_id)
            versions = self._versions_at(tick_id, maps)
            return [self._compare(snapshot, m, tick_id, versions[m.target]) for m in maps]
        finally:
            snapshot.close()

    def _consistent_point(self, maps: list[TableMap]) -> tuple[int, psycopg.Connection]:
        """Makes tick T under SHARE locks of the source tables, and opens a REPEATABLE READ
        transaction whose snapshot sees what T sees of them."""
        src = self.pipeline.source
        snapshot = psycopg.connect(src.dsn)
        snapshot.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        snapshot.read_only = True
        with psycopg.connect(src.dsn) as locker:
            locker.execute(sql.SQL("set local lock_timeout = {}").format(sql.Literal(LOCK_TIMEOUT)))
            try:
                for schema, name in sorted({(m.schema, m.name) for m in maps}):
                    locker.execute(
                        sql.SQL("lock table {}.{} in share mode").format(
                            sql.Identifier(schema), sql.Identifier(name)
                        )
                    )
            except psycopg.errors.LockNotAvailable:
                snapshot.close()
                raise CdcError(
                    f"the source tables stayed locked by writers for {LOCK_TIMEOUT}:"
                    " run verify again (a long transaction writing to them holds it up)"
                ) from None
            tick_id = Consumer.for_source(locker, src).tick()
            if tick_id is None:
                snapshot.close()
                raise CdcError(f"queue {src.queue} did not tick: is its ticker paused?")
            snapshot.execute("select 1")  # takes the snapshot, the locks held
            locker.commit()
        return tick_id, snapshot

    def _versions_at(self, tick_id: int, maps: list[TableMap]) -> dict[str, int]:
        """The Delta versions of the targets with the consumer at tick T (checked under the
        drain lock: a concurrent drain may have gone further)."""
        src = self.pipeline.source
        with (
            psycopg.connect(src.dsn, autocommit=True) as conn,
            source_module.drain_lock(conn, src, "verify"),
        ):
            position = Consumer.for_source(conn, src).position()
            if position != tick_id:
                raise CdcError(
                    f"another drain of {src.queue}/{src.consumer} went past the"
                    f" verification tick ({position} > {tick_id}): run verify again"
                )
            versions = {}
            for m in maps:
                versions[m.target] = delta_table.version(self.spark, self.pipeline.table(m.target))
        return versions

    def _source_rows(
        self, snapshot: psycopg.Connection, m: TableMap, cols: list[pgtypes.Column]
    ) -> Iterator[tuple[Any, ...]]:
        with snapshot.cursor(name=f"cdc_verify_{abs(hash(m.target))}") as cur:
            cur.itersize = 10_000
            cur.execute(compare.source_query(m.schema, m.name, cols))
            for row in cur:
                yield compare.normal(row)

    def _delta_rows(
        self, m: TableMap, cols: list[pgtypes.Column], version: int
    ) -> Iterator[tuple[Any, ...]]:
        frame = compare.delta_frame(self.spark, self.pipeline.location(m.target), cols, version)
        for row in frame.toLocalIterator():
            yield compare.normal(tuple(row))

    def _compare(
        self, snapshot: psycopg.Connection, m: TableMap, tick_id: int, version: int
    ) -> Verdict:
        queue = self.pipeline.source.capture_queue
        cols = pgtypes.keyed_columns(snapshot, m.schema, m.name, queue, registry_required=True)
        verdict = Verdict(m.source, m.target, tick_id, version)
        verdict.source_rows, verdict.source_hash = _summary(self._source_rows(snapshot, m, cols))
        verdict.delta_rows, verdict.delta_hash = _summary(self._delta_rows(m, cols, version))
        if verdict.ok:
            return verdict
        key_at = [i for i, c in enumerate(cols) if c.is_key]
        key_names = [cols[i].name for i in key_at]
        expected: dict[tuple[Any, ...], int] = {}
        for row in self._source_rows(snapshot, m, cols):
            expected[tuple(row[i] for i in key_at)] = digest(row)
        found: list[tuple[str, tuple[Any, ...]]] = []
        for row in self._delta_rows(m, cols, version):
            key = tuple(row[i] for i in key_at)
            want = expected.pop(key, None)
            if want is None:
                found.append(("extra in Delta", key))
            elif want != digest(row):
                found.append(("changed", key))
        found.extend(("missing in Delta", key) for key in expected)
        verdict.differences = len(found)
        verdict.keys = [
            {"kind": kind, "key": dict(zip(key_names, map(_plain, key), strict=True))}
            for kind, key in sorted(found, key=lambda f: (f[0], repr(f[1])))[: self.limit]
        ]
        return verdict


def _plain(value: Any) -> Any:
    if isinstance(value, int | float | str | bool) or value is None:
        return value
    return str(value)
