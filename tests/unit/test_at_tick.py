"""Reads as of a tick, their pure parts (cdc.ops.at_tick): the tick each commit records, the
ticks of a history (with the log's txn actions for older commits), the version a tick pins,
and when the latest commits are enough to tell; what a batch's Commit records; the status
line of the last consistent tick. Against tables: tests/e2e/test_at_tick.py."""

from __future__ import annotations

import json

import pytest

from cdc.config import Source
from cdc.ops import at_tick, status
from cdc.targets.table import APP_KEY, TICK_KEY, Commit

APP = "q@7/delta/orders"
APPS = at_tick.app_ids(Source("postgresql://x/y", "q", "delta"), 7, "orders")


def info(version: int, tick: int | None = None, app: str = APP, **extra: object) -> dict:
    """A commitInfo as delta-rs' history gives it; a tick recorded as a batch's commit does."""
    found: dict = {"version": version, "operation": "MERGE"}
    route = {"cdc.decode": "arrow", "cdc.write": "arrow", "cdc.why": "test"}
    if tick is not None:
        found["userMetadata"] = json.dumps({**route, TICK_KEY: tick, APP_KEY: app})
    found.update(extra)
    return found


def test_app_ids_are_the_incarnations_and_the_legacy_one():
    """A target's batch commits carry queue@incarnation/consumer/target, or the appId of
    versions without incarnations."""
    source = Source("postgresql://x/y", "q", "delta")
    assert at_tick.app_ids(source, 7, "orders") == {"q@7/delta/orders", "q/delta/orders"}


def test_a_batch_commit_records_its_tick_and_app_beside_the_route():
    """Commit.of records cdc.tick and cdc.app with the route; another commit only its
    metadata (a replay's run number is no tick)."""
    commit = Commit.of(Source("postgresql://x/y", "q", "delta"), 7, "orders", 42)
    assert json.loads(commit.user_metadata or "") == {TICK_KEY: 42, APP_KEY: APP}
    routed = Commit(APP, 42, metadata='{"cdc.write": "spark"}', tick=True)
    assert json.loads(routed.user_metadata or "") == {
        "cdc.write": "spark", TICK_KEY: 42, APP_KEY: APP
    }  # fmt: skip
    assert Commit(APP + "#replay", 3, metadata='{"cdc.write": "spark"}').user_metadata == (
        '{"cdc.write": "spark"}'
    )
    assert Commit(APP, 3).user_metadata is None


def test_tick_of_reads_only_the_pipelines_apps():
    """The tick a commit records for one of the apps; none for another app's, a route
    without a tick, text that is not JSON, or no metadata."""
    assert at_tick.tick_of(info(1, 42), APPS) == 42
    assert at_tick.tick_of(info(1, 42, app="q/delta/orders"), APPS) == 42
    assert at_tick.tick_of(info(1, 42, app="q@7/other/orders"), APPS) is None
    assert at_tick.tick_of(info(1, userMetadata='{"cdc.write": "arrow"}'), APPS) is None
    assert at_tick.tick_of(info(1, userMetadata="not json"), APPS) is None
    assert at_tick.tick_of(info(1, userMetadata='"text"'), APPS) is None
    assert at_tick.tick_of(info(1), APPS) is None


def test_commit_ticks_in_version_order_with_txn_actions_for_older_commits():
    """The history's ticks in version order; a commit recording none takes its txn action's
    version for one of the apps, and another app's txn is no tick."""
    history = [info(4, 12), info(3), info(2), info(1), info(0)]
    txns = {1: {"q/delta/orders": 10}, 2: {"q@7/other/orders": 99}}
    assert at_tick.commit_ticks(history, APPS, txns) == [
        (0, None), (1, 10), (2, None), (3, None), (4, 12)
    ]  # fmt: skip
    assert at_tick.commit_ticks(history, APPS) == [
        (0, None),
        (1, None),
        (2, None),
        (3, None),
        (4, 12),
    ]


