"""The mirror kind: the target holds the source table's rows, by key.

A batch's events of the table are folded to one action per key (cdc.engines.spark.fold) and
MERGEd into the target (a batch decoded on the driver: folded and MERGEd there,
``apply_on_driver``), with a literal range of the first key column that prunes files. Every
MERGE here is a plan (cdc.targets.merge_plan: the batch's, a snapshot chunk's) that the
Delta adapter renders for Spark or for delta-rs; this module writes no SQL. A
batch with a TRUNCATE of the table overwrites the target with what follows the TRUNCATE, and
so does one with the marker of a table re-created under the source's name (op X,
cdc.formats.RECREATED): the events before it are the dropped table's.
Both are one commit marked with the batch's Commit. A snapshot writes the source's rows
in chunks (``upsert``: whole rows, never a delete), ``cdc resync`` overwrites them;
maintenance orders its files by the first key column (the pruning range's).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc import rows as contract
from cdc.engines import planner
from cdc.engines.arrow import fold as arrow_fold
from cdc.engines.arrow import write as driver_writes
from cdc.engines.spark import fold
from cdc.pg.pgtypes import Column
from cdc.rows import ACTION, RESET, TableBatch, add_time, has, meta, value
from cdc.targets import delta_table
from cdc.targets.delta import delta_rs
from cdc.targets.kind import TargetKind
from cdc.targets.merge_plan import MergePlan
from cdc.targets.table import Commit, TableRef, quote

if TYPE_CHECKING:
    import pyarrow as pa

    from cdc.targets.delta_table import LocalTable

__all__ = ["Mirror", "after_last_truncate"]


def after_last_truncate(rows: DataFrame, truncate_ev_id: int | None) -> DataFrame:
    """The events after the batch's last TRUNCATE of the table (all of them without one)."""
    if truncate_ev_id is None:
        return rows
    return rows.where(F.col(meta("ev_id")) > truncate_ev_id)


def _write_facts(
    kind: TargetKind, batch: TableBatch, local: LocalTable | None, schema: list[tuple[str, str]]
) -> planner.WriteFacts:
    """What the route planner is told of a part Spark decoded, before it is written: whether
    delta-rs may write the target (asked only when nothing else keeps the part in Spark:
    it sizes the files the MERGE may rewrite). Its values are known once collected."""
    facts = planner.WriteFacts(
        decoded_by=batch.route.decode,
        small=batch.small,
        kind_writes_arrow=kind.writes_on_driver,
        target_on_local_path=local is not None,
        target_writable=True,
        values_fit=True,
        truncated=batch.truncated_at is not None,
        forced=batch.forced,
    )
    if local is None or planner.write_route(batch.route, facts).write == planner.SPARK:
        return facts
    return replace(facts, target_writable=driver_writes.writable(local, schema, batch.columns))


