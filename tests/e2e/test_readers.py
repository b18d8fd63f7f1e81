"""The readers of a replica on a table each drain path wrote (the driver's delta-rs MERGE,
and Spark's): created with names Parquet stores as they are, it has no column mapping and
every reader reads its values; a source column renamed (and one added) under a name that
needs mapping turns it on in place, ``cdc status`` says so and names the safe readers, and
each reader then does what status says (cdc.targets.readers). Compared by values, not
counts."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import psycopg
import pytest

from cdc.config import Pipeline
from cdc.engines.arrow import write as driver_writes
from cdc.ops import status as status_module
from cdc.pg import capture
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Queue
from cdc.pipeline.drain import Drain
from cdc.targets import readers
from cdc.targets.delta_table import LocalTable
from cdc.targets.table import TableRef
from tests.support import drainkit
from tests.support import readers as reading
from tests.support.databases import TEMPLATE, create_database, drop_database

pytestmark = pytest.mark.spark

STATES = ("plain", "renamed")  # the table after its first drain, and after its second


@dataclass
class Drained:
    path: str  # the drain path that wrote the table: driver or spark
    pipeline: Pipeline
    locations: dict[str, str]  # state -> the table (plain: a copy made after the first drain)
    expected: dict[str, list[dict]]  # state -> the source's rows then, ordered by id
    status: status_module.Status  # after the second drain
    on_driver: list[set[str]]  # per batch, the targets written from the driver


def _source_rows(conn: psycopg.Connection) -> list[dict]:
    cur = conn.execute("select * from t order by id")
    names = [d.name for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def _change(conn: psycopg.Connection) -> None:
    """A rename and an added column that need mapping; every row written since."""
    conn.execute('alter table t rename column v to "Mixed Case"')
    conn.execute('alter table t add column "a,b" int')
    conn.execute('update t set "a,b" = id * 10, n = -n')
    conn.execute("insert into t values (3, 'z', 0.01, -1e300, null)")


@pytest.fixture(scope="module", params=["driver", "spark"])
def drained(request, admin_dsn, template_dsn, spark, tmp_path_factory) -> Iterator[Drained]:
    """Table t drained twice (created, then changed) by one path: Spark's append and MERGE
    when the driver may not write (``driver_writes.writable`` and ``appendable`` false)."""
    path = request.param
    name = f"cdc_test_{uuid.uuid4().hex[:12]}"
    dsn = create_database(admin_dsn, name, template=TEMPLATE)
    root = tmp_path_factory.mktemp(f"readers_{path}")
    pipeline = drainkit.pipeline(dsn, str(root / "delta"), [{"source": "public.t", "target": "t"}])
    locations = {"plain": str(root / "plain"), "renamed": pipeline.location("t")}
    expected: dict[str, list[dict]] = {}
    on_driver: list[set[str]] = []
    try:
        with psycopg.connect(dsn, autocommit=True) as conn, pytest.MonkeyPatch.context() as mp:
            if path == "spark":  # delta-rs neither MERGEs nor appends (a first batch is)
                mp.setattr(driver_writes, "writable", lambda *args, **kwargs: False)
                mp.setattr(driver_writes, "appendable", lambda *args, **kwargs: False)
            Queue(conn, "q").create()
            Consumer(conn, "q", "delta").register()
            conn.execute(
                'create table t (id int primary key, v text, n numeric(10,2), "MixedCase" float8)'
            )
            capture.attach(conn, "public.t", CaptureOptions(queue="q"))
            conn.execute("insert into t values (1, 'x', 2.25, 0.5), (2, null, null, null)")
            with Drain(pipeline, spark) as drain:
                drain.run(on_batch=lambda stats: on_driver.append(stats.on_driver))
                shutil.copytree(locations["renamed"], locations["plain"])
                expected["plain"] = _source_rows(conn)
                _change(conn)
                drain.run(on_batch=lambda stats: on_driver.append(stats.on_driver))
            expected["renamed"] = _source_rows(conn)
        status = status_module.collect(pipeline)
        yield Drained(path, pipeline, locations, expected, status, on_driver)
    finally:
        drop_database(admin_dsn, name)


def test_each_path_wrote_the_table_and_status_names_its_mapping(drained) -> None:
    """The path asked for wrote both batches; status marks the table mapped after the
    rename, in JSON and in its text, with its safe readers."""
    written = {"t"} if drained.path == "driver" else set()
    assert drained.on_driver == [written, written]
    assert not LocalTable.open(TableRef(drained.locations["plain"])).is_mapped()
    [table] = drained.status.tables
    assert table.column_mapping
    [line] = [x for x in status_module.render(drained.status).splitlines() if "MAPPING" in x]
    assert line.startswith("COLUMN MAPPING t: read it with Spark, delta-rs QueryBuilder;")
    assert not table.mapping_unneeded and "earlier version" not in line
    assert "values with delta-rs to_pyarrow_table" in line and "by polars read_delta" in line


@pytest.mark.parametrize("reader", readers.READERS)
@pytest.mark.parametrize("state", STATES)
def test_each_reader_reads_what_status_says(drained, spark, state: str, reader: str) -> None:
    """Every reader reads the plain table's values; after the rename, the readers status
    calls safe read its values, delta-rs' pyarrow reads give NULL in its mapped columns
    (documented), polars refuses it."""
    location = drained.locations[state]
    if state == "plain":
        verdict = readers.verdicts(LocalTable.open(TableRef(location)))[reader]
        assert verdict == readers.SAFE
    else:
        verdict = drained.status.tables[0].readers[reader]
        assert (verdict == readers.SAFE) == (reader in ("Spark", "delta-rs QueryBuilder"))
    reading.reads_as_told(reader, verdict, spark, location, drained.expected[state])
