"""The soft fold (``fold(..., soft=True)``, cdc.engines.*.fold) on each engine (the ``engine``
fixture): besides the fold's columns, GONE (the key's action is a DELETE), GONE_AT (the
ev_time of the key's last DELETE, for a key that is not upserted) and KEEPS (a target lacking
the key gets the row: an UPSERT, or a DELETE of a key the batch inserted), against the
fold's rules in plain Python (tests/support/foldrows.py) over random events; and no events."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from cdc.pg.pgtypes import Column
from cdc.rows import ACTION, DELETE, GONE, GONE_AT, KEEPS, RESET, UPSERT, meta, value
from tests.support.engines import Engine, rows_table
from tests.support.foldrows import comparable, fold_in_python, random_rows

pytestmark = pytest.mark.spark

COLUMNS = [
    Column("id", "integer", "int", True),
    Column("v", "text", "string", False),
    Column("n", "numeric(10,2)", "decimal(10,2)", False),
]
START = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC)


def _time(txid: int) -> dt.datetime:
    """A transaction's time (its events share it, as now() in PostgreSQL)."""
    return START + dt.timedelta(seconds=txid, microseconds=txid * 7)


def _soft_fold(engine: Engine, rows: list[dict]) -> pa.Table:
    """The engine's soft fold of decoded rows that carry ev_time."""
    table = rows_table(rows, COLUMNS)
    times = [_time(r[meta("ev_txid")]) for r in rows]
    table = table.append_column(meta("ev_time"), pa.array(times, pa.timestamp("us", "UTC")))
    if engine.name == "arrow":
        from cdc.engines.arrow.fold import fold_rows

        return fold_rows(table, COLUMNS, soft=True)
    if engine.name == "spark":
        from cdc.engines.spark.fold import fold

        return fold(engine.spark.createDataFrame(table), COLUMNS, True).toArrow()
    from cdc.engines.shipped import Shipped
    from cdc.targets.table import TableRef

    return Shipped(engine.spark, TableRef("unused")).fold(table, COLUMNS, True).toArrow()


def _expected(rows: list[dict]) -> list[dict]:
    """The fold's rules in Python, and the soft columns from them."""
    out = []
    for folded in fold_in_python(rows, COLUMNS):
        key = folded[value(0)]
        deletes = [r for r in rows if r[value(0)] == key and r[meta("op")] == "D"]
        last = max(deletes, key=lambda r: r[meta("ev_id")], default=None)
        action = folded[ACTION]
        timed = action != UPSERT and last is not None
        out.append(
            {
                **folded,
                GONE: action == DELETE,
                GONE_AT: _time(last[meta("ev_txid")]) if timed else None,
                KEEPS: action == UPSERT or (action == DELETE and folded[RESET]),
            }
        )
    return out


def _utc(folded: list[dict]) -> list[dict]:
    """GONE_AT as an aware UTC time (Spark's rows give it in the session's zone, UTC)."""
    out = []
    for row in folded:
        at = row[GONE_AT]
        if at is not None and at.tzinfo is None:
            at = at.replace(tzinfo=dt.UTC)
        out.append({**row, GONE_AT: at})
    return out


@pytest.mark.parametrize("seed", range(30))
def test_random_events_fold_with_the_soft_columns(engine: Engine, seed: int):
    rows = random_rows(seed, COLUMNS)
    got = _utc(_soft_fold(engine, rows).to_pylist())
    assert comparable(got) == comparable(_expected(rows))


def test_no_events_fold_to_no_rows_with_the_soft_columns(engine: Engine):
    got = _soft_fold(engine, [])
    assert got.num_rows == 0
    assert got.column_names[-3:] == [GONE, GONE_AT, KEEPS]