def test_only_commits_before_the_first_recording_one_need_their_txn_actions():
    """A drain that records ticks records them in every batch commit: the commits without
    one after the first that does (OPTIMIZE, a column added) are no batch commits."""
    history = [info(6), info(5, 12), info(4), info(3, 11), info(2), info(1), info(0)]
    assert at_tick.unrecorded(history, APPS) == [0, 1, 2]
    assert at_tick.unrecorded([info(2), info(1)], APPS) == [1, 2]
    assert at_tick.unrecorded([info(2, 5, app="q@7/other/orders")], APPS) == [2]


# a table's commits: created (0), tick 10 (1), OPTIMIZE (2), tick 12 (3), a column added (4),
# tick 15 (5), a snapshot chunk or a purge (6)
TICKS = [(0, None), (1, 10), (2, None), (3, 12), (4, None), (5, 15), (6, None)]


@pytest.mark.parametrize(
    ("tick", "version"),
    [
        (9, 0),  # before the first batch: the table as created
        (10, 2),  # the batch's commit, and the OPTIMIZE after it (no tick: it inherits 10)
        (11, 2),  # a tick no batch of this table ended at: the state of the last one before
        (12, 4),
        (14, 4),
        (15, 6),  # the latest: the chunk after the last batch shows too
        (99, 6),
    ],
)
def test_a_tick_pins_the_version_before_the_first_commit_of_a_later_tick(tick, version):
    """Commits without a tick inherit the one before them; a tick pins the last version of
    a tick at or below it."""
    assert at_tick.pinned_version(TICKS, tick) == version


def test_no_version_by_then_is_none():
    """A table whose first commit is a later batch's (Spark's append created it), or no
    commits at all: None."""
    assert at_tick.pinned_version([(0, 20), (1, 21)], 19) is None
    assert at_tick.pinned_version([(0, 20), (1, 21)], 20) == 0
    assert at_tick.pinned_version([], 5) is None
    assert at_tick.pinned_version([(0, None), (1, None)], 5) == 1  # never drained: latest


def test_the_latest_commits_decide_once_they_reach_an_earlier_tick():
    """A page of the latest commits is enough when it holds a commit of the tick or an
    earlier one, when it holds no later tick, or when it starts at version 0."""
    assert at_tick.decided([(5, 15), (6, None)], 15)
    assert at_tick.decided([(3, 12), (4, None), (5, 15)], 12)
    assert not at_tick.decided([(4, None), (5, 15), (6, None)], 12)
    assert at_tick.decided([(0, None), (1, 15)], 12)
    assert at_tick.decided([], 12)


def test_the_status_line_names_the_consistent_tick_and_the_tables_apart():
    """cdc status: the last consistent tick and its time, and the tables that are not
    consistent with the others (failing, or being copied by a snapshot)."""
    tables = [
        status.TableState("public.a", "a", "mirror", "/d/a", exists=True),
        status.TableState("public.b", "b", "mirror", "/d/b", exists=True, failing=True),
    ]
    found = status.Status(
        status.QueueState("q", 9, 0.5, None, False, False),
        status.ConsumerState("delta", registered=True, last_tick=8),
        tables=tables,
        consistent_tick=8,
        consistent_tick_time="2024-05-01T10:00:00+00:00",
    )
    [line] = [x for x in status.render(found).splitlines() if x.startswith("consistent reads")]
    assert line == (
        "consistent reads: tick 8 of 2024-05-01T10:00:00+00:00 (cdc sql --consistent);"
        " not consistent with the others: b (failing, or a snapshot)"
    )
    shown = status.to_prometheus(found)
    assert 'cdc_pipeline_consistent_tick_id{queue="q"} 8.0' in shown
    assert 'cdc_pipeline_consistent_tick_timestamp_seconds{queue="q"} 1.7145576e+09' in shown
    assert json.loads(status.to_json(found))["consistent_tick"] == 8
