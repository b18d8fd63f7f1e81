"""cdc status's health on a real server, the same in text, JSON and Prometheus with the same
exit code: idle is healthy, old pending events are not, rolled-back and uncommitted events are
not pending, a drain holding the lock is draining, other stuck consumers are orphans."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from cdc import cli, config
from cdc.cli import exitcodes
from cdc.ops import at_tick, status
from cdc.pg import source
from cdc.pg.capture import CaptureOptions, attach
from cdc.pg.queue import Consumer, Producer, Queue
from tests.support.databases import create_database, drop_database
from tests.support.roles import LoginRoles

OUTPUTS = ([], ["--json"], ["--prometheus"])


@pytest.fixture
def pipeline(conn: psycopg.Connection, dsn: str, tmp_path: Path) -> config.Pipeline:
    """Queue q, consumer delta registered and up to date, table public.a captured into q (no
    Delta table yet: the health does not need one)."""
    Queue(conn, "q").create()
    Consumer(conn, "q", "delta").register()
    conn.execute("create table a (id int primary key, v text)")
    attach(conn, "public.a", CaptureOptions(queue="q"))
    conf = tmp_path / "pipeline.toml"
    conf.write_text(
        f"[source]\ndsn = {json.dumps(dsn)}\nqueue = 'q'\nconsumer = 'delta'\n"
        f"[target]\npath = {json.dumps(str(tmp_path / 'delta'))}\n"
        "[[tables]]\nsource = 'public.a'\ntarget = 'a'\n"
    )
    return config.load(conf)


def _age_everything(conn: psycopg.Connection, seconds: int = 3600) -> None:
    """Moves every tick and event of the queue `seconds` into the past (as if the ticker and
    the drain had been idle that long): ages without waiting."""
    conn.execute(
        "update cdc.tick set tick_time = tick_time - make_interval(secs => %s)", (seconds,)
    )
    conn.execute("update cdc.event set ev_time = ev_time - make_interval(secs => %s)", (seconds,))


def _drain_all(conn: psycopg.Connection, name: str = "delta") -> None:
    """Ticks, then takes and finishes the consumer's batches until none is left."""
    consumer = Consumer(conn, "q", name)
    consumer.tick()
    while (batch := consumer.next_batch()) is not None:
        batch.finish()


def _run(pipeline: config.Pipeline, capsys: pytest.CaptureFixture[str], *extra: str) -> dict:
    """cdc status in all three outputs: {output: (exit code, text)}."""
    shown = {}
    for output in OUTPUTS:
        code = cli.main(["status", "--config", str(pipeline.path), *output, *extra])
        shown[output[0] if output else "text"] = (code, capsys.readouterr().out)
    return shown


def _health(shown: dict) -> tuple[set[int], str, str, str]:
    """The exit codes of the three outputs, and the health each output states."""
    codes = {code for code, _ in shown.values()}
    text = shown["text"][1].splitlines()[0]
    from_json = json.loads(shown["--json"][1])["health"]["state"]
    prom = next(
        line for line in shown["--prometheus"][1].splitlines()
        if line.startswith("cdc_pipeline_unhealthy{")
    )  # fmt: skip
    return codes, text, from_json, prom


def test_idle_with_nothing_pending_is_healthy_in_every_output(pipeline, conn, capsys):
    """An hour without a tick and nothing pending (between scheduled drains, after a snapshot)
    is healthy: exit 0 in text, JSON and Prometheus alike."""
    conn.execute("insert into a values (1, 'x')")
    _drain_all(conn)
    _age_everything(conn)
    shown = _run(pipeline, capsys)
    codes, text, from_json, prom = _health(shown)
    assert codes == {exitcodes.OK}
    assert text == "health: ok"
    assert from_json == "ok"
    assert prom.endswith(" 0.0")
    state = json.loads(shown["--json"][1])
    assert state["queue"]["ticker_lag_s"] > 3000  # idle indeed
    assert state["consumer"]["pending_events"] == 0
    assert state["consumer"]["pending_age_s"] is None


