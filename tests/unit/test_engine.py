"""The queue engines (cdc.pg.engine): one value per engine, its flags and its named calls."""

from __future__ import annotations

import pytest

from cdc import config, errors
from cdc.pg import engine

# the calls the consumer makes on either engine (cdc.pg.consumer, cdc.pg.batch)
CONSUMER_CALLS = ("register_consumer", "next_batch_custom", "finish_batch", "ticker_queue",
                  "force_tick")  # fmt: skip


def test_the_configuration_knows_exactly_the_engines():
    """source.queue_schema accepts the registered engines' names, and a Source gives its
    engine's value."""
    assert config.QUEUE_SCHEMAS == ("cdc", "pgq")
    assert config.Source("dsn", "q", "c").engine is engine.CDC
    assert config.Source("dsn", "q", "c", queue_schema="pgq").engine is engine.PGQ


def test_an_unknown_engine_is_a_config_error():
    """engine_of names the allowed values."""
    with pytest.raises(errors.ConfigError, match="must be one of cdc, pgq, not 'londiste'"):
        engine.engine_of("londiste")


@pytest.mark.parametrize("value", [engine.CDC, engine.PGQ], ids=lambda e: e.name)
def test_every_engine_has_the_consumer_calls_in_its_own_schema(value):
    """Each engine's query file holds the consumer's calls, each calling its own schema."""
    for name in CONSUMER_CALLS:
        assert f" {value.name}." in value.query(name), name


def test_only_our_engine_has_the_capture_registry_and_its_extras():
    """PgQ has no incarnations, capture registry, tick NOTIFY or slice function; the
    capture queue of a PgQ source is None."""
    flags = ("has_incarnations", "has_capture_registry", "notifies_ticks", "has_batch_slices")
    assert all(getattr(engine.CDC, f) for f in flags)
    assert not any(getattr(engine.PGQ, f) for f in flags)
    assert config.Source("dsn", "q", "c").capture_queue == "q"
    assert config.Source("dsn", "q", "c", queue_schema="pgq").capture_queue is None


def test_a_call_the_engine_lacks_is_refused_by_name():
    """PgQ has no open_batch_cursor: asking for it says so instead of a KeyError."""
    with pytest.raises(errors.CdcError, match="the pgq queue engine has no open_batch_cursor"):
        engine.PGQ.query("open_batch_cursor")


def test_jdbc_slices_read_by_the_engine_s_function():
    """A JDBC slice calls the slice function of our engine; on PgQ it filters the batch."""
    import datetime as dt

    from cdc.pg.batch import Batch, BatchInfo

    now = dt.datetime.now(dt.UTC)
    info = BatchInfo(7, 2, 1, now, now, 200, 100)
    ours = Batch(None, info, engine=engine.CDC).jdbc_query(125, None)  # type: ignore[arg-type]
    assert ours.endswith("from cdc.get_batch_events(7, 125, null)) e")
    theirs = Batch(None, info, engine=engine.PGQ)  # type: ignore[arg-type]
    assert theirs.jdbc_query(125, 150).endswith(
        "from pgq.get_batch_events(7) where ev_id >= 125 and ev_id < 150) e"
    )
    assert theirs.jdbc_query(None, None).endswith("from pgq.get_batch_events(7) where true) e")
