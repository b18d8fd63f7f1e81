"""The engine and queue commands, no Spark: install, uninstall, queue, ticker."""

from __future__ import annotations

import argparse
import json
import logging
import signal

import psycopg

from cdc import config, errors
from cdc.cli.common import dsn
from cdc.pg import install
from cdc.pg.queue import Queue
from cdc.pg.ticker import Ticker, TickerSettings

log = logging.getLogger("cdc")

TICKER_PERIODS = ("tick_period", "retry_period", "maint_period")  # TickerSettings' fields


def cmd_install(args: argparse.Namespace) -> int:
    version = install.install(dsn(args))
    print(f"cdc {version} installed")
    return 0


def cmd_uninstall(args: argparse.Namespace) -> int:
    dropped = install.uninstall(dsn(args), drop_roles=not args.keep_roles)
    print("cdc removed" + (f"; dropped roles {', '.join(dropped)}" if dropped else ""))
    return 0


def cmd_queue(args: argparse.Namespace) -> int:
    with psycopg.connect(dsn(args), autocommit=True) as conn:
        queue = Queue(conn, args.name)
        if args.action == "create":
            created = queue.create()
            print(f"queue {args.name!r} " + ("created" if created else "exists already"))
        elif args.action == "drop":
            queue.drop(force=args.force)
            print(f"queue {args.name!r} dropped")
        else:
            info = queue.info()
            print(json.dumps(info, default=str, indent=2))
    return 0


def cmd_ticker(args: argparse.Namespace) -> int:
    dsns = config.dsns_of(args.dsn)
    if not dsns:
        raise errors.ConfigError(
            f"no database given: pass --dsn (once per database) or set {config.DSN_ENV}"
        )
    for name in TICKER_PERIODS:
        if getattr(args, name) <= 0:
            raise errors.ConfigError(f"--{name.replace('_', '-')} must be positive")
    ticker = Ticker(dsns, TickerSettings(*(getattr(args, name) for name in TICKER_PERIODS)))
    if args.metrics_port:
        from prometheus_client import start_http_server
        from prometheus_client.registry import CollectorRegistry

        from cdc.ops.status import TickerCollector

        registry = CollectorRegistry()
        registry.register(TickerCollector(dsns))
        start_http_server(args.metrics_port, registry=registry)
    if args.once:
        totals = ticker.run_once()
        print(" ".join(f"{k}={v}" for k, v in totals.items()))
        return 0

    def _stop(signum: int, _frame: object) -> None:
        log.info("received %s, stopping", signal.Signals(signum).name)
        ticker.stop()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    ticker.run()
    return 0
