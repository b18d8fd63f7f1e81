"""The engine and queue commands, no Spark: install, uninstall, queue (create, drop, info,
config), consumer (list, register, unregister), ticker."""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
from dataclasses import asdict

import psycopg

from cdc import config, errors
from cdc.cli.common import dsn
from cdc.pg import install
from cdc.pg.engine import CDC
from cdc.pg.queue import Consumer, Queue
from cdc.pg.ticker import Ticker, TickerSettings

log = logging.getLogger("cdc")

TICKER_PERIODS = ("tick_period", "retry_period", "maint_period")  # TickerSettings' fields


def cmd_install(args: argparse.Namespace) -> int:
    version = install.install(dsn(args))
    print(f"cdc {version} installed")
    return 0


def cmd_uninstall(args: argparse.Namespace) -> int:
    if not args.force:
        _confirm_uninstall(dsn(args))
    dropped = install.uninstall(dsn(args), drop_roles=not args.keep_roles)
    print("cdc removed" + (f"; dropped roles {', '.join(dropped)}" if dropped else ""))
    return 0


def _confirm_uninstall(target: str) -> None:
    """Queues with registered consumers are dropped with their events and the consumers'
    positions: only with --force, or a yes typed at a terminal."""
    from cdc.ops import status

    with psycopg.connect(target, autocommit=True) as conn:
        held = status.registered_consumers(conn)
    if not held:
        return
    listing = "; ".join(f"{queue}: {', '.join(names)}" for queue, names in held.items())
    question = (
        f"queues with registered consumers (their unconsumed events and positions go too):"
        f" {listing}"
    )
    if sys.stdin.isatty() and sys.stdout.isatty():
        answer = input(f"{question}\ndrop them and uninstall? [y/N] ")
        if answer.strip().lower() in ("y", "yes"):
            return
        raise errors.ConfigError("uninstall cancelled: nothing was dropped")
    raise errors.ConfigError(
        f"{question}; unregister them (`cdc consumer unregister QUEUE NAME`), or pass --force"
        " to drop them anyway"
    )


def cmd_queue(args: argparse.Namespace) -> int:
    if args.settings and args.action != "config":
        raise errors.ConfigError(
            f"KEY=VALUE settings go with `cdc queue config`, not `cdc queue {args.action}`"
        )
    with psycopg.connect(dsn(args), autocommit=True) as conn:
        queue = Queue(conn, args.name)
        if args.action == "create":
            created = queue.create()
            print(f"queue {args.name!r} " + ("created" if created else "exists already"))
        elif args.action == "drop":
            queue.drop(force=args.force)
            print(f"queue {args.name!r} dropped")
        elif args.action == "config":
            _queue_config(conn, queue, args.settings)
        else:
            info = queue.info()
            print(json.dumps(info, default=str, indent=2))
    return 0


NO_LIMIT = ("none", "null")  # the value of per_tx_limit or max_retries that removes the limit


def _queue_config(conn: psycopg.Connection, queue: Queue, settings: list[str]) -> None:
    """Sets the KEY=VALUE settings (all or none, in one transaction), then shows them all."""
    from cdc.ops import status

    changes: list[tuple[str, str | None]] = []
    for item in settings:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise errors.ConfigError(
                f"a queue setting is KEY=VALUE (e.g. ticker_max_lag='5 seconds'), not {item!r}"
            )
        value = value.strip()
        changes.append((key.strip(), None if value.lower() in NO_LIMIT else value))
    if changes:
        with conn.transaction():
            for key, value in changes:
                queue.set_config(key, value)
    shown = status.queue_config(conn, CDC, queue.name)
    width = max(len(k) for k in shown)
    for key, value in shown.items():
        print(f"{key:<{width}}  {'none' if value is None else value}")


def cmd_consumer(args: argparse.Namespace) -> int:
    """Consumers of a queue: list them (with their pending events), register or unregister
    one (PgQ's register_consumer / unregister_consumer)."""
    from cdc.ops import status

    if args.action != "list" and not args.name:
        raise errors.ConfigError(f"`cdc consumer {args.action}` needs the consumer's name")
    if args.action == "list" and args.name:
        raise errors.ConfigError("`cdc consumer list QUEUE` takes no consumer name")
    with psycopg.connect(dsn(args), autocommit=True) as conn:
        if args.action == "list":
            found = status.consumers(conn, CDC, args.queue)
            if args.json:
                shown = [{k: v for k, v in asdict(c).items() if k != "draining"} for c in found]
                print(json.dumps(shown, default=str, indent=2))  # draining: cdc status
            else:
                print(status.render_consumers(found) or f"queue {args.queue!r} has no consumer")
            return 0
        consumer = Consumer(conn, args.queue, args.name)
        if args.action == "register":
            new = consumer.register()
            done = "registered at the queue's last tick" if new else "was registered already"
            print(f"consumer {args.name!r} of queue {args.queue!r} {done}")
        else:
            consumer.unregister()
            print(
                f"consumer {args.name!r} unregistered from queue {args.queue!r}"
                " (its pending events are no longer kept for it)"
            )
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