class Mirror(TargetKind):
    """The source's rows by key (see the module docstring)."""

    zorder_by_key = True  # the column of the MERGE's pruning range
    writes_on_driver = True  # apply_on_driver: the fold and delta-rs' MERGE

    def key(self, columns: list[Column]) -> list[str]:
        return [c.name for c in columns if c.is_key]

    def apply(self, spark: SparkSession, ref: TableRef, commit: Commit, batch: TableBatch) -> None:
        """Folds the table's events and MERGEs them into the target, or, when the batch holds
        a TRUNCATE of the table, overwrites the target with what follows it. Accumulates
        seconds under "fold+merge".

        The fold is not cached here: Delta materializes a MERGE source that is not a Delta
        scan (``merge.materializeSource=auto``), so the fold runs once inside the MERGE.
        Caching it first, to time it apart, cost a second copy (1M-event backlog, warm:
        27.7-30.3 s against 22.8-23.2 s).

        A small batch (Spark decoded it: the driver could not be sure) of a local target
        that delta-rs may write is folded here, collected and MERGEd from the driver instead
        (cdc.engines.arrow.write); a local target that outgrew that path gets deletion
        vectors before its first Spark MERGE."""
        columns = batch.columns
        schema = self.ensure(spark, ref, columns)
        started = time.monotonic()
        folded = fold.fold(after_last_truncate(batch.rows, batch.truncated_at), columns)
        if batch.route is None:  # rows Spark decoded outside the drain (a replay)
            batch.route = planner.Route(planner.SPARK, planner.SPARK, "decoded by Spark")
        local = delta_table.LocalTable.open_local(ref)  # its log, read once
        facts = _write_facts(self, batch, local, schema)
        route = planner.write_route(batch.route, facts)
        if route.write == planner.ARROW:
            rows = folded.select(
                *[F.col(value(i)).cast(t).alias(value(i)) for i, (_, t) in enumerate(schema)],
                *[F.col(has(i)) for i, c in enumerate(columns) if not c.is_key],
                ACTION,
                RESET,
            )
            arrow = rows.toArrow()
            # fits first: a date past year 9999 has no Python form for the plan's bounds
            if not driver_writes.fits(arrow):
                route = planner.write_route(batch.route, replace(facts, values_fit=False))
            elif driver_writes.try_merge(
                local,
                arrow,
                driver_writes.batch_plan(arrow, columns, schema),
                replace(commit, metadata=route.metadata()),
            ):
                batch.route = route
                add_time(batch.timings, "fold+merge", started)
                return
        if route.write == planner.ARROW:  # delta-rs failed (try_merge warned): Spark writes
            route = replace(route, write=planner.SPARK, why="delta-rs failed, written by Spark")
        batch.route = route
        commit = replace(commit, metadata=route.metadata())
        if local is not None and driver_writes.outgrown(local):
            delta_table.enable_deletion_vectors(spark, ref)
        if batch.truncated_at is not None:
            kept = folded.where(F.col(ACTION) == contract.UPSERT).select(
                *[F.col(value(i)).cast(t).alias(n) for i, (n, t) in enumerate(schema)]
            )
            delta_table.overwrite(kept, ref, commit)
        else:
            plan = MergePlan.for_batch(columns, schema, batch.key_range)
            delta_table.merge(spark, ref, folded, plan, commit)
        add_time(batch.timings, "fold+merge", started)

    def apply_on_driver(
        self, ref: TableRef, commit: Commit, events: pa.Table, columns: list[Column]
    ) -> bool:
        """The events folded on the driver (cdc.engines.arrow.fold: the fold's rules, no Spark
        job) and MERGEd by delta-rs (cdc.engines.arrow.write), where that path may write
        the target; False otherwise."""
        schema = self.columns(columns)
        local = delta_table.LocalTable.open_local(ref)
        if (
            local is None
            or not driver_writes.writable(local, schema, columns, rows=events)
            or not driver_writes.fits(events)
        ):
            return False
        folded = arrow_fold.fold_rows(events, columns)
        plan = driver_writes.batch_plan(folded, columns, schema)
        return driver_writes.try_merge(local, folded, plan, commit)

    def upsert_on_driver(
        self, spark: SparkSession, ref: TableRef, rows: pa.Table, columns: list[Column]
    ) -> bool:
        """``upsert`` of rows cast on the driver (cdc.engines.arrow.decode.cast_rows),
        where it is an append: a local target that delta-rs may write and that holds no
        row in the rows' first-key range. False otherwise (``upsert`` writes them then)."""
        import pyarrow.compute as pc

        schema = self.ensure(spark, ref, columns)
        local = delta_table.LocalTable.open_local(ref)
        if local is None or not driver_writes.writable(local, schema, columns, any_size=True):
            return False
        if not driver_writes.fits(rows):
            return False
        first = next(c for c in columns if c.is_key)
        found = pc.min_max(rows.column(first.name))
        plan = MergePlan.for_snapshot_chunk(
            columns, schema, (found["min"].as_py(), found["max"].as_py())
        )
        if plan.bounds is None or not delta_rs.holds_none_between(local, plan.bounds):
            return False
        # the caller holds the table's lock: no batch writes the range meanwhile
        delta_rs.append(local, rows, schema)
        return True

    def load(
        self, spark: SparkSession, ref: TableRef, rows: DataFrame, columns: list[Column]
    ) -> None:
        self.ensure(spark, ref, columns)
        delta_table.overwrite(rows, ref)

    def upsert(
        self, spark: SparkSession, ref: TableRef, rows: DataFrame, columns: list[Column]
    ) -> None:
        """Writes snapshot rows (columns named as the source's) as whole rows, in one MERGE
        with no commit identity: a key the target holds gets every column of the row, a key
        it lacks is inserted, nothing is deleted (a chunk of a chunked snapshot,
        cdc.pipeline.snapshot). Pruned by the rows' first key range, in Spark's order; when
        the target holds no row in that range, the rows are appended instead (the same
        result, no joins). Creates the target (or adds the columns it lacks) first."""
        schema = self.ensure(spark, ref, columns)
        source = rows.select(
            *[F.col(quote(c.name)).alias(value(i)) for i, c in enumerate(columns)],
            *[
                fold.norm_numeric(F.col(quote(c.name))).alias(contract.match_key(i))
                for i, c in enumerate(columns)
                if c.is_key and contract.is_numeric_text(c)
            ],
        )
        first = next(i for i, c in enumerate(columns) if c.is_key)
        bound = F.col(value(first))
        if contract.is_numeric_text(columns[first]):
            bound = F.col(contract.match_key(first))
        low, high = source.agg(F.min(bound).cast("string"), F.max(bound).cast("string")).first()
        plan = MergePlan.for_snapshot_chunk(columns, schema, (low, high))
        if plan.bounds is not None and delta_table.holds_none_between(spark, ref, plan.bounds):
            # the target holds no row of the chunk's first-key range (an initial copy): the
            # MERGE would insert every row; an append writes the same rows without its joins.
            # The caller holds the table's lock: no batch writes the range meanwhile
            given = {c.name for c in columns}
            delta_table.append(
                rows.select(
                    *[
                        (F.col(quote(n)) if n in given else F.lit(None)).cast(t).alias(n)
                        for n, t in schema
                    ]
                ),
                ref,
            )
            return
        delta_table.merge(spark, ref, source, plan)
