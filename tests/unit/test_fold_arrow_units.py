"""The driver's fold (cdc.engines.arrow.fold) on the cases its rules name: a key moved away
and back in one statement, a swap, an insert then partial updates, updates only."""

from __future__ import annotations

import pyarrow as pa
import pytest

from cdc import rows
from cdc.engines.arrow import fold as fold_arrow
from cdc.pg.pgtypes import Column
from cdc.rows import meta, present, value

COLUMNS = [Column("id", "integer", "int", True), Column("v", "text", "string", False)]


def _events(*events: tuple[str, int, int, int, str | None, bool]) -> pa.Table:
    names = [meta("op"), meta("ev_id"), meta("ev_txid"), value(0), value(1), present(1)]
    return pa.table(
        dict(zip(names, map(list, zip(*events, strict=True)), strict=True)),
        pa.schema(
            [
                (meta("op"), pa.string()),
                (meta("ev_id"), pa.int64()),
                (meta("ev_txid"), pa.int64()),
                (value(0), pa.int32()),
                (value(1), pa.string()),
                (present(1), pa.bool_()),
            ]
        ),
    )


def _by_key(table: pa.Table) -> dict[int, tuple]:
    return {
        r[value(0)]: (r["__action"], r[value(1)], r["__has1"], r["__reset"])
        for r in table.to_pylist()
    }


def test_a_swap_moves_the_values():
    # update t set id = 3 - id over ids 1 and 2, captured as D1 I2 D2 I1: key 1 ends on an
    # INSERT (it exists), key 2 on a DELETE with net 0 (it exists exactly when it did before)
    got = fold_arrow.fold_rows(
        _events(
            ("D", 1, 7, 1, "a", True),
            ("I", 2, 7, 2, "a", True),
            ("D", 3, 7, 2, "b", True),
            ("I", 4, 7, 1, "b", True),
        ),
        COLUMNS,
    )
    assert _by_key(got) == {
        1: (rows.UPSERT, "b", True, True),
        2: (rows.UPDATE_IF_PRESENT, "a", True, True),
    }


def test_moved_in_and_out_in_one_statement_is_updated_if_present():
    # update t set id = id + 1 over ids 1, 2: D1 I2 D2 I3; key 2 ends with net 0, last a DELETE
    got = fold_arrow.fold_rows(
        _events(
            ("D", 1, 7, 1, "x", True),
            ("I", 2, 7, 2, "x", True),
            ("D", 3, 7, 2, "y", True),
            ("I", 4, 7, 3, "y", True),
        ),
        COLUMNS,
    )
    assert _by_key(got)[1][0] == rows.DELETE
    assert _by_key(got)[2][0] == rows.UPDATE_IF_PRESENT
    assert _by_key(got)[3] == (rows.UPSERT, "y", True, True)


def test_partial_updates_count_only_after_the_last_insert():
    got = fold_arrow.fold_rows(
        _events(
            ("U", 1, 5, 9, "before", True),
            ("I", 2, 6, 9, "inserted", True),
            ("U", 3, 6, 9, None, False),  # a sql-format UPDATE without v
        ),
        COLUMNS,
    )
    assert _by_key(got) == {9: (rows.UPSERT, "inserted", True, True)}


def test_updates_only_upsert_and_set_what_they_carry():
    got = fold_arrow.fold_rows(
        _events(("U", 1, 5, 4, None, False), ("U", 2, 6, 4, None, False)), COLUMNS
    )
    assert _by_key(got) == {4: (rows.UPSERT, None, False, False)}


def test_restated_keys_are_refused():
    numeric_key = [Column("id", "numeric", "string", True)]
    with pytest.raises(ValueError, match="normalised"):
        fold_arrow.fold_rows(pa.table({}), numeric_key)


def test_no_events_fold_to_no_rows_with_the_columns():
    got = fold_arrow.fold_rows(_events(("I", 1, 1, 1, "a", True)).slice(0, 0), COLUMNS)
    assert got.num_rows == 0
    assert got.column_names == [value(0), value(1), "__has1", "__action", "__reset"]
