"""The capture commands, no Spark: attach, detach, triggers."""

from __future__ import annotations

import argparse
import json

import psycopg

from cdc import errors
from cdc.cli.common import dsn
from cdc.pg import capture


def _extras(items: list[str]) -> dict[int, str]:
    extras: dict[int, str] = {}
    for item in items:
        number, sep, expr = item.partition("=")
        if not sep or number.strip() not in ("1", "2", "3", "4") or not expr.strip():
            raise errors.ConfigError(f"--extra takes N=EXPR with N from 1 to 4, not {item!r}")
        extras[int(number)] = expr
    return extras


def _names(text: str | None) -> tuple[str, ...]:
    return tuple(n.strip() for n in text.split(",") if n.strip()) if text else ()


def cmd_attach(args: argparse.Namespace) -> int:
    opts = capture.CaptureOptions(
        queue=args.queue,
        format=args.format,
        ignore=_names(args.ignore),
        pkey=_names(args.pkey),
        backup=args.backup,
        when=args.when,
        extra=_extras(args.extra),
        ev_type=args.ev_type,
        skip=args.skip,
        deny=args.deny,
        mode=args.mode,
    )
    with psycopg.connect(dsn(args)) as conn:
        if args.print:
            print(capture.generated_sql(conn, args.table, opts))
            return 0
        capture.attach(conn, args.table, opts)
    print(f"{args.table} captured into queue {args.queue!r} ({args.format})")
    return 0


def cmd_detach(args: argparse.Namespace) -> int:
    with psycopg.connect(dsn(args)) as conn:
        n = capture.detach(conn, args.table, args.queue)
    print(f"{args.table}: {n} capture(s) removed")
    return 0


def cmd_triggers(args: argparse.Namespace) -> int:
    with psycopg.connect(dsn(args)) as conn:
        rows = capture.captures(conn)
    if args.json:
        print(json.dumps(rows, default=str, indent=2))
        return 0
    if not rows:
        print("no table is captured")
        return 0
    width = max(len(r["table_name"]) for r in rows)
    for r in rows:
        state = "current" if r["current"] else "STALE: run cdc attach again"
        opts = {k: v for k, v in r["options"].items() if k != "format"}
        name = r["table_name"]
        print(f"{name:<{width}}  {r['queue_name']}  {r['format']:<6}  {state}  {json.dumps(opts)}")
    return 0 if all(r["current"] for r in rows) else 1
