"""The batch spool (cdc.pipeline.spool) and the [drain] settings: events kept in memory up to
the limit, spilled whole and in order past it, nothing left behind; budget sizes parsed or
refused with the key named."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cdc import config
from cdc.errors import ConfigError
from cdc.pg.batch import EVENT_SCHEMA
from cdc.pipeline.spool import Overflow, Spool


def _events(first: int, n: int) -> pa.RecordBatch:
    ids = list(range(first, first + n))
    columns = {name: [None] * n for name in EVENT_SCHEMA.names}
    columns.update(ev_id=ids, ev_txid=[7] * n, ev_data=[f'{{"id":{i}}}' for i in ids])
    return pa.RecordBatch.from_pydict(columns, schema=EVENT_SCHEMA)


def test_events_within_the_limit_stay_in_memory(tmp_path):
    """Below the limit nothing is written and the table holds every event."""
    spool = Spool(1 << 20, str(tmp_path))
    spool.add(_events(1, 10))
    spool.add(_events(11, 10))
    spool.close()
    assert not spool.spilled
    assert spool.table().column("ev_id").to_pylist() == list(range(1, 21))
    assert list(tmp_path.iterdir()) == []


def test_past_the_limit_every_event_goes_to_one_file_in_order(tmp_path):
    """The events held so far and the ones after the overflow are in the file, in order, and
    none stays in memory; remove drops the folder."""
    parts = [_events(1 + 100 * i, 100) for i in range(5)]
    spool = Spool(parts[0].nbytes + 1, str(tmp_path))
    for part in parts:
        spool.add(part)
    spool.close()
    assert spool.spilled and spool.held == []
    assert spool.bytes == sum(p.nbytes for p in parts)
    written = pq.read_table(spool.uri().removeprefix("file://"))
    assert written.schema == EVENT_SCHEMA
    assert written.column("ev_id").to_pylist() == list(range(1, 501))
    with pytest.raises(ValueError):
        spool.table()
    spool.remove()
    assert list(tmp_path.iterdir()) == []


def test_without_a_folder_the_overflow_is_raised():
    """No spill folder (a cluster without drain.spill_dir): the caller is told, nothing kept."""
    spool = Spool(10, None)
    with pytest.raises(Overflow):
        spool.add(_events(1, 100))


BASE = {
    "source": {"dsn": "dbname=x", "queue": "q", "consumer": "c"},
    "target": {"path": "/t"},
    "tables": [{"source": "public.a", "target": "a"}],
}


@pytest.mark.parametrize(
    ("given", "expected"),
    [("2GiB", 2 << 30), ("512MiB", 512 << 20), ("64 kib", 64 << 10), (1000, 1000), ("7B", 7)],
)
def test_memory_budget_sizes(given, expected):
    """Sizes in bytes or with a binary unit, the unit's case free."""
    pipeline = config.parse({**BASE, "drain": {"memory_budget": given}})
    assert pipeline.drain.memory_budget == expected


@pytest.mark.parametrize("given", ["2 GB", "0MiB", 0, -5, True, "lots", 1.5])
def test_bad_memory_budgets_name_the_key(given):
    """A size without a unit we know, zero, negative or not a size is refused by name."""
    with pytest.raises(ConfigError, match=r"drain\.memory_budget"):
        config.parse({**BASE, "drain": {"memory_budget": given}})


def test_drain_defaults_and_unknown_keys():
    """Without [drain]: 2 GiB and no spill folder; an unknown key is named."""
    assert config.parse(BASE).drain == config.DrainSettings(2 << 30, None)
    with pytest.raises(ConfigError, match="spill_folder"):
        config.parse({**BASE, "drain": {"spill_folder": "/x"}})
