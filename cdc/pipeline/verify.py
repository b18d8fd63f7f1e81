"""Verify: a mirror target equals its source table, compared at one consistent point (of a
target that keeps deleted rows, ``deletes = "soft"``, the rows not marked deleted: the target
kind's ``current`` rows).

The point is a tick T and a REPEATABLE READ snapshot that see the same transactions, taken
without locking the verified tables (so verify needs no write privilege on them, only what
the drain needs: ``cdc grant ROLE --as verify``). Connection A begins REPEATABLE READ, exports
its snapshot (``pg_export_snapshot()``) and calls ``cdc.tick_at_snapshot(queue)``, which
inserts T with that very snapshot; connection B imports it (``SET TRANSACTION SNAPSHOT``)
before A commits T. A transaction's changes and its events share its txid, so B sees of
every table exactly the changes whose events T's batches hold. Ticks must follow each other
in snapshot order: the function refuses (serialization_failure) when a tick was committed
after A's snapshot was taken, and verify then makes an ordinary tick and tries again. On a
real PgQ, which has no such function, T is made while the tables are locked in SHARE mode
(a few milliseconds; that needs UPDATE on them) and B takes its snapshot under the locks.

The drain then applies batches one tick at a time up to T, and under the drain lock the
Delta versions at T are noted; the source as of the snapshot is compared with the Delta
tables at those versions, while writers and later drains go on.

The comparison streams both sides once: row counts and an order-independent hash (the sum of
a digest of every row, in cdc.pipeline.compare's normal form). Only on a mismatch does a second pass
find the differing primary keys (a bounded list): missing in Delta, extra in Delta, changed
(with its differing columns, from one more pass over the source). A differing key with an
open quarantined event or snapshot row (cdc.targets.quarantine) is counted apart, as
quarantined: the Verdict's state is ``differs`` only when some key differs without one.

A target's exclusions and masks (cdc.targets.masking) apply to the source's rows before they
are compared: an excluded column is not compared, a masked one is compared as the target
holds it (hashed with the same salt, or NULL).

The source is read in cdc.pg.reading's settings: no code of a table's owner runs in verify's
session, and a table whose row-level security applies to verify's role is not compared (its
rows would be only those its policies let through): its Verdict is ``failed``, with the
reason and the fix, and the other tables are compared.
"""

from __future__ import annotations

import decimal
import hashlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any

import psycopg
from psycopg import sql
from pyspark.sql import SparkSession

from cdc.config import Pipeline, TableMap
from cdc.errors import CdcError, ConfigError
from cdc.pg import pgtypes, reading
from cdc.pg import source as source_module
from cdc.pg.consumer import Consumer
from cdc.pipeline import compare
from cdc.pipeline.drain import Drain
from cdc.targets import delta_table, masking

