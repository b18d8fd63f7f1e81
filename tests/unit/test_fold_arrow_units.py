"""The driver's fold (cdc.engines.arrow.fold) without a JVM, and the rules in plain Python
that judge both engines' folds (tests/support/foldrows.py), on the named case per rule (a
key moved away and back in one statement, a swap, an insert then partial updates, updates
only) and on random event sets. tests/spark/test_fold_arrow.py runs the same on both
engines."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pytest

from cdc.engines.arrow import fold as fold_arrow
from cdc.pg.pgtypes import Column
from cdc.rows import has, value
from tests.support.engines import ArrowEngine, rows_table
from tests.support.foldrows import (
    CASES,
    COLUMNS,
    FoldCase,
    by_key,
    comparable,
    fold_in_python,
    random_rows,
)

ARROW = ArrowEngine()  # without Spark: the Arrow fold only
FOLDS: dict[str, Callable] = {"arrow": ARROW.fold, "rules": fold_in_python}
RANDOM = [
    Column("id", "integer", "int", True),
    Column("v", "text", "string", False),
    Column("n", "numeric(10,2)", "decimal(10,2)", False),
]


@pytest.mark.parametrize("fold", FOLDS.values(), ids=FOLDS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_each_rule_by_its_case(fold: Callable, case: FoldCase):
    assert by_key(fold(case.rows(), COLUMNS)) == case.expected


@pytest.mark.parametrize("key", [[], [Column("k", "text", "string", True)]], ids=["one", "two"])
def test_random_events_on_the_driver_fold_by_the_rules(key: list[Column]):
    columns = RANDOM + key
    for seed in range(100):
        rows = random_rows(seed, columns)
        assert comparable(ARROW.fold(rows, columns)) == comparable(fold_in_python(rows, columns))


def test_restated_keys_are_refused():
    numeric_key = [Column("id", "numeric", "string", True)]
    with pytest.raises(ValueError, match="normalised"):
        fold_arrow.fold_rows(pa.table({}), numeric_key)


def test_no_events_fold_to_no_rows_with_the_columns():
    got = fold_arrow.fold_rows(rows_table([], COLUMNS), COLUMNS)
    assert got.num_rows == 0
    assert got.column_names == [value(0), value(1), has(1), "__action", "__reset"]
