"""The pure parts of the driver's writes (cdc.engines.arrow.write): which rows
delta-rs may take, and names quoted for its SQL."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from cdc import rows as contract
from cdc.engines.arrow import write as driver_writes
from cdc.pg.pgtypes import Column
from cdc.rows import value
from cdc.targets import delta_table
from cdc.targets.delta import delta_rs
from cdc.targets.table import Commit, TableRef


@pytest.mark.parametrize(
    ("column", "fits"),
    [
        (pa.array([dt.date(1, 1, 1), dt.date(9999, 12, 31)]), True),
        (pa.array([-719_163], pa.int32()).cast(pa.date32()), False),  # 0000-12-31 (1 BC)
        (pa.array([2_932_897], pa.int32()).cast(pa.date32()), False),  # 10000-01-01
        (pa.array([None, None], pa.date32()), True),
        (
            pa.array([dt.datetime(9999, 12, 31, 23, 59, 59, 999_999)], pa.timestamp("us", "UTC")),
            True,
        ),
        (pa.array([253_402_300_800_000_000], pa.timestamp("us")), False),  # 10000-01-01
        (pa.array([[dt.date(2024, 1, 1)], [], None]), True),
        (pa.array([[10**18]], pa.list_(pa.timestamp("us"))), False),  # inside an array
        (pa.array(["10000-01-01"]), True),  # text is not a date
    ],
)
def test_dates_and_timestamps_outside_years_1_to_9999_take_spark(column, fits):
    assert driver_writes.fits(pa.table({"c": column, "k": pa.array(range(len(column)))})) is fits


def test_names_are_quoted_for_delta_rs_sql():
    assert delta_rs.ident("id") == '"id"'
    assert delta_rs.ident('we"ird col') == '"we""ird col"'
    assert delta_rs.ident("Mixed.Case") == '"Mixed.Case"'


def test_a_legacy_protocol_counts_the_features_its_versions_imply(tmp_path):
    from deltalake import write_deltalake

    write_deltalake(str(tmp_path), pa.table({"id": pa.array([1], pa.int64())}))
    table = delta_table.LocalTable.open_local(TableRef(str(tmp_path)))
    protocol = table.table.protocol()
    assert (protocol.min_reader_version, protocol.min_writer_version) == (1, 2)
    assert driver_writes.features(table) == {"appendOnly", "invariants"}


def _files_of_ten_rows(path: str, files: int) -> delta_table.LocalTable:
    from deltalake import write_deltalake

    for k in range(files):
        ids = pa.array(range(k * 10, k * 10 + 10), pa.int64())
        write_deltalake(path, pa.table({"id": ids, "v": pa.array(["x" * 100] * 10)}), mode="append")
    return delta_table.LocalTable.open_local(TableRef(path))


def test_a_merge_of_recent_keys_touches_only_their_files(tmp_path):
    table = _files_of_ten_rows(str(tmp_path), 5)  # ids 0-49, ten per file
    actions = pa.table(table.table.get_add_actions(flatten=True)).to_pylist()
    size = {row["min.id"]: row["size_bytes"] for row in actions}  # by the file's first id
    assert table.bytes_between("id", 42, 45) == size[40]
    assert table.bytes_between("id", 9, 10) == size[0] + size[10]
    assert table.bytes_between("id", 100, 200) == 0
    assert table.bytes_between("nosuch", 1, 2) == table.size()
    columns = [Column("id", "bigint", "long", True), Column("v", "text", "string", False)]
    rows = pa.table({value(0): pa.array([41, 47], pa.int64()), value(1): ["a", "b"]})
    assert driver_writes.bytes_touched(table, columns, rows) == size[40]
    assert driver_writes.bytes_touched(table, columns, None) == table.size()
    text_key = [Column("id", "text", "string", True)]  # statistics of texts may be cut short
    assert driver_writes.key_range(pa.table({value(0): ["a"]}), text_key) is None


def test_a_merge_with_the_key_range_rewrites_one_file(tmp_path):
    table = _files_of_ten_rows(str(tmp_path), 5)
    columns = [Column("id", "bigint", "long", True), Column("v", "text", "string", False)]
    folded = pa.table(
        {
            value(0): pa.array([43, 50], pa.int64()),
            value(1): ["new", "inserted"],
            "__has1": [True, True],
            "__action": [contract.UPSERT, contract.UPSERT],
            "__reset": [False, True],
        }
    )
    commit = Commit("q/c/t", 7)
    plan = driver_writes.batch_plan(folded, columns, [("id", "long"), ("v", "string")])
    assert plan.bounds is not None and (plan.bounds.low, plan.bounds.high) == ("43", "50")
    driver_writes.merge(table, folded, plan, commit)
    table = delta_table.LocalTable.open_local(TableRef(str(tmp_path)))
    rows = table.query("t", "select id, v from t where id in (43, 50) order by id")
    assert table.committed("q/c/t") == 7
    log = (tmp_path / "_delta_log" / f"{table.version():020d}.json").read_text()
    assert log.count('"remove"') == 1  # the one file holding key 43
    assert rows == [{"id": 43, "v": "new"}, {"id": 50, "v": "inserted"}]