def test_the_last_consistent_tick_shows_in_every_output(pipeline, conn, capsys):
    """The consumer's last finished tick and its time: the line in text, the fields in JSON,
    the gauges in Prometheus, and cdc.ops.at_tick's last_consistent_tick alike."""
    conn.execute("insert into a values (1, 'x')")
    _drain_all(conn)
    tick = Consumer(conn, "q", "delta").position()
    [when] = conn.execute("select tick_time from cdc.tick where tick_id = %s", (tick,)).fetchone()
    assert at_tick.last_consistent_tick(pipeline) == (tick, when)
    shown = _run(pipeline, capsys)
    iso = when.astimezone(dt.UTC).isoformat()
    assert f"consistent reads: tick {tick} of {iso} (cdc sql --consistent)" in shown["text"][1]
    found = json.loads(shown["--json"][1])
    assert (found["consistent_tick"], found["consistent_tick_time"]) == (tick, iso)
    assert f'cdc_pipeline_consistent_tick_id{{queue="q"}} {float(tick)}' in shown["--prometheus"][1]


def test_old_pending_events_are_unhealthy_in_every_output(pipeline, conn, capsys):
    """Committed events waiting longer than the threshold, no drain at work: exit 3 in all
    three outputs, with the reason."""
    conn.execute("insert into a values (1, 'x'), (2, 'y')")
    _age_everything(conn)
    shown = _run(pipeline, capsys)
    codes, text, from_json, prom = _health(shown)
    assert codes == {exitcodes.UNHEALTHY}
    assert text == "health: UNHEALTHY"
    assert "2 pending event(s), the oldest waiting" in shown["text"][1]
    assert from_json == "unhealthy"
    assert prom.endswith(" 1.0")
    assert 'cdc_consumer_pending_events{consumer="delta",queue="q"} 2.0' in shown["--prometheus"][1]
    # a threshold above their age: healthy again
    codes, *_ = _health(_run(pipeline, capsys, "--max-pending-age", "7200"))
    assert codes == {exitcodes.OK}


def test_fresh_pending_events_are_healthy(pipeline, conn):
    """Pending events younger than the threshold, after a long idle time: healthy. Their age
    runs from the later of their time and the consumer's last finished tick."""
    conn.execute("update cdc.tick set tick_time = tick_time - interval '1 hour'")
    conn.execute("insert into a values (1, 'x')")
    state = status.collect(pipeline)
    assert state.consumer.pending_events == 1
    assert state.consumer.pending_age_s is not None and state.consumer.pending_age_s < 3000
    assert state.health.state == status.OK


def test_rolled_back_and_uncommitted_events_are_not_pending(pipeline, conn, connect):
    """Events of a rolled-back transaction never become visible, nor do those of one still
    running: they are not pending (the sequence-based count of get_consumer_info has them)."""
    with conn.transaction():  # rolled back, without an error
        Producer(conn, "q").insert("I:id", "{}", "public.a")
        raise psycopg.Rollback()
    running = connect(autocommit=False)
    Producer(running, "q").insert("I:id", "{}", "public.a")  # open transaction
    _age_everything(conn)
    [info] = conn.execute("select pending_events from cdc.get_consumer_info('q')").fetchall()
    assert info[0] == 2  # by sequence values: both counted
    state = status.collect(pipeline)
    assert state.consumer.pending_events == 0
    assert state.health.state == status.OK
    running.commit()  # now visible: one pending event
    assert status.collect(pipeline).consumer.pending_events == 1


def test_a_drain_holding_the_lock_is_draining_not_unhealthy(pipeline, conn, connect, capsys):
    """Old pending events while a drain (or snapshot) holds the consumer's drain lock: the
    state is draining, exit 0, in every output."""
    conn.execute("insert into a values (1, 'x')")
    _age_everything(conn)
    drain = connect()
    with source.drain_lock(drain, pipeline.source, "test"):
        shown = _run(pipeline, capsys)
        codes, text, from_json, _ = _health(shown)
        assert codes == {exitcodes.OK}
        assert (text, from_json) == ("health: draining", "draining")
        assert "cdc_consumer_draining" in shown["--prometheus"][1]
    assert status.collect(pipeline).health.state == status.UNHEALTHY


def test_a_failing_table_is_unhealthy(pipeline, conn):
    """A failing table makes the pipeline unhealthy even with nothing pending."""
    state = status.collect(pipeline)
    state.tables[0].failing = True
    assert status.health(state, status.MAX_PENDING_AGE).state == status.UNHEALTHY


