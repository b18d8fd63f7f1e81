"""Which readers of a replica read which Delta tables right: a reader either reads a table
feature, refuses a table that has it (an error: loud), or reads it WRONG without an error.

The one silent case: delta-rs' pyarrow reads (``DeltaTable.to_pyarrow_table``,
``to_pyarrow_dataset``, ``to_pandas``) of a table with column mapping read NULL in place of
the values of every column stored under a physical name other than its own (all of them on
a table created with mapping; those added after mapping was turned on, on a table upgraded
in place), with the right row count. Targets are created without mapping unless a column's
name needs it (cdc.targets.delta_table.needs_mapping), and ``cdc status`` names the readers
that are safe for each table.

Measured with delta-rs 1.6, polars 2.1 and Spark with Delta 4.4 on tables of the three
features the drain gives a table (tests/spark/test_readers.py, tests/e2e/test_readers.py);
DuckDB's delta extension is not part of the tests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # importable without Spark (cdc sql's datafusion engine asks READERS)
    from cdc.targets.delta_table import LocalTable

__all__ = [
    "READERS",
    "REFUSES",
    "SAFE",
    "VERDICTS",
    "WRONG",
    "safe",
    "verdicts",
]

SAFE, REFUSES, WRONG = "safe", "refuses", "wrong"
VERDICTS = (SAFE, WRONG, REFUSES)  # in the order a refusal overrides the others
MAPPING, DELETION_VECTORS, TYPE_WIDENING = "columnMapping", "deletionVectors", "typeWidening"
MAPPED = "mapped names"  # not a feature: column mapping with a mode that maps names
PYARROW = {MAPPED: WRONG, DELETION_VECTORS: REFUSES, TYPE_WIDENING: REFUSES}

# reader -> what it does with a table that has a feature (absent: reads it right)
READERS: dict[str, dict[str, str]] = {
    "Spark": {},
    "delta-rs QueryBuilder": {TYPE_WIDENING: REFUSES},
    "delta-rs to_pyarrow_table": PYARROW,
    "delta-rs to_pyarrow_dataset": PYARROW,
    "delta-rs to_pandas": PYARROW,
    "polars read_delta": {MAPPING: REFUSES, TYPE_WIDENING: REFUSES},
}


def _met(table: LocalTable) -> set[str]:
    """What a reader meets in the table: its protocol's features, and MAPPED when its mode
    maps names (a table may keep the feature with mode ``none``: its files then hold the
    names as they are, though polars still refuses it by its protocol)."""
    return table.features() | ({MAPPED} if table.is_mapped() else set())


def verdicts(table: LocalTable) -> dict[str, str]:
    """reader -> SAFE, REFUSES or WRONG for this table: a reader that refuses one of its
    features refuses the table (it checks them before reading), else one it reads wrong
    makes it WRONG."""
    features = _met(table)
    rank = {v: i for i, v in enumerate(VERDICTS)}
    return {
        reader: max((found.get(f, SAFE) for f in features), key=rank.__getitem__, default=SAFE)
        for reader, found in READERS.items()
    }


def safe(found: dict[str, str]) -> list[str]:
    """The readers of verdicts that read the table right."""
    return [reader for reader, verdict in found.items() if verdict == SAFE]
