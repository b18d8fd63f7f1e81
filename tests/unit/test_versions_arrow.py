"""The driver's versions (cdc.engines.arrow.versions, SCD type 2) without a JVM: one version
per transaction, in place for untracked columns, deletes closing a version or opening a
tombstone, the target's current version as the first step, list columns carried as they
are. tests/e2e/test_scd2.py runs the same rules on both engines against real tables."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa

from cdc.engines.arrow import versions as arrow_versions
from cdc.pg.pgtypes import Column, arrow_type
from cdc.rows import CURRENT, DELETED, END, START, Versioning, merge_key, meta, value
from tests.support.engines import rows_table

COLUMNS = [
    Column("id", "integer", "int", True),
    Column("status", "text", "string", False),
    Column("tags", "text[]", "array<string>", False),
    Column("seen", "integer", "int", False),
]
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def event(ev_id: int, txid: int, op: str, key: int, status=None, tags=None, seen=0) -> dict:
    return {
        meta("op"): op,
        meta("ev_id"): ev_id,
        meta("ev_txid"): txid,
        meta("ev_time"): at(txid),
        value(0): key,
        value(1): status,
        value(2): tags,
        value(3): seen,
    }


def decoded(events: list[dict]) -> pa.Table:
    table = rows_table(events, COLUMNS)
    if meta("ev_time") not in table.column_names:
        times = pa.array([e[meta("ev_time")] for e in events], arrow_type("timestamp"))
        table = table.append_column(meta("ev_time"), times)
    return table


def current(rows: list[tuple]) -> pa.Table:
    """The target's current versions: (id, status, tags, seen, start minute[, deleted])."""
    data = {
        "id": pa.array([r[0] for r in rows], pa.int32()),
        "status": pa.array([r[1] for r in rows], pa.string()),
        "tags": pa.array([r[2] for r in rows], pa.list_(pa.string())),
        "seen": pa.array([r[3] for r in rows], pa.int32()),
        START: pa.array([at(r[4]) for r in rows], arrow_type("timestamp")),
        END: pa.array([None] * len(rows), arrow_type("timestamp")),
        CURRENT: pa.array([True] * len(rows)),
        DELETED: pa.array([r[5] if len(r) > 5 else False for r in rows]),
    }
    return pa.table(data)


def versions(out: pa.Table) -> list[tuple]:
    """(id, status, tags, seen, start minute, end minute, current, deleted, updates target)"""

    def minute(t):
        return None if t is None else int((t - T0).total_seconds() // 60)

    rows = out.to_pylist()
    found = [
        (
            r[value(0)],
            r[value(1)],
            r[value(2)],
            r[value(3)],
            minute(r[START]),
            minute(r[END]),
            r[CURRENT],
            r[DELETED],
            r[merge_key(0)] is not None,
        )
        for r in rows
    ]
    return sorted(found, key=lambda v: (v[0], v[4]))


TRACK_ALL_BUT_SEEN = Versioning(tracked=(1, 2))


def test_each_transaction_is_a_version_and_untracked_changes_are_in_place():
    rows = decoded(
        [
            event(1, 1, "I", 1, "new", ["a"]),
            event(2, 2, "U", 1, "paid", ["a"]),
            event(3, 3, "U", 1, "paid", ["a"], seen=5),  # untracked: in place
            event(4, 4, "U", 1, "sent", ["a", "b"]),
            event(5, 4, "U", 1, "sent2", ["a", "b"]),  # same transaction: its end state
            event(6, 5, "I", 2, "x", None),
            event(7, 6, "D", 2, "x", None),
        ]
    )
    out = arrow_versions.versions(rows, current([]), COLUMNS, TRACK_ALL_BUT_SEEN)
    assert versions(out) == [
        (1, "new", ["a"], 0, 1, 2, False, False, False),
        (1, "paid", ["a"], 5, 2, 4, False, False, False),
        (1, "sent2", ["a", "b"], 0, 4, None, True, False, False),
        (2, "x", None, 0, 5, 6, False, False, False),
    ]


def test_the_target_current_version_is_updated_or_closed():
    rows = decoded(
        [
            event(10, 20, "U", 1, "old", ["t"], seen=9),  # untracked only: in place
            event(11, 21, "U", 2, "changed", ["t"]),  # tracked: closes the current version
            event(12, 22, "D", 3, "gone", None),
        ]
    )
    held = current(
        [
            (1, "old", ["t"], 0, 3),
            (2, "same", ["t"], 0, 4),
            (3, "gone", None, 0, 5),
            (4, "other", None, 0, 6),
        ]
    )
    out = arrow_versions.versions(rows, held, COLUMNS, TRACK_ALL_BUT_SEEN)
    assert versions(out) == [
        (1, "old", ["t"], 9, 3, None, True, False, True),
        (2, "same", ["t"], 0, 4, 21, False, False, True),
        (2, "changed", ["t"], 0, 21, None, True, False, False),
        (3, "gone", None, 0, 5, 22, False, False, True),
    ]


def test_tombstones_mark_a_delete_until_the_key_returns():
    rows = decoded(
        [
            event(1, 1, "D", 1, "a", None),
            event(2, 2, "I", 2, "b", None),
            event(3, 3, "D", 2, "b", None),
            event(4, 4, "I", 2, "b2", ["z"]),
        ]
    )
    held = current([(1, "a", None, 0, 0)])
    out = arrow_versions.versions(rows, held, COLUMNS, Versioning((1, 2), tombstones=True))
    assert versions(out) == [
        (1, "a", None, 0, 0, 1, False, False, True),
        (1, None, None, None, 1, None, True, True, False),
        (2, "b", None, 0, 2, 3, False, False, False),
        (2, None, None, None, 3, 4, False, True, False),
        (2, "b2", ["z"], 0, 4, None, True, False, False),
    ]
