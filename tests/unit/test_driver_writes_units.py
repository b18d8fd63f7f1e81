"""The pure parts of the driver's writes (cdc.targets.driver_writes): which rows
delta-rs may take, and names quoted for its SQL."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from cdc.targets import driver_writes


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
    assert driver_writes.ident("id") == '"id"'
    assert driver_writes.ident('we"ird col') == '"we""ird col"'
    assert driver_writes.ident("Mixed.Case") == '"Mixed.Case"'


def test_a_legacy_protocol_counts_the_features_its_versions_imply(tmp_path):
    from deltalake import write_deltalake

    from cdc.targets import delta_table
    from cdc.targets.table import TableRef

    write_deltalake(str(tmp_path), pa.table({"id": pa.array([1], pa.int64())}))
    table = delta_table.LocalTable.open_local(TableRef(str(tmp_path)))
    protocol = table.table.protocol()
    assert (protocol.min_reader_version, protocol.min_writer_version) == (1, 2)
    assert driver_writes.features(table) == {"appendOnly", "invariants"}
