"""The status as Prometheus metrics: a pipeline's (scraped from a ``--follow`` drain, or
printed by ``cdc status --format prometheus``, from the same status as the exit code) and the
ticker's (every queue of every database it serves)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import psycopg
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry
from psycopg.rows import dict_row

from cdc.config import Pipeline
from cdc.ops.status.gather import collect
from cdc.ops.status.model import MAX_PENDING_AGE, UNHEALTHY, Status
from cdc.ops.status.queries import named, seconds


class PipelineCollector(Collector):
    """Prometheus metrics of a pipeline, collected on every scrape."""

    def __init__(self, pipeline: Pipeline, max_pending_age: float = MAX_PENDING_AGE) -> None:
        self.pipeline = pipeline
        self.max_pending_age = max_pending_age

    def collect(self) -> Iterator[Metric]:
        yield from metrics(collect(self.pipeline, self.max_pending_age))


class _Fixed(Collector):
    """The metrics of one status already collected."""

    def __init__(self, status: Status) -> None:
        self.status = status

    def collect(self) -> Iterator[Metric]:
        yield from metrics(self.status)


def to_prometheus(status: Status) -> str:
    """The status in Prometheus' text format (the same collect as the exit code's)."""
    from prometheus_client import generate_latest

    reg = CollectorRegistry()
    reg.register(_Fixed(status))
    return generate_latest(reg).decode()


def metrics(status: Status) -> Iterator[Metric]:
    q, c, h = status.queue, status.consumer, status.health
    labels = {"queue": q.queue}

    def gauge(name: str, doc: str, value: float | None, **extra: str) -> Iterator[Metric]:
        if value is None:
            return
        family = GaugeMetricFamily(name, doc, labels=[*labels, *extra])
        family.add_metric([*labels.values(), *extra.values()], float(value))
        yield family

    yield from gauge(
        "cdc_pipeline_unhealthy",
        "1 when unhealthy: pending events older than the threshold and no drain at work, a"
        " failing table, a failed snapshot or a refused table (cdc status exits 3)",
        int(h.state == UNHEALTHY),
    )
    yield from gauge(
        "cdc_pipeline_refused_tables",
        "Tables a rule matches that the configuration refuses: their target would be another"
        " source's table (their events go to the quarantine)",
        len(status.refused),
    )
    yield from gauge(
        "cdc_pipeline_max_pending_age_seconds", "The threshold of unhealthy", h.max_pending_age_s
    )
    yield from gauge("cdc_queue_ticker_lag_seconds", "Age of the last tick", q.ticker_lag_s)
    yield from gauge("cdc_queue_last_tick_id", "Id of the last tick", q.last_tick_id)
    if c.registered:
        who = {"consumer": c.consumer}
        yield from gauge("cdc_consumer_lag_seconds", "Age of its last tick", c.lag_s, **who)
        yield from gauge(
            "cdc_consumer_pending_events",
            "Committed events not yet in a finished batch",
            c.pending_events,
            **who,
        )
        yield from gauge(
            "cdc_consumer_pending_age_seconds",
            "How long the oldest pending event has waited (0: none pending)",
            c.pending_age_s or 0.0,
            **who,
        )
        yield from gauge(
            "cdc_consumer_draining", "1 while a drain or snapshot holds its lock", c.draining, **who
        )
        yield from gauge("cdc_consumer_last_tick_id", "Last finished tick", c.last_tick, **who)
        yield from gauge("cdc_consumer_dead_letters", "Dead letters", c.dead_letters, **who)
    yield from gauge(
        "cdc_pipeline_consistent_tick_id",
        "The last consistent tick: every table can be read as of it (the consumer's last"
        " finished tick)",
        status.consistent_tick,
    )
    if status.consistent_tick_time is not None:
        yield from gauge(
            "cdc_pipeline_consistent_tick_timestamp_seconds",
            "The time of the last consistent tick (Unix time)",
            dt.datetime.fromisoformat(status.consistent_tick_time).timestamp(),
        )
    if status.orphans:
        orphan = GaugeMetricFamily(
            "cdc_queue_orphan_consumer_pending_age_seconds",
            "Another consumer of the queue with pending events older than the threshold: it"
            " holds back rotation",
            labels=["queue", "consumer"],
        )
        for o in status.orphans:
            orphan.add_metric([q.queue, o.consumer], o.pending_age_s or 0.0)
        yield orphan
    version = GaugeMetricFamily("cdc_table_delta_version", "Delta version", labels=["target"])
    applied = GaugeMetricFamily(
        "cdc_table_last_tick_id", "Tick of the last batch applied", labels=["target"]
    )
    rows = GaugeMetricFamily(
        "cdc_table_rows",
        "Live rows in the Delta table (deleted rows not counted)",
        labels=["target"],
    )
    bad = CounterMetricFamily(
        "cdc_table_quarantined_events", "Quarantined events of the table", labels=["target"]
    )
    dead = GaugeMetricFamily("cdc_table_dead_letters", "Dead letters", labels=["target"])
    failed = GaugeMetricFamily(
        "cdc_table_failing",
        "1 when the table is failing (its events go to the quarantine until cdc resync)",
        labels=["target"],
    )
    for t in status.tables:
        for family, value in ((version, t.delta_version), (applied, t.last_tick), (rows, t.rows)):
            if value is not None:
                family.add_metric([t.target], float(value))
        bad.add_metric([t.target], float(t.quarantined))
        if t.dead_letters is not None:
            dead.add_metric([t.target], float(t.dead_letters))
        failed.add_metric([t.target], float(t.failing))
    yield from (version, applied, rows, bad, dead, failed)


def registry(pipeline: Pipeline, max_pending_age: float = MAX_PENDING_AGE) -> CollectorRegistry:
    reg = CollectorRegistry()
    reg.register(PipelineCollector(pipeline, max_pending_age))
    return reg


def _ticker_behind(info: dict[str, Any]) -> bool:
    """The ticker's own view of a queue: not ticked within twice its idle period (a running
    ticker ticks an idle queue once per idle period), unless paused or ticked elsewhere."""
    if info["queue_ticker_paused"] or info["queue_external_ticker"]:
        return False
    lag = seconds(info["ticker_lag"])
    idle = seconds(info["queue_ticker_idle_period"]) or 60.0
    return lag is None or lag > 2 * idle


class TickerCollector(Collector):
    """Prometheus metrics of the ticker: every queue of every database it serves. They say
    whether the ticker keeps up, not whether a pipeline is healthy (``cdc status`` does)."""

    def __init__(self, dsns: list[str]) -> None:
        self.dsns = dsns

    def collect(self) -> Iterator[Metric]:
        lag = GaugeMetricFamily(
            "cdc_queue_ticker_lag_seconds", "Age of the last tick", labels=["database", "queue"]
        )
        behind = GaugeMetricFamily(
            "cdc_queue_ticker_stalled",
            "1 when the queue was not ticked within twice its idle period",
            labels=["database", "queue"],
        )
        for dsn in self.dsns:
            with psycopg.connect(dsn, autocommit=True) as conn:
                db = conn.info.dbname
                cur = conn.cursor(row_factory=dict_row)
                for info in cur.execute(named("all_queue_info")):
                    key = [db, info["queue_name"]]
                    lag.add_metric(key, seconds(info["ticker_lag"]) or 0.0)
                    behind.add_metric(key, float(_ticker_behind(info)))
        yield from (lag, behind)
