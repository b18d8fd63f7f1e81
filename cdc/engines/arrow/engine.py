"""The Arrow engine (cdc.engines.engine's interface) on the driver: rows as Arrow tables, the
fold in numpy (cdc.engines.arrow.fold), writes by delta-rs (cdc.targets.delta.delta_rs),
under the rules of cdc.engines.arrow.write.

It writes only what delta-rs writes as Spark would, and says why it does not otherwise:
``refuses`` answers before anything is decoded (a target off the local path, a protocol
feature delta-rs does not write, a column name in another case), and a fold or a write
raises ``Declined`` once the rows show it cannot (a key compared in a normalised form, the
files a MERGE may rewrite over ``MAX_BYTES``, a date or timestamp beyond years 1-9999, a
TRUNCATE's overwrite, a chunk the target holds rows of, a failure of delta-rs, which is
logged).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from cdc import rows as contract
from cdc.engines import planner
from cdc.engines.arrow import fold as arrow_fold
from cdc.engines.arrow import versions as arrow_versions
from cdc.engines.arrow import write as rules
from cdc.engines.engine import Declined, Named
from cdc.pg.pgtypes import Column, arrow_type
from cdc.rows import value
from cdc.targets import delta_table
from cdc.targets.delta import delta_rs
from cdc.targets.delta.local import LocalTable
from cdc.targets.table import Commit, TableRef

if TYPE_CHECKING:
    from datetime import datetime

    import pyarrow as pa

    from cdc.rows import Versioning
    from cdc.targets.merge_plan import Bounds, MergePlan

__all__ = ["ArrowEngine", "after", "time_of"]

log = logging.getLogger("cdc.merge")

OUT_OF_YEARS = "a date or timestamp outside years 1-9999"
UNREACHED = "delta-rs does not reach the target (a catalog name, or a log it cannot read)"


def after(rows: pa.Table, ev_id: int) -> pa.Table:
    """Decoded rows after the event ev_id (Engine.after; cdc.engines.shipped too)."""
    import pyarrow.compute as pc

    return rows.filter(pc.greater(rows.column(contract.meta("ev_id")), ev_id))


def time_of(rows: pa.Table, ev_id: int) -> int:
    """The ev_time of decoded rows' event ev_id, in microseconds since 1970 (Engine.time_of;
    cdc.engines.shipped too)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    event = rows.filter(pc.equal(rows.column(contract.meta("ev_id")), ev_id))
    times = event.column(contract.meta("ev_time")).cast(pa.timestamp("us", "UTC"))
    found = times.cast(pa.int64()).to_pylist()
    if not found or found[0] is None:
        raise ValueError(f"no event {ev_id} with a time among the decoded rows")
    return int(found[0])


