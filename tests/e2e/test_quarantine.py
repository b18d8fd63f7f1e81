"""The quarantine is not a dead end: a numeric NaN (which a Spark decimal cannot hold) is
quarantined and verify reports its key apart from real differences; ``cdc quarantine
replay`` applies a table's events once the cause is fixed, exactly once (run twice, and
killed midway then run again), never over a later change of the same key; ``discard``
takes rows out of the counts; ``list`` shows them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from cdc import cli
from cdc.cli import exitcodes
from cdc.errors import CdcError
from cdc.pg import capture, pgtypes
from cdc.pg.capture import CaptureOptions
from cdc.pg.queue import Consumer, Queue
from cdc.pipeline import compare, replay, verify
from cdc.pipeline.drain import Drain
from cdc.pipeline.resync import resync
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


def test_list_replay_superseded_and_discard(priced, conn, dsn, spark, tmp_path, capsys):
    """list shows the NaN event with its key and reason; once a later change of the key is
    applied, replay marks the event superseded instead of applying it over the newer row;
    discard takes the next one out of the counts, and list --all still shows it."""
    tables, conf = priced
    assert cli.main(["quarantine", "list", "--config", str(conf)]) == exitcodes.OK
    out = capsys.readouterr().out
    assert "public.p:" in out and CAST in out and '{"id": "2"}' in out
    conn.execute("update p set amount = 7 where id = 2")  # the source fixed by hand
    _drain(dsn, tmp_path, tables, spark)
    pipe = drainkit.pipeline(dsn, str(tmp_path), tables)
    result = replay.Replayer(pipe, spark).replay("public.p")
    assert (result.replayed, result.superseded, result.failed) == (0, 1, 0)
    source, delta = _rows(conn, spark, tmp_path, "p", "p")
    assert delta == source  # id 2 kept its later amount, 7.00
    assert _open(tmp_path) == {}
    # a second NaN, acknowledged instead
    conn.execute("update p set amount = 'NaN' where id = 3")
    _drain(dsn, tmp_path, tables, spark)
    assert _open(tmp_path) == {"public.p": 1}
    args = ["quarantine", "discard", "--table", "public.p", "--reason", "does not cast"]
    assert cli.main([*args, "--config", str(conf)]) == exitcodes.OK
    assert "1 would be discarded" in capsys.readouterr().out
    assert _open(tmp_path) == {"public.p": 1}  # without --yes nothing changed
    assert cli.main([*args, "--yes", "--config", str(conf)]) == exitcodes.OK
    assert "public.p: 1 discarded" in capsys.readouterr().out
    assert _open(tmp_path) == {}
    assert cli.main(["quarantine", "list", "--all", "--json", "--config", str(conf)]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert sorted((e["key"]["id"], e["state"]) for e in listed["events"]) == [
        ("2", "superseded"),
        ("3", "discarded"),
    ]


def test_a_column_widened_since_the_event_is_no_later_change(priced, conn, dsn, spark, tmp_path):
    """Key 2's row before the NaN event's batch (amount numeric(10,2): 2.00) and now, after
    the column was widened to numeric(12,4) (2.0000), hold the same values: replay applies
    the event (which fails again on its NaN) instead of marking it superseded."""
    tables, _ = priced
    conn.execute("update p set note = 'later' where id = 1")  # a commit before the widening
    _drain(dsn, tmp_path, tables, spark)
    conn.execute("alter table p alter column amount type numeric(12,4)")
    conn.execute("update p set note = 'widened' where id = 3")
    _drain(dsn, tmp_path, tables, spark)
    widened = spark.read.format("delta").load(str(tmp_path / "p")).schema["amount"].dataType
    assert widened.simpleString() == "decimal(12,4)"
    pipe = drainkit.pipeline(dsn, str(tmp_path), tables)
    result = replay.Replayer(pipe, spark).replay("public.p")
    assert (result.replayed, result.superseded, result.failed) == (0, 0, 1)
    assert list(result.reasons) == [CAST]


def _replay_killed(conf: Path, kill_at: str) -> subprocess.CompletedProcess:
    """``cdc quarantine replay public.o`` in its own process, which kills itself at a stage."""
    env = {**os.environ, replay.KILL_AT_ENV: kill_at}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "cdc.cli",
            "quarantine",
            "replay",
            "public.o",
            "--config",
            str(conf),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_replay_after_the_cause_is_fixed_is_exactly_once(conn, dsn, spark, tmp_path, capsys):
    """Table o is captured before it is in the configuration: its events are quarantined
    ("table not in the configuration"). Once it is added, with a mirror and a history target,
    and a later change of key 5 was drained, replay (killed after the mirror's commit, then run
    again) gives the mirror the source's rows, without the older event of key 5 over its
    newer row, and the history each replayed event once; the NaN of key 21 stays quarantined
    with its new reason. A third run applies nothing again."""
    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()
    conn.execute("create table p (id int primary key)")
    conn.execute("create table o (id int primary key, v text, n numeric(5,2))")
    for table in ("p", "o"):
        capture.attach(conn, f"public.{table}", CaptureOptions(queue="q", format="json"))
    before = [{"source": "public.p", "target": "p"}]
    conn.execute("insert into o select g, 'v' || g, 1 from generate_series(1, 20) g")
    conn.execute("insert into o values (21, 'nan', 'NaN')")
    conn.execute("update o set v = 'u' || id where id % 3 = 0 and id <= 20")  # 6 rows
    conn.execute("delete from o where id % 7 = 0 and id <= 20")  # 7 and 14
    _drain(dsn, tmp_path, before, spark)
    assert _open(tmp_path) == {"public.o": 21 + 6 + 2}
    after = [
        *before,
        {"source": "public.o", "target": "o"},
        {"source": "public.o", "target": "o_history", "mode": "history"},
    ]
    conf = _config(tmp_path, dsn, after)
    conn.execute("update o set v = 'later' where id = 5")
    _drain(dsn, tmp_path, after, spark)

    killed = _replay_killed(conf, "applied:o")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert _open(tmp_path) == {"public.o": 29 - 1}  # planned: only the superseded one closed
    assert cli.main(["quarantine", "replay", "public.o", "--config", str(conf)]) == 0
    out = capsys.readouterr().out
    assert "finishing an interrupted run" in out
    assert "27 replayed, 1 superseded, 1 still quarantined" in out, out
    assert "1 still quarantined: value does not cast to the column type: n" in out

    source, delta = _rows(conn, spark, tmp_path, "o", "o")
    assert delta == [row for row in source if row[0] != 21]  # key 5 kept 'later'
    history = spark.read.format("delta").load(str(tmp_path / "o_history"))
    assert history.count() == 27 + 1  # each replayed event once, and the later update
    assert history.select("ev_id").distinct().count() == 28
    assert _open(tmp_path) == {"public.o": 1}

    assert cli.main(["quarantine", "replay", "public.o", "--config", str(conf)]) == 0
    assert "0 replayed, 0 superseded, 1 still quarantined" in capsys.readouterr().out
    assert spark.read.format("delta").load(str(tmp_path / "o_history")).count() == 28
    pipe = drainkit.pipeline(dsn, str(tmp_path), after)
    [verdict] = verify.Verifier(pipe, spark).run(["public.o"])
    assert (verdict.state, verdict.differences, verdict.quarantined) == ("quarantined", 0, 1)
    assert verdict.keys == [{"kind": "missing in Delta", "key": {"id": 21}, "quarantined": True}]


def _earlier_shape(spark, path: Path) -> None:
    """The quarantine as versions before the cause column wrote it: the same rows, no cause."""
    rows = spark.read.format("delta").load(str(path))
    assert rows.where("cause is null").count() == 0
    old = rows.drop("cause")
    old.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(str(path))


def _causes(spark, root: Path) -> Counter:
    """(whether a snapshot row, cause as stored) of the quarantined rows, counted."""
    rows = spark.read.format("delta").load(str(root / "_quarantine"))
    stored = "cause" in rows.columns
    return Counter(
        (r.ev_type == quarantine.SNAPSHOT, r.cause if stored else None) for r in rows.collect()
    )


@pytest.mark.parametrize("shape", ["current", "earlier"])
def test_a_failing_targets_events_are_superseded_by_its_resync(conn, dsn, spark, tmp_path, shape):
    """Table c dropped while its events wait: its target fails and its events are quarantined
    as a failing target's; c comes back, and its resync quarantines a row that does not cast
    as a snapshot row; then replay marks the events superseded and applies none (the snapshot
    row stays). A quarantine of an earlier version's shape (no cause column: the cause read
    from the reason) replays the same, and takes the column on the snapshot's append."""
    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()
    conn.execute("create table c (id int primary key, n numeric(5,2))")
    capture.attach(conn, "public.c", CaptureOptions(queue="q", format="json"))
    conn.execute("insert into c select g, g from generate_series(1, 5) g")
    conn.execute("drop table c")
    tables = [{"source": "public.c", "target": "c"}]
    _drain(dsn, tmp_path, tables, spark)
    assert _open(tmp_path) == {"public.c": 5}
    failing = (False, quarantine.FAILING_TARGET)
    assert _causes(spark, tmp_path) == {failing: 5}
    if shape == "earlier":
        _earlier_shape(spark, tmp_path / "_quarantine")
        failing = (failing[0], None)
    conn.execute("create table c (id int primary key, n numeric(5,2))")
    capture.attach(conn, "public.c", CaptureOptions(queue="q", format="json"))
    conn.execute("insert into c select g, g * 2 from generate_series(1, 3) g")
    conn.execute("insert into c values (4, 'NaN')")
    pipe = drainkit.pipeline(dsn, str(tmp_path), tables)
    with pytest.raises(CdcError, match="are failing"):
        replay.Replayer(pipe, spark).replay("public.c")
    assert resync(pipe, spark, "public.c", progress=False).cleared == ("c",)
    assert _causes(spark, tmp_path) == {failing: 5, (True, quarantine.SNAPSHOT_ROW): 1}
    result = replay.Replayer(pipe, spark).replay("public.c")
    assert (result.replayed, result.superseded, result.failed) == (0, 5, 0)
    source, delta = _rows(conn, spark, tmp_path, "c", "c")
    assert delta == [row for row in source if row[0] != 4]
    assert _open(tmp_path) == {"public.c": 1}  # the snapshot row