def test_an_orphan_consumer_is_shown_and_does_not_change_the_health(pipeline, conn, capsys):
    """Another consumer of the queue that does not advance: listed as an orphan (it holds back
    rotation), with its metric; the pipeline's own consumer is up to date, so health is ok."""
    Consumer(conn, "q", "forgotten").register()
    conn.execute("insert into a values (1, 'x')")
    _drain_all(conn)  # delta only
    _age_everything(conn)
    shown = _run(pipeline, capsys)
    codes, text, _, _ = _health(shown)
    assert codes == {exitcodes.OK} and text == "health: ok"
    assert "orphan consumer forgotten: 1 pending event(s)" in shown["text"][1]
    assert "holds back the rotation" in shown["text"][1]
    assert "cdc consumer unregister q forgotten" in shown["text"][1]
    orphans = json.loads(shown["--json"][1])["orphans"]
    assert [o["consumer"] for o in orphans] == ["forgotten"]
    assert (
        'cdc_queue_orphan_consumer_pending_age_seconds{consumer="forgotten",queue="q"}'
        in shown["--prometheus"][1]
    )


@pytest.fixture
def roles(admin_dsn: str, dsn: str) -> Iterator[LoginRoles]:
    kit = LoginRoles(admin_dsn, dsn)
    yield kit
    kit.cleanup()


def test_dead_letters_show_for_the_drain_role(pipeline, conn, roles):
    """A cdc_reader member (the documented drain role) sees pending events and dead letters
    per table through cdc.get_consumer_status, without privileges on the engine's tables."""
    conn.execute("insert into a values (1, 'x')")
    consumer = Consumer(conn, "q", "delta")
    consumer.tick()
    batch = consumer.next_batch()
    assert batch is not None
    [(ev_id,)] = conn.execute(
        "select ev_id from cdc.get_batch_events(%s)", (batch.batch_id,)
    ).fetchall()
    conn.execute("select cdc.event_dead(%s, %s, 'bad')", (batch.batch_id, ev_id))
    batch.finish()
    reader = roles.connect("cdc_reader")
    [mine] = [c for c in status.consumers(reader, pipeline.source.engine, "q")]
    assert (mine.consumer, mine.pending_events, mine.dead_letters) == ("delta", 0, 1)
    assert mine.dead_by_table == {"public.a": 1}


def test_an_unknown_max_pending_age_is_refused(pipeline, capsys):
    """A threshold that is not positive is one line and exit 1, before any query."""
    code = cli.main(["status", "--config", str(pipeline.path), "--max-pending-age", "0"])
    assert code == exitcodes.COULD_NOT_RUN
    assert "--max-pending-age must be a positive number" in capsys.readouterr().err


@pytest.fixture
def pgq_dsn(pgq_admin_dsn: str) -> Iterator[str]:
    """A fresh database with PgQ's extension on the PgQ cluster."""
    name = f"cdc_status_{uuid.uuid4().hex[:10]}"
    dsn = create_database(pgq_admin_dsn, name)
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("create extension pgq")
    yield dsn
    drop_database(pgq_admin_dsn, name)


def test_a_real_pgq_queue_counts_as_pgq_does(pgq_dsn: str, tmp_path: Path, capsys) -> None:
    """On a real PgQ (no get_consumer_status) pending events are PgQ's count, said so, their
    age the consumer's lag; the health follows the same rule, exit 3 in every output."""
    with psycopg.connect(pgq_dsn, autocommit=True) as c:
        c.execute("select pgq.create_queue('q')")
        c.execute("select pgq.register_consumer('q', 'delta')")
        c.execute("select pgq.insert_event('q', 't', 'x')")
        c.execute("select pgq.force_tick('q')")
        c.execute("select pgq.ticker('q')")
        c.execute("update pgq.tick set tick_time = tick_time - interval '1 hour'")
    conf = tmp_path / "pipeline.toml"
    conf.write_text(
        f"[source]\ndsn = {json.dumps(pgq_dsn)}\nqueue = 'q'\nconsumer = 'delta'\n"
        "queue_schema = 'pgq'\n"
        f"[target]\npath = {json.dumps(str(tmp_path / 'delta'))}\n"
        "[[tables]]\nsource = 'public.a'\ntarget = 'a'\n"
    )
    state = status.collect(config.load(conf))
    # PgQ's count by sequence values (force_tick moves its sequence on by 1000)
    assert state.consumer.pending_events >= 1 and not state.consumer.pending_exact
    assert state.consumer.pending_age_s is not None and state.consumer.pending_age_s > 3000
    assert state.health.state == status.UNHEALTHY
    assert "(by sequence: rolled-back ones too)" in status.render(state)
    assert state.consistent_tick is not None and state.consistent_tick_time is not None
    pipeline = config.load(conf)
    codes, *_ = _health(_run(pipeline, capsys))
    assert codes == {exitcodes.UNHEALTHY}
