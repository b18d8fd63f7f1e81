"""The masks of cdc.targets.masking over Arrow rows, on the driver: a sha256 mask hashes each
value's text in Python (hashlib: Arrow has no SHA-256 kernel), from the same text Spark's
rendering makes (cdc.engines.spark.masking); a null mask gives nulls of the column's type.

Used where the Arrow engine's rows get their target columns: the decode of a batch's events
(cdc.engines.arrow.decode, ``decoded``) and a snapshot chunk cast on the driver (``named``).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from cdc.pg.pgtypes import Column, arrow_type
from cdc.rows import value
from cdc.targets.masking import NULL, Masked, Masking, date_text

__all__ = ["decoded", "masked_array", "named", "texts"]

INTEGERS = ("short", "int", "long")
FIRST_DAY, LAST_DAY = -719162, 2932896  # 0001-01-01 and 9999-12-31, days since 1970-01-01


def texts(values: pa.Array | pa.ChunkedArray, masked: Masked) -> list[str | None]:
    """Each value's text as PostgreSQL outputs it (cdc.targets.masking.HASHABLE's types):
    Arrow's cast where it writes the same (integers; dates of years 1-9999), else
    cdc.targets.masking.date_text."""
    if masked.source_type == "date":
        days = values.cast(pa.int32())
        inside = pc.and_(pc.greater_equal(days, FIRST_DAY), pc.less_equal(days, LAST_DAY))
        if pc.all(inside, skip_nulls=True).as_py() is not False:
            return _pylist(pc.cast(values, pa.string()))
        return [None if d is None else date_text(d) for d in days.to_pylist()]
    if masked.source_type in INTEGERS:
        return _pylist(pc.cast(values, pa.string()))
    return _pylist(values)


def _pylist(strings: pa.Array | pa.ChunkedArray) -> list[str | None]:
    """Arrow strings as Python's (through numpy: ten times to_pylist's speed)."""
    return strings.to_numpy(zero_copy_only=False).tolist()


def masked_array(values: pa.Array | pa.ChunkedArray, masked: Masked, masking: Masking) -> pa.Array:
    """A column's values as the target holds them."""
    if masked.method == NULL:
        return pa.nulls(len(values), arrow_type(masked.source_type))
    digest = masking.hasher(masked)
    return pa.array([digest(t) for t in texts(values, masked)], pa.string())


def decoded(rows: pa.Table, masking: Masking, columns: list[Column]) -> pa.Table:
    """Decoded rows (``value(i)`` per column, cdc.rows) with their masked columns masked."""
    for i, masked in masking.at(columns).items():
        name = value(i)
        at = rows.schema.get_field_index(name)
        rows = rows.set_column(at, name, masked_array(rows.column(name), masked, masking))
    return rows


def named(rows: pa.Table, masking: Masking) -> pa.Table:
    """Rows named as the source's columns, as the target's columns: the excluded ones left
    out, the masked ones masked."""
    out = {}
    for c in masking.columns:
        masked = masking.of(c.name)
        column = rows.column(c.name)
        out[c.name] = column if masked is None else masked_array(column, masked, masking)
    return pa.table(out)
