"""The quarantine is not a dead end: a numeric NaN (which a Spark decimal cannot hold) is
quarantined and verify reports its key apart from real differences; ``cdc quarantine
replay`` applies a table's events once the cause is fixed, exactly once (run twice, and
killed midway then run again), never over a later change of the same key; ``discard``
takes rows out of the counts; ``list`` shows them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cdc import cli
from cdc.cli import exitcodes
from cdc.pg import capture, pgtypes
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Queue
from cdc.pipeline import compare, verify
from cdc.pipeline.drain import Drain
from cdc.targets import quarantine
from cdc.targets.table import TableRef
from tests.support import drainkit

pytestmark = pytest.mark.spark

CAST = "value does not cast to the column type: amount"


def _config(path: Path, dsn: str, tables: list[dict[str, str]]) -> Path:
    conf = path / "pipeline.toml"
    entries = "".join(
        "[[tables]]\n" + "".join(f'{k} = "{v}"\n' for k, v in t.items()) for t in tables
    )
    conf.write_text(
        f'[source]\ndsn = "{dsn}"\nqueue = "q"\nconsumer = "delta"\n'
        f'[target]\npath = "{path}"\n{entries}'
    )
    return conf


def _drain(dsn: str, root: Path, tables: list[dict[str, str]], spark) -> None:
    with Drain(drainkit.pipeline(dsn, str(root), tables), spark) as drain:
        drain.run()


def _open(root: Path) -> dict[str | None, int]:
    return quarantine.open_counts(
        TableRef(str(root / "_quarantine")), TableRef(str(root / "_quarantine_resolved"))
    )


def _rows(conn, spark, root: Path, table: str, target: str) -> tuple[list, list]:
    cols = pgtypes.columns(conn, "public", table)
    return (
        compare.source_rows(conn, "public", table),
        compare.delta_rows(spark, str(root / target), cols),
    )


@pytest.fixture
def priced(conn, dsn, spark, tmp_path):
    """Table p (numeric(10,2) amount) captured in json, 5 rows drained; then row 2 gets a
    NaN amount, which the drain quarantines."""
    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()
    conn.execute("create table p (id int primary key, amount numeric(10,2), note text)")
    capture.attach(conn, "public.p", CaptureOptions(queue="q", format="json"))
    conn.execute("insert into p select g, g, 'n' || g from generate_series(1, 5) g")
    tables = [{"source": "public.p", "target": "p"}]
    _drain(dsn, tmp_path, tables, spark)
    conn.execute("update p set amount = 'NaN' where id = 2")
    _drain(dsn, tmp_path, tables, spark)
    return tables, _config(tmp_path, dsn, tables)


def test_nan_is_quarantined_and_verify_reports_it_apart(priced, conn, dsn, spark, tmp_path, capsys):
    """The NaN update is quarantined; verify says the table is ok but for that quarantined
    key (exit OK), naming the differing column; a real difference still exits DIFFERS."""
    tables, conf = priced
    assert _open(tmp_path) == {"public.p": 1}
    code = cli.main(["verify", "--config", str(conf), "--json"])
    assert code == exitcodes.OK
    [v] = json.loads(capsys.readouterr().out)
    assert (v["state"], v["differences"], v["quarantined"]) == ("quarantined", 0, 1)
    [key] = v["keys"]
    assert key["kind"] == "changed" and key["key"] == {"id": 2} and key["quarantined"]
    assert [c["column"] for c in key["columns"]] == ["amount"]
    assert key["columns"][0]["delta"] == "2.00"
    # a real difference beside it
    spark.sql(f"update delta.`{tmp_path / 'p'}` set note = 'corrupt' where id = 4")
    [verdict] = verify.Verifier(drainkit.pipeline(dsn, str(tmp_path), tables), spark).run()
    assert verdict.state == verify.DIFFERS and verdict.differences == 1
    assert verdict.quarantined == 1
    assert verdict.keys[0]["key"] == {"id": 4} and not verdict.keys[0]["quarantined"]
    assert verdict.keys[0]["columns"] == [{"column": "note", "source": "n4", "delta": "corrupt"}]
    assert cli.main(["verify", "--config", str(conf)]) == exitcodes.DIFFERS
    out = capsys.readouterr().out
    assert "DIFFERS" in out and "note: source 'n4', Delta 'corrupt'" in out