LOCK_TIMEOUT = "5s"  # waiting longer for the SHARE locks gives up: run verify again
POINT_ATTEMPTS = 5  # tries at a consistent point while other ticks come in between
LIMIT = 20  # differing keys shown per table
COLUMNS_KEPT = 1000  # Delta rows of changed keys kept for their differing columns
OK, QUARANTINED, DIFFERS, FAILED = "ok", "quarantined", "differs", "failed"  # Verdict.state


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
    differences: int = 0  # keys that differ, not explained by the quarantine
    quarantined: int = 0  # keys that differ, each with an open quarantined event
    # the first ones, real differences first: kind, key, quarantined, and for a changed
    # key the differing columns
    keys: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""  # why the table could not be compared (row-level security...)

    @property
    def ok(self) -> bool:
        """Source and Delta hold the same rows."""
        return (
            not self.error
            and self.source_rows == self.delta_rows
            and self.source_hash == self.delta_hash
        )

    @property
    def state(self) -> str:
        """ok; quarantined: every differing key has an open quarantined event (``cdc
        quarantine list`` shows them); differs: some key differs without one; failed: the
        table could not be compared (``error`` says why)."""
        if self.error:
            return FAILED
        if self.ok:
            return OK
        return DIFFERS if self.differences else QUARANTINED

    @property
    def differs(self) -> bool:
        return self.state == DIFFERS

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok, "state": self.state}


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
        masking.require_salt_of(pipeline)  # before the drain it runs writes anything
        self.pipeline = pipeline
        self.spark = spark
        self.limit = limit

    def run(self, tables: list[str] | None = None) -> list[Verdict]:
        maps = self.pipeline.mirrors(tables or [])
        with Drain(self.pipeline, self.spark) as catch_up:  # registers the consumer, ticks
            catch_up.run()
        tick_id, snapshot = self._consistent_point(maps)
        try:
            reading.prepare(snapshot)  # no code of a table's owner runs in it
            with Drain(self.pipeline, self.spark, tick=False) as to_tick:
                to_tick.run(stop_at_tick=tick_id)
            versions = self._versions_at(tick_id, maps)
            return [self._compare(snapshot, m, tick_id, versions[m.target]) for m in maps]
        finally:
            snapshot.close()

    def _consistent_point(self, maps: list[TableMap]) -> tuple[int, psycopg.Connection]:
        """Makes tick T and opens a REPEATABLE READ transaction whose snapshot sees what T
        sees (see the module): with ``tick_at_snapshot`` when the engine has it, else under
        SHARE locks of the source tables."""
        src = self.pipeline.source
        try:
            src.engine.query("tick_at_snapshot")
        except CdcError:
            return self._locked_point(maps)
        for _ in range(POINT_ATTEMPTS):
            snapshot = psycopg.connect(src.dsn)
            snapshot.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            snapshot.read_only = True
            with psycopg.connect(src.dsn) as ticker:
                ticker.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
                try:
                    exported = ticker.execute("select pg_export_snapshot()").fetchone()[0]
                    tick_id = src.engine.call(ticker, "tick_at_snapshot", queue=src.queue)
                    snapshot.execute(
                        sql.SQL("set transaction snapshot {}").format(sql.Literal(exported))
                    )
                    ticker.commit()
                    return int(tick_id), snapshot
                except psycopg.errors.SerializationFailure:
                    ticker.rollback()
                    snapshot.close()
                    ticker.autocommit = True
                    Consumer.for_source(ticker, src).tick()  # T-1 visible to the next try
                except BaseException:
                    snapshot.close()
                    raise
        raise CdcError(
            f"queue {src.queue} kept ticking while verify took its point"
            f" ({POINT_ATTEMPTS} tries): run verify again"
        )

    def _locked_point(self, maps: list[TableMap]) -> tuple[int, psycopg.Connection]:
        """T made under SHARE locks of the source tables, B's snapshot taken under them (an
        engine without ``tick_at_snapshot``: a real PgQ)."""
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
        self,
        snapshot: psycopg.Connection,
        m: TableMap,
        cols: list[pgtypes.Column],
        masks: masking.Masking,
    ) -> Iterator[tuple[Any, ...]]:
        """The source's rows as the target holds them (cols: the target's columns): a
        column masked with sha256 read as its text and hashed, one masked with null NULL."""
        by_output = reading.text_by_output(snapshot, m.schema, m.name)
        at = masks.at(cols)
        hashed = [k.name for k in at.values() if k.method == masking.SHA256]
        query = compare.source_query(m.schema, m.name, masks.decoded(cols), by_output, hashed)
        with snapshot.cursor(name=f"cdc_verify_{abs(hash(m.target))}") as cur:
            cur.itersize = 10_000
            cur.execute(query)
            for row in cur:
                if at:
                    row = tuple(masks.value(v, at[i]) if i in at else v for i, v in enumerate(row))
                yield compare.normal(row)

    def _delta_rows(
        self, m: TableMap, cols: list[pgtypes.Column], version: int
    ) -> Iterator[tuple[Any, ...]]:
        location = self.pipeline.location(m.target)
        # of a target that keeps deleted rows, the rows not marked (TargetKind.current)
        frame = compare.delta_frame(self.spark, location, cols, version, m.kind.current)
        for row in frame.toLocalIterator():
            yield compare.normal(tuple(row))

    def _compare(
        self, snapshot: psycopg.Connection, m: TableMap, tick_id: int, version: int
    ) -> Verdict:
        queue = self.pipeline.source.capture_queue
        source = pgtypes.keyed_columns(snapshot, m.schema, m.name, queue, registry_required=True)
        verdict = Verdict(m.source, m.target, tick_id, version)
        try:
            reading.check(snapshot, m.schema, m.name)
            # the source as the target holds it: excluded columns not compared, masked ones
            # masked the same way (cdc.targets.masking)
            masks = masking.resolve(m.options, source, m.source, listed=not m.rule)
        except (reading.SourceUnreadable, ConfigError) as exc:  # reported, not compared
            verdict.error = str(exc)
            return verdict
        cols = list(masks.columns)
        source_rows = partial(self._source_rows, snapshot, m, cols, masks)
        verdict.source_rows, verdict.source_hash = _summary(source_rows())
        verdict.delta_rows, verdict.delta_hash = _summary(self._delta_rows(m, cols, version))
        if verdict.ok:
            return verdict
        key_at = [i for i, c in enumerate(cols) if c.is_key]
        key_names = [cols[i].name for i in key_at]
        expected: dict[tuple[Any, ...], int] = {}
        for row in source_rows():
            expected[tuple(row[i] for i in key_at)] = digest(row)
        found: list[tuple[str, tuple[Any, ...]]] = []
        changed: dict[tuple[Any, ...], tuple[Any, ...]] = {}  # key -> Delta row (bounded)
        for row in self._delta_rows(m, cols, version):
            key = tuple(row[i] for i in key_at)
            want = expected.pop(key, None)
            if want is None:
                found.append(("extra in Delta", key))
            elif want != digest(row):
                found.append(("changed", key))
                if len(changed) < COLUMNS_KEPT:
                    changed[key] = row
        found.extend(("missing in Delta", key) for key in expected)
        held = compare.quarantined_keys(self.spark, self.pipeline, m.source, key_names, masks)
        marked = [(kind, key, compare.key_text(key) in held) for kind, key in found]
        verdict.quarantined = sum(1 for _, _, q in marked if q)
        verdict.differences = len(found) - verdict.quarantined
        shown = sorted(marked, key=lambda f: (f[2], f[0], repr(f[1])))[: self.limit]
        columns = self._differing_columns(
            source_rows, cols, key_at, {k: changed[k] for kind, k, _ in shown if k in changed}
        )
        verdict.keys = []
        for kind, key, held_key in shown:
            entry: dict[str, Any] = {
                "kind": kind,
                "key": dict(zip(key_names, map(_plain, key), strict=True)),
                "quarantined": held_key,
            }
            if key in columns:
                entry["columns"] = columns[key]
            verdict.keys.append(entry)
        return verdict

    def _differing_columns(
        self,
        source_rows: Callable[[], Iterator[tuple[Any, ...]]],
        cols: list[pgtypes.Column],
        key_at: list[int],
        delta: dict[tuple[Any, ...], tuple[Any, ...]],
    ) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
        """Per changed key shown, its differing columns with both values (one more pass over
        the source, only when there are such keys)."""
        if not delta:
            return {}
        out: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
        for row in source_rows():
            key = tuple(row[i] for i in key_at)
            theirs = delta.get(key)
            if theirs is None:
                continue
            out[key] = [
                {"column": c.name, "source": _plain(a), "delta": _plain(b)}
                for c, a, b in zip(cols, row, theirs, strict=True)
                if _canonical(a) != _canonical(b)
            ]
        return out


def _plain(value: Any) -> Any:
    if isinstance(value, int | float | str | bool) or value is None:
        return value
    return str(value)