class ArrowEngine:
    """The Arrow engine for one target (see the module docstring)."""

    name = planner.ARROW

    def __init__(self, ref: TableRef, local: LocalTable | None = None) -> None:
        self.ref = ref
        self._local = local

    @property
    def local(self) -> LocalTable | None:
        """The target's log read by delta-rs (LocalTable.reach: a local path or an object
        store; None for a catalog name, or without a log yet)."""
        if self._local is None:
            self._local = LocalTable.reach(self.ref)
        return self._local

    def _table(self) -> LocalTable:
        if self.local is None:
            raise Declined(UNREACHED)
        return self.local

    def refuses(self, schema: list[tuple[str, str]], columns: list[Column]) -> str | None:
        """Why delta-rs may not write the target as Spark would, known before the rows are;
        None when it may (the files a MERGE would rewrite are counted with the rows)."""
        if self.local is None:
            return UNREACHED
        if not rules.appendable(self.local, schema):
            return "delta-rs cannot write this target as Spark would"
        return None

    # -- a batch's rows
    def fold(self, rows: pa.Table, columns: list[Column], soft: bool = False) -> pa.Table:
        if any(contract.restates_key(c) for c in columns):
            raise Declined("a key compared in a normalised form (numeric text, float)")
        return arrow_fold.fold_rows(rows, columns, soft)

    def after(self, rows: pa.Table, ev_id: int) -> pa.Table:
        return after(rows, ev_id)

    def versions(
        self, rows: pa.Table, columns: list[Column], rules: Versioning, bounds: Bounds | None
    ) -> pa.Table:
        if any(contract.restates_key(c) for c in columns):
            raise Declined("a key compared in a normalised form (numeric text, float)")
        if rules.truncated_at is not None:
            raise Declined("a TRUNCATE closes every version")
        self._fitting(rows.select([contract.meta("ev_time")]))
        current = delta_rs.current_versions(self._table(), bounds)
        self._fitting(current)
        return arrow_versions.versions(rows, current, columns, rules)

    def changes(self, rows: pa.Table, columns: list[Column], at: datetime) -> pa.Table:
        import numpy as np
        import pyarrow as pa

        number = pa.array(np.arange(1, rows.num_rows + 1, dtype=np.int64))
        return pa.table(
            {
                contract.meta("op"): pa.array(["U"] * rows.num_rows, pa.string()),
                contract.meta("ev_id"): number,
                contract.meta("ev_txid"): number,
                contract.meta("ev_time"): pa.array([at] * rows.num_rows, arrow_type("timestamp")),
            }
            | {value(i): rows.column(c.name) for i, c in enumerate(columns)}
            | {contract.present(i): pa.array([True] * rows.num_rows) for i in range(len(columns))}
        )

    def upserted(self, folded: pa.Table) -> pa.Table:
        import pyarrow.compute as pc

        return folded.filter(pc.equal(folded.column(contract.ACTION), contract.UPSERT))

    def kept(self, folded: pa.Table) -> pa.Table:
        return folded.filter(folded.column(contract.KEEPS))

    def time_of(self, rows: pa.Table, ev_id: int) -> int:
        return time_of(rows, ev_id)

    def with_values(self, rows: pa.Table, values: list[tuple[str, str, Any]]) -> pa.Table:
        import pyarrow as pa

        for name, kind, one in values:
            rows = rows.append_column(name, pa.array([one] * rows.num_rows, arrow_type(kind)))
        return rows

    def named(self, rows: pa.Table, columns: list[Named]) -> pa.Table:
        import pyarrow as pa

        return pa.table(
            {name: rows.column(source).cast(arrow_type(kind)) for source, name, kind in columns}
        )

    def key_range(
        self, folded: pa.Table, columns: list[Column], decoded: tuple[str, str] | None
    ) -> tuple[Any, Any] | None:
        """The folded rows' first-key range where file statistics are exact
        (rules.key_range): the range the MERGE's file budget is counted over. Declined for
        a date beyond year 9999 (it has no Python form for the plan's bounds)."""
        first = next((i for i, c in enumerate(columns) if c.is_key), None)
        if first is not None:  # only the first key becomes bounds: the write checks the rest
            self._fitting(folded.select([contract.value(first)]))
        return rules.key_range(folded, columns)

    def merge(self, rows: pa.Table, columns: list[Column], plan: MergePlan, commit: Commit) -> None:
        table = self._table()
        if not rules.writable(table, [(n, "") for n, _ in plan.inserts], columns, True):
            raise Declined("delta-rs cannot write this target as Spark would")
        # a TRUNCATE's soft plan marks the rows of every file: every file is touched
        truncating = plan.soft is not None and plan.soft.truncated_at is not None
        if rules.bytes_touched(table, columns, None if truncating else rows) > rules.MAX_BYTES:
            raise Declined(f"the MERGE would rewrite over {rules.MAX_BYTES:,} bytes of files")
        self._fitting(rows)
        with self._declining(commit):
            rules.merge(table, rows, plan, commit)

    def append(self, rows: pa.Table, schema: list[tuple[str, str]], commit: Commit) -> None:
        table = self._table()
        if not rules.appendable(table, schema):
            raise Declined("delta-rs cannot write this target as Spark would")
        self._fitting(rows)
        with self._declining(commit):
            if rules.committed(table, commit):
                log.info("%s: tick %d already committed", commit.app_id, commit.version)
            else:
                delta_rs.append(table, rows, schema, commit)

    def overwrite(self, rows: pa.Table, schema: list[tuple[str, str]], commit: Commit) -> None:
        raise Declined("a TRUNCATE overwrites the target")

    # -- a snapshot chunk's rows
    def chunk_bounds(self, rows: pa.Table, columns: list[Column]) -> tuple[Any, Any] | None:
        import pyarrow.compute as pc

        first = next(c for c in columns if c.is_key)
        # a date beyond year 9999 has no Python form for the bounds (append_chunk checks all)
        self._fitting(rows.select([first.name]))
        found = pc.min_max(rows.column(first.name))
        return found["min"].as_py(), found["max"].as_py()

    def holds_none_between(self, bounds: Bounds) -> bool:
        return delta_rs.holds_none_between(self._table(), bounds)

    def append_chunk(
        self, rows: pa.Table, columns: list[Column], schema: list[tuple[str, str]]
    ) -> None:
        table = self._table()
        if not rules.writable(table, schema, columns, any_size=True):
            raise Declined("delta-rs cannot write this target as Spark would")
        self._fitting(rows)
        delta_rs.append(table, rows, schema)

    def merge_chunk(self, rows: pa.Table, columns: list[Column], plan: MergePlan) -> None:
        raise Declined("the target holds rows in the chunk's key range: Spark MERGEs it")

    @staticmethod
    def _fitting(rows: pa.Table) -> None:
        # delta-rs' statistics overflow on dates beyond years 1-9999
        if not rules.fits(rows):
            raise Declined(OUT_OF_YEARS)

    @staticmethod
    @contextmanager
    def _declining(commit: Commit) -> Iterator[None]:
        """A failure of delta-rs as Declined (logged), a concurrent commit as it is (for
        retry_conflicts). Either delta-rs committed nothing, or it committed the batch's
        txn, which the Spark write then finds and skips."""
        try:
            yield
        except Exception as exc:
            if delta_table.is_concurrent_conflict(exc):
                raise
            log.warning("%s: written with Spark, delta-rs failed: %s", commit.app_id, exc)
            raise Declined(f"delta-rs failed: {exc}") from exc
