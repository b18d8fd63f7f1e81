"""cdc verify: source and Delta compared at one consistent point, with writers running; a
corrupted Delta table is caught, with its differing keys (the changed columns named) and exit
code DIFFERS."""

from __future__ import annotations

import json

import psycopg
import pytest

from cdc import cli
from cdc.cli import exitcodes
from cdc.pg import capture
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Queue
from cdc.pipeline import verify
from cdc.pipeline.drain import Drain
from tests.support import drainkit
from tests.support.workloads import DDL, ROW, Writers

pytestmark = pytest.mark.spark

CONF = [{"source": "public.s", "target": "s"}]


@pytest.fixture
def replicated(dsn, spark, tmp_path):
    """Table s captured (json) from its first row, changed, and drained once."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        Queue(conn, "q").create()
        Consumer(conn, "q", "delta").register()
        conn.execute(DDL)
        capture.attach(conn, "public.s", CaptureOptions(queue="q", format="json"))
        conn.execute(f"insert into s select {ROW} from generate_series(1, 2000) g")
        conn.execute("update s set t = 'updated' where id % 10 = 0")
        conn.execute("delete from s where id % 10 = 1")
    pipe = drainkit.pipeline(dsn, str(tmp_path), CONF)
    with Drain(pipe, spark) as drain:
        drain.run()
    config_file = tmp_path / "pipeline.toml"
    config_file.write_text(
        f"[source]\ndsn = '{dsn}'\nqueue = 'q'\nconsumer = 'delta'\n"
        f"[target]\npath = '{tmp_path}'\n[[tables]]\nsource = 'public.s'\ntarget = 's'\n"
    )
    return pipe, config_file


def test_verify_agrees_while_writers_keep_writing(replicated, dsn, spark):
    pipe, _ = replicated
    with Writers(dsn, 3) as writers:
        verdicts = verify.Verifier(pipe, spark).run()
    assert writers.done > 0
    [v] = verdicts
    assert v.ok, v
    assert v.source_rows == v.delta_rows > 1000
    assert v.source_hash == v.delta_hash and v.differences == 0


def test_verify_finds_a_corrupted_table(replicated, spark, tmp_path, capsys):
    pipe, config_file = replicated
    target = f"delta.`{tmp_path / 's'}`"
    spark.sql(f"update {target} set t = 'corrupt' where id = 20")
    spark.sql(f"delete from {target} where id = 30")
    spark.sql(f"insert into {target} (id, t) values (999999, 'stray')")
    code = cli.main(["verify", "public.s", "--config", str(config_file), "--json"])
    assert code == exitcodes.DIFFERS
    [v] = json.loads(capsys.readouterr().out)
    assert not v["ok"]
    assert v["differences"] == 3
    assert v["source_rows"] == v["delta_rows"]  # one missing, one extra: counts alone agree
    assert v["state"] == "differs" and v["quarantined"] == 0
    changed = next(k for k in v["keys"] if k["kind"] == "changed")
    assert changed["columns"] == [{"column": "t", "source": changed["columns"][0]["source"],
                                   "delta": "corrupt"}]  # fmt: skip
    assert {(k["kind"], k["key"]["id"]) for k in v["keys"]} == {
        ("changed", 20),
        ("missing in Delta", 30),
        ("extra in Delta", 999999),
    }
    # repaired by hand, it agrees again
    spark.sql(f"delete from {target} where id = 999999")
    with psycopg.connect(pipe.source.dsn, autocommit=True) as conn:
        conn.execute("update s set t = t where id in (20, 30)")  # re-sends both rows
    assert cli.main(["verify", "--config", str(config_file)]) == 0
    assert "ok at tick" in capsys.readouterr().out
