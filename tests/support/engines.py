"""The two engines (cdc.engines.arrow, cdc.engines.spark) behind one interface, so that one
test runs on both, as psycopg runs its suite over its C and Python implementations: the
``engine`` fixture (tests/spark/conftest.py) gives each fold and MERGE test once per engine,
with the same inputs and the same expectations.

Rows in and out are plain dicts under the row contract's names (cdc.rows): decoded rows
(meta op, ev_id, ev_txid; value(i) and present(i) per column) in, folded rows (value(i),
has(i), ACTION, RESET, match_key(i)) out:

- ``fold``: cdc.engines.arrow.fold.fold_rows over an Arrow table of the rows, or
  cdc.engines.spark.fold.fold over a DataFrame made from that table;
- ``write``: a batch's decoded rows written to a mirror target by the mirror kind's write
  on the engine (cdc.engines.arrow.engine: the fold on the driver and delta-rs' MERGE,
  failing the test when it declines; cdc.engines.spark.engine: Spark's fold and Delta's
  MERGE). A part holding a TRUNCATE is Spark's on either engine (the Arrow decoder leaves it
  undecided and the planner hands it to Spark): ``write`` returns the engine that wrote, so
  a test says which parts it expects where;
- ``read``: the target's rows, by delta-rs for the Arrow engine, by Spark for Spark's.

``ArrowEngine()`` without a Spark session folds without a JVM (tests/unit).

The Arrow engine does not compare restated keys (cdc.rows.restates_key: numeric text,
floats; the planner gives their targets to Spark): its ``fold`` and ``write`` skip the test
for them, naming why.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from cdc import rows as contract
from cdc.engines import planner
from cdc.pg.pgtypes import Column, arrow_type
from cdc.rows import meta, present, value

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["ArrowEngine", "Engine", "Part", "ShippedEngine", "SparkEngine", "make", "rows_table"]

Row = dict[str, Any]
APP_ID = "test/engines"  # the Commit of every write
# the meta columns of decoded rows the fold and the writes read (the Arrow decoder's)
META = (("op", "string"), ("ev_id", "int64"), ("ev_txid", "int64"))


def rows_table(rows: list[Row], columns: list[Column]) -> pa.Table:
    """Decoded rows as the Arrow decoder gives them (cdc.engines.arrow.decode): meta op,
    ev_id, ev_txid, value(i) of the column's Arrow type, present(i) (True when left out)."""
    import pyarrow as pa

    fields = [pa.field(meta(name), kind) for name, kind in META]
    fields += [pa.field(value(i), arrow_type(c.spark_type)) for i, c in enumerate(columns)]
    fields += [pa.field(present(i), pa.bool_()) for i in range(len(columns))]
    defaults = {present(i): True for i in range(len(columns))}
    data = {f.name: [r.get(f.name, defaults.get(f.name)) for r in rows] for f in fields}
    return pa.table(data, pa.schema(fields))


def key_range(rows: list[Row], columns: list[Column]) -> tuple[str, str] | None:
    """The rows' lowest and highest first key value, as text (cdc.rows.Facts.key_range)."""
    first = next(i for i, c in enumerate(columns) if c.is_key)
    found = sorted(r[value(first)] for r in rows if r.get(value(first)) is not None)
    return (str(found[0]), str(found[-1])) if found else None


@dataclass(frozen=True)
class Part:
    """A table's part of a batch, to write: its decoded rows, and the ev_id of its last
    TRUNCATE (the rows after it count: the engines' ``after``)."""

    rows: list[Row]
    columns: list[Column]
    tick: int  # the Commit's version
    truncated_at: int | None = None


class Engine:
    """One engine's fold, write and read (see the module docstring)."""

    name = ""

    def __init__(self, spark: Callable[[], Any] | None = None) -> None:
        self._spark = spark  # the shared test session, started when first asked for

    @property
    def spark(self) -> Any:
        if self._spark is None:
            raise RuntimeError(f"the {self.name} engine was made without Spark (tests/unit)")
        return self._spark()

    def __repr__(self) -> str:
        return self.name

    def fold(self, rows: list[Row], columns: list[Column]) -> list[Row]:
        """The folded rows of decoded rows (one per key)."""
        return self.folded(rows, columns).to_pylist()

    def folded(self, rows: list[Row], columns: list[Column]) -> pa.Table:
        """The fold's output as an Arrow table (its column names and types)."""
        raise NotImplementedError

    def write(self, path: str, part: Part) -> str:
        """Writes the part to the mirror target at path; returns the engine that wrote it.
        Here Spark's write (the mirror's write on cdc.engines.spark.engine: Spark's fold and
        Delta's MERGE, or an overwrite after a TRUNCATE), which the Arrow engine hands what
        it does not write."""
        from cdc.engines.spark.engine import SparkEngine
        from cdc.rows import TableBatch
        from cdc.targets import registry
        from cdc.targets.table import Commit, TableRef

        rows, columns = part.rows, part.columns
        frame = self.spark.createDataFrame(rows_table(rows, columns))
        batch = TableBatch(frame, columns, part.truncated_at, key_range(rows, columns))
        kind, ref = registry.kind("mirror"), TableRef(path)
        kind.ensure(self.spark, ref, columns)  # as schema drift does before a drain writes
        kind.write(SparkEngine(self.spark, ref), Commit(APP_ID, part.tick), batch)
        return planner.SPARK

    def read(self, path: str) -> list[Row]:
        """The target's rows, by column name."""
        raise NotImplementedError


