"""The quarantine's pure parts: a row's current state among its resolutions, the open
counts status shows (read with delta-rs), the replay's version before a tick, verify's key
texts, and the command line of ``cdc quarantine``."""

from __future__ import annotations

import datetime as dt
import hashlib
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from cdc.cli import build_parser
from cdc.cli import quarantine as cli_quarantine
from cdc.errors import ConfigError
from cdc.pipeline import compare, replay_plan
from cdc.targets import quarantine
from cdc.targets.table import TableRef


def _mark(ev_id: int, state: str, run: int, source: str = "public.t") -> dict:
    return {
        "source": source,
        "ev_id": ev_id,
        "tick_id": 7,
        "data_md5": "m",
        "state": state,
        "reason": None,
        "run": run,
        "at": None,
    }


def test_latest_state_is_the_highest_run_final_row_over_the_plan():
    """Within a run the final row wins over the plan's 'replaying'; a later run wins."""
    rows = [
        _mark(1, quarantine.REPLAYING, 2),
        _mark(1, quarantine.REPLAYED, 2),
        _mark(2, quarantine.REPLAYING, 3),
        _mark(3, quarantine.FAILED, 1),
        _mark(3, quarantine.DISCARDED, 4),
        _mark(4, quarantine.REPLAYED, 5),
        _mark(4, quarantine.REPLAYING, 5),  # order in the table does not matter
    ]
    states = {k[1]: r["state"] for k, r in quarantine.latest(rows).items()}
    assert states == {
        1: quarantine.REPLAYED,
        2: quarantine.REPLAYING,
        3: quarantine.DISCARDED,
        4: quarantine.REPLAYED,
    }
    assert [quarantine.is_open(s) for s in (None, "replaying", "failed")] == [True] * 3
    assert not any(quarantine.is_open(s) for s in ("replayed", "superseded", "discarded"))


def _quarantine_rows(path: Path) -> None:
    rows = [
        ("public.t", 1, 7, "a"),
        ("public.t", 2, 7, "b"),
        ("public.t", 3, 8, "c"),
        ("public.u", 4, 8, "d"),
        ("public.u", None, None, '{"id":"9"}'),  # a snapshot row
    ]
    write_deltalake(
        str(path),
        pa.table(
            {
                "ev_extra1": [r[0] for r in rows],
                "ev_id": pa.array([r[1] for r in rows], pa.int64()),
                "tick_id": pa.array([r[2] for r in rows], pa.int64()),
                "ev_data": [r[3] for r in rows],
                "reason": ["why"] * len(rows),
            }
        ),
    )


def test_open_counts_leave_out_resolved_rows(tmp_path):
    """Status's counts: every row while nothing is resolved; then replayed, superseded and
    discarded rows (a snapshot row known by its data's md5) are left out, failed and
    interrupted ones still count."""
    q, r = tmp_path / "_quarantine", tmp_path / "_quarantine_resolved"
    _quarantine_rows(q)
    counts = quarantine.open_counts(TableRef(str(q)), TableRef(str(r)))
    assert counts == {"public.t": 3, "public.u": 2}

    def md5(text: str) -> str:
        return hashlib.md5(text.encode()).hexdigest()

    marks = [
        ("public.t", 1, 7, md5("a"), "replayed", 1),
        ("public.t", 2, 7, md5("b"), "failed", 1),
        ("public.t", 3, 8, md5("c"), "replaying", 2),
        ("public.u", None, None, md5('{"id":"9"}'), "discarded", 3),
        ("public.u", 4, 8, md5("other data"), "discarded", 3),  # not this row
    ]
    write_deltalake(
        str(r),
        pa.table(
            {
                "source": [m[0] for m in marks],
                "ev_id": pa.array([m[1] for m in marks], pa.int64()),
                "tick_id": pa.array([m[2] for m in marks], pa.int64()),
                "data_md5": [m[3] for m in marks],
                "state": [m[4] for m in marks],
                "reason": pa.array([None] * len(marks), pa.string()),
                "run": pa.array([m[5] for m in marks], pa.int64()),
            }
        ),
    )
    counts = quarantine.open_counts(TableRef(str(q)), TableRef(str(r)))
    assert counts == {"public.t": 2, "public.u": 1}
    assert quarantine.open_counts(TableRef(str(tmp_path / "none")), TableRef(str(r))) == {}


@pytest.mark.parametrize(
    ("tick", "expected"),
    [
        (5, 1),  # the commit of tick 5 is version 2: the state before it is version 1
        (6, 3),  # tick 6 did not commit: the first later one is tick 9, version 4
        (9, 3),
        (10, 7),  # no drain commit since: the latest version
        (1, 1),  # before every drain commit: the version before the first (the creation)
    ],
)
def test_version_before_a_tick(tick, expected):
    """The target's state the event's batch started from."""
    ticks = [(2, 5), (4, 9)]  # (version, tick) of the drain's commits; others: not the drain
    assert replay_plan.versions_before(ticks, [tick], now=7) == {tick: expected}


def test_versions_before_many_ticks_at_once():
    """Several ticks in one pass, the drain's commits given in any order: for each tick, the
    version before the lowest-versioned drain commit of a tick at or after it."""
    ticks = [(3, 8), (5, 4), (6, 9)]
    assert replay_plan.versions_before(ticks, [1, 4, 5, 8, 9, 10], now=9) == {
        1: 2,
        4: 2,
        5: 2,
        8: 2,
        9: 5,
        10: 9,
    }


def test_key_texts_match_event_texts():
    """verify's keys (normal form) and an event's key texts meet: numbers without trailing
    fractional zeros, strings as they are."""
    from decimal import Decimal

    assert compare.key_text((1, Decimal("2.50"), "a b", None)) == ("1", "2.5", "a b", None)
    assert compare._numeric_text("2.500") == "2.5"
    assert compare._numeric_text("-0.0") == "0"
    assert compare._numeric_text("x") == "x"
    assert compare.key_text((Decimal("10"),)) == ("10",)


def test_cli_quarantine_commands_parse():
    parser = build_parser()
    args = parser.parse_args(["quarantine", "replay", "public.t", "--config", "c"])
    assert (args.action, args.table) == ("replay", "public.t")
    args = parser.parse_args(
        ["quarantine", "discard", "--reason", "cast", "--before", "2026-11-25", "--config", "c"]
    )
    assert (args.action, args.reason, args.yes) == ("discard", "cast", False)
    args = parser.parse_args(["quarantine", "list", "--table", "public.t", "--config", "c"])
    assert (args.limit, args.all) == (cli_quarantine.LIMIT, False)
    with pytest.raises(SystemExit):
        parser.parse_args(["quarantine", "--config", "c"])


def test_before_is_an_iso_time_in_utc_by_default():
    assert cli_quarantine._time("2026-11-25") == dt.datetime(2026, 11, 25, tzinfo=dt.UTC)
    when = cli_quarantine._time("2026-11-25 14:00:00+02:00")
    assert when.utcoffset() == dt.timedelta(hours=2)
    with pytest.raises(ConfigError, match="--before 'yesterday' is not a time"):
        cli_quarantine._time("yesterday")
