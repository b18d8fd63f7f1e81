"""The driver's fold (cdc.engines.arrow.fold) against Spark's (cdc.engines.spark.fold) on random
event sets: inserts, updates (whole and partial rows), deletes, key moves within and across
transactions; the same rows, the same actions."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from cdc.engines.arrow import fold as fold_arrow
from cdc.engines.spark import fold
from cdc.pg.pgtypes import Column
from cdc.rows import meta, present, value

pytestmark = pytest.mark.spark

COLUMNS = [
    Column("id", "integer", "int", True),
    Column("v", "text", "string", False),
    Column("n", "numeric(10,2)", "decimal(10,2)", False),
]


def _events(seed: int, columns: list[Column] = COLUMNS) -> pa.Table:
    rnd = random.Random(seed)
    rows = []
    ev_id = 0
    for txid in range(1, rnd.randint(2, 12)):
        for _ in range(rnd.randint(1, 6)):
            ev_id += rnd.randint(1, 3)
            op = rnd.choice("IUUDI")
            key = rnd.randint(1, 5)
            extra = {value(3): rnd.choice("ab"), present(3): True} if len(columns) > 3 else {}
            partial = op == "U" and rnd.random() < 0.5
            rows.append(
                {
                    meta("op"): op,
                    meta("ev_id"): ev_id,
                    meta("ev_txid"): txid,
                    value(0): key,
                    present(0): True,
                    value(1): None if rnd.random() < 0.2 else f"v{ev_id}",
                    present(1): not partial or rnd.random() < 0.5,
                    value(2): None if rnd.random() < 0.2 else ev_id / 4,
                    present(2): not partial or rnd.random() < 0.5,
                    **extra,
                }
            )
    rnd.shuffle(rows)
    import decimal

    for r in rows:
        if r[value(2)] is not None:
            r[value(2)] = decimal.Decimal(str(r[value(2)])).quantize(decimal.Decimal("0.01"))
    schema = pa.schema(
        [
            (meta("op"), pa.string()),
            (meta("ev_id"), pa.int64()),
            (meta("ev_txid"), pa.int64()),
            (value(0), pa.int32()),
            (present(0), pa.bool_()),
            (value(1), pa.string()),
            (present(1), pa.bool_()),
            (value(2), pa.decimal128(10, 2)),
            (present(2), pa.bool_()),
        ]
        + ([(value(3), pa.string()), (present(3), pa.bool_())] if len(columns) > 3 else [])
    )
    return pa.Table.from_pylist(rows, schema)


def _sorted(table: pa.Table) -> list[dict]:
    return sorted(table.to_pylist(), key=lambda r: (r[value(0)], r.get(value(3)) or ""))


@pytest.mark.parametrize("seed", range(60))
def test_the_driver_fold_is_spark_fold(spark, seed):
    events = _events(seed)
    expected = fold.fold(spark.createDataFrame(events), COLUMNS).toArrow()
    got = fold_arrow.fold_rows(events, COLUMNS)
    assert got.column_names == expected.column_names
    assert _sorted(got) == _sorted(expected.cast(got.schema))


# a key of two columns, the second after the values
COMPOSITE = [*COLUMNS, Column("k", "text", "string", True)]


@pytest.mark.parametrize("seed", range(20))
def test_the_driver_fold_is_spark_fold_on_a_composite_key(spark, seed):
    events = _events(seed, COMPOSITE)
    expected = fold.fold(spark.createDataFrame(events), COMPOSITE).toArrow()
    got = fold_arrow.fold_rows(events, COMPOSITE)
    assert got.column_names == expected.column_names
    assert _sorted(got) == _sorted(expected.cast(got.schema))