class ArrowEngine(Engine):
    """The driver's engine: Arrow's kernels, the fold in numpy, delta-rs' MERGE."""

    name = planner.ARROW

    @staticmethod
    def _skip_restated(columns: list[Column]) -> None:
        """Skips the test for a restated key, which the Arrow engine never folds or writes."""
        restated = [c.name for c in columns if contract.restates_key(c)]
        if restated:
            pytest.skip(
                f"the Arrow engine does not compare restated keys ({', '.join(restated)}:"
                " cdc.rows.restates_key); the planner gives their targets to Spark"
            )

    def folded(self, rows: list[Row], columns: list[Column]) -> pa.Table:
        from cdc.engines.arrow.fold import fold_rows

        self._skip_restated(columns)
        return fold_rows(rows_table(rows, columns), columns)

    def write(self, path: str, part: Part) -> str:
        from cdc.engines.arrow.engine import ArrowEngine
        from cdc.engines.engine import Declined
        from cdc.rows import TableBatch
        from cdc.targets import registry
        from cdc.targets.table import Commit, TableRef

        self._skip_restated(part.columns)
        if part.truncated_at is not None:
            return super().write(path, part)
        kind, ref = registry.kind("mirror"), TableRef(path)
        kind.ensure(self.spark, ref, part.columns)  # as schema drift does before a drain writes
        batch = TableBatch(rows_table(part.rows, part.columns), part.columns)
        try:
            kind.write(ArrowEngine(ref), Commit(APP_ID, part.tick), batch)
        except Declined as exc:
            pytest.fail(f"the Arrow engine declined to write tick {part.tick} to {path}: {exc}")
        return self.name

    def read(self, path: str) -> list[Row]:
        from deltalake import DeltaTable

        return DeltaTable(path).to_pyarrow_table().to_pylist()


class SparkEngine(Engine):
    """The executors' engine: Spark expressions and Delta's MERGE."""

    name = planner.SPARK

    def folded(self, rows: list[Row], columns: list[Column]) -> pa.Table:
        from cdc.engines.spark.fold import fold

        return fold(self.spark.createDataFrame(rows_table(rows, columns)), columns).toArrow()

    def read(self, path: str) -> list[Row]:
        return [r.asDict() for r in self.spark.read.format("delta").load(path).collect()]


class ShippedEngine(SparkEngine):
    """The Arrow engine's fold on the driver, shipped to Spark, which writes
    (cdc.engines.shipped: a large part on a cluster). A part holding a TRUNCATE is Spark's,
    as the Arrow decoder leaves it undecided."""

    name = planner.SHIPPED

    def folded(self, rows: list[Row], columns: list[Column]) -> pa.Table:
        from cdc.engines.shipped import Shipped
        from cdc.targets.table import TableRef

        engine = Shipped(self.spark, TableRef("unused"))
        return engine.fold(rows_table(rows, columns), columns).toArrow()

    def write(self, path: str, part: Part) -> str:
        from cdc.engines.shipped import Shipped
        from cdc.rows import TableBatch
        from cdc.targets import registry
        from cdc.targets.table import Commit, TableRef

        if part.truncated_at is not None:
            return super().write(path, part)
        kind, ref = registry.kind("mirror"), TableRef(path)
        kind.ensure(self.spark, ref, part.columns)  # as schema drift does before a drain writes
        batch = TableBatch(rows_table(part.rows, part.columns), part.columns)
        kind.write(Shipped(self.spark, ref), Commit(APP_ID, part.tick), batch)
        return self.name


def make(name: str, spark: Callable[[], Any]) -> Engine:
    """The engine of that name (cdc.engines.planner.FORCEABLE: the two engines, and the
    Arrow engine's fold written by Spark)."""
    engines = {planner.ARROW: ArrowEngine, planner.SPARK: SparkEngine}
    return {**engines, planner.SHIPPED: ShippedEngine}[name](spark)
