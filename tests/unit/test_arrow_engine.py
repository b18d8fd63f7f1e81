"""The Arrow engine's operations (cdc.engines.arrow.engine) on a table delta-rs wrote,
without a JVM: what it writes, and the parts it declines (committing nothing) so that Spark
writes them, each with its reason."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from cdc.engines.arrow.engine import ArrowEngine
from cdc.engines.engine import Declined
from cdc.pg.pgtypes import Column, arrow_type
from cdc.rows import TableBatch, meta, present, value
from cdc.targets import registry
from cdc.targets.table import Commit, TableRef

ID = Column("id", "bigint", "long", True)
DAY = Column("day", "date", "date", False)
COLUMNS = [ID, DAY]
SCHEMA = [("id", "long"), ("day", "date")]


def _target(path: str) -> TableRef:
    from deltalake import write_deltalake

    rows = pa.table({"id": pa.array([1], pa.int64()), "day": pa.array([dt.date(2024, 1, 1)])})
    write_deltalake(path, rows)
    return TableRef(path)


def _events(ids: list[int], days: list[object]) -> pa.Table:
    n = len(ids)
    return pa.table(
        {
            meta("op"): pa.array(["I"] * n),
            meta("ev_id"): pa.array(range(1, n + 1), pa.int64()),
            meta("ev_txid"): pa.array([7] * n, pa.int64()),
            value(0): pa.array(ids, pa.int64()),
            value(1): pa.array(days, pa.date32()),
            present(0): pa.array([True] * n),
            present(1): pa.array([True] * n),
        }
    )


def _version(path: str) -> int:
    from deltalake import DeltaTable

    return DeltaTable(path).version()


def test_the_mirror_kind_written_on_the_arrow_engine_merges_once(tmp_path):
    """A batch MERGEd by the kind's write on the Arrow engine; the same Commit again writes
    nothing (a rerun after a crash)."""
    from deltalake import DeltaTable

    ref = _target(str(tmp_path))
    batch = TableBatch(_events([1, 2], [dt.date(2024, 2, 2), dt.date(2024, 3, 3)]), COLUMNS)
    mirror = registry.kind("mirror")
    mirror.write(ArrowEngine(ref), Commit("test/arrow", 5), batch)
    after = _version(str(tmp_path))
    mirror.write(ArrowEngine(ref), Commit("test/arrow", 5), batch)
    assert _version(str(tmp_path)) == after
    rows = sorted(DeltaTable(str(tmp_path)).to_pyarrow_table().to_pylist(), key=str)
    assert rows == [
        {"id": 1, "day": dt.date(2024, 2, 2)},
        {"id": 2, "day": dt.date(2024, 3, 3)},
    ]


@pytest.mark.parametrize(
    ("batch", "reason"),
    [
        # a date of year 10000: delta-rs' statistics overflow on it
        (TableBatch(_events([3], [2_932_897]), COLUMNS), "years 1-9999"),
        # a TRUNCATE overwrites the target: Spark's
        (TableBatch(_events([3], [None]), COLUMNS, truncated_at=1), "TRUNCATE"),
        # a numeric key kept as text compares in a normalised form: Spark's
        (
            TableBatch(
                _events([3], [None]).set_column(3, value(0), pa.array(["3.0"])),
                [Column("id", "numeric", "string", True), DAY],
            ),
            "normalised form",
        ),
    ],
)
def test_the_arrow_engine_declines_what_it_does_not_write_as_spark(tmp_path, batch, reason):
    ref = _target(str(tmp_path))
    before = _version(str(tmp_path))
    with pytest.raises(Declined, match=reason):
        registry.kind("mirror").write(ArrowEngine(ref), Commit("test/arrow", 5), batch)
    assert _version(str(tmp_path)) == before  # nothing committed


def test_a_target_delta_rs_does_not_reach_is_refused_before_decoding(tmp_path):
    assert "does not reach" in ArrowEngine(TableRef("db.t")).refuses(SCHEMA, COLUMNS)
    assert "does not reach" in ArrowEngine(TableRef(str(tmp_path))).refuses(SCHEMA, COLUMNS)


def test_a_column_named_in_another_case_is_refused(tmp_path):
    engine = ArrowEngine(_target(str(tmp_path)))
    assert engine.refuses(SCHEMA, COLUMNS) is None
    assert "cannot write" in engine.refuses([("ID", "long"), ("day", "date")], COLUMNS)


def test_a_history_target_gets_one_row_per_event_on_the_arrow_engine(tmp_path):
    """The history kind's write on the Arrow engine: its meta columns and the values,
    appended once per Commit."""
    from deltalake import DeltaTable, write_deltalake

    kind = registry.kind("history")
    schema = kind.columns(COLUMNS)
    empty = pa.schema([pa.field(n, arrow_type(t)) for n, t in schema]).empty_table()
    write_deltalake(str(tmp_path), empty)
    events = _events([1, 1], [dt.date(2024, 1, 1), None])
    events = events.append_column(meta("ev_time"), pa.array([0, 1], pa.timestamp("us", "UTC")))
    events = events.append_column(meta("tick_id"), pa.array([9, 9], pa.int64()))
    for _ in range(2):
        kind.write(
            ArrowEngine(TableRef(str(tmp_path))), Commit("test/h", 9), TableBatch(events, COLUMNS)
        )
    rows = DeltaTable(str(tmp_path)).to_pyarrow_table().to_pylist()
    assert [(r["op"], r["ev_id"], r["tick_id"], r["id"], r["day"]) for r in rows] == [
        ("I", 1, 9, 1, dt.date(2024, 1, 1)),
        ("I", 2, 9, 1, None),
    ]
