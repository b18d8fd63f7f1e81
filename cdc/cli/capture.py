"""The capture commands, no Spark: attach (a table, a pattern, or --sync), detach, triggers,
rules."""

from __future__ import annotations

import argparse
import json
import sys

import psycopg

from cdc import errors
from cdc.cli import exitcodes
from cdc.cli.common import dsn
from cdc.pg import capture, capture_rules
from cdc.pg.capture_rules import ATTACHED, CAPTURED, SKIPPED, WOULD_ATTACH, SyncRow


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
    if args.sync:
        return _sync(args)
    if not args.table:
        raise errors.ConfigError("give a table (or a pattern such as 'public.*'), or --sync")
    if not args.queue:
        raise errors.ConfigError("--queue is required: the queue the table's events go to")
    opts = _options(args)
    if capture_rules.is_pattern(args.table):
        return _attach_pattern(args, opts)
    if args.exclude:
        raise errors.ConfigError(
            f"--exclude goes with a pattern ('public.*'); {args.table} names one table"
        )
    with psycopg.connect(dsn(args)) as conn:
        if args.print:
            print(capture.generated_sql(conn, args.table, opts))
            return 0
        capture.attach(conn, args.table, opts)
    print(f"{args.table} captured into queue {args.queue!r} ({args.format})")
    return 0


def _options(args: argparse.Namespace) -> capture.CaptureOptions:
    return capture.CaptureOptions(
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


def _show(rows: list[SyncRow]) -> None:
    """One line per table: the action, the table (its queue), and why when skipped."""
    width = max((len(r.table) for r in rows), default=0)
    for r in rows:
        why = f"  {r.reason}" if r.reason else ""
        print(f"{r.action:<12}  {r.table:<{width}}  {r.queue}{why}")


def _summary(rows: list[SyncRow], dry_run: bool) -> str:
    def count(action: str) -> int:
        return sum(r.action == action for r in rows)

    keyless = sum(r.keyless for r in rows)
    first = f"{count(WOULD_ATTACH)} would be attached" if dry_run else f"{count(ATTACHED)} attached"
    return (
        f"{first}, {count(CAPTURED)} already captured, {keyless} skipped without a key,"
        f" {count(SKIPPED) - keyless} skipped for another reason"
    )


def _attach_pattern(args: argparse.Namespace, opts: capture.CaptureOptions) -> int:
    """A pattern: record the rule and attach the matching tables now (--print: only show)."""
    with psycopg.connect(dsn(args)) as conn:
        result = capture_rules.add(conn, args.table, opts, tuple(args.exclude), dry_run=args.print)
    _show(result.rows)
    rule = "dry run, no rule recorded" if result.rule_id is None else f"rule {result.rule_id}"
    if not result.rows:
        later = (
            "" if result.rule_id is None
            else f"; the rule is kept for tables created later (cdc detach --rule {result.rule_id})"
        )  # fmt: skip
        print(f"pattern {args.table} matched no table ({rule}){later}", file=sys.stderr)
        return 1
    summary = _summary(result.rows, args.print)
    print(f"pattern {args.table} into queue {args.queue!r} ({rule}): {summary}")
    done = any(r.action in (ATTACHED, WOULD_ATTACH, CAPTURED) for r in result.rows)
    return 0 if done else 1


def _sync(args: argparse.Namespace) -> int:
    """--sync: apply the stored rules to the tables there now. Exit 1 when a table was
    skipped for a reason other than a missing key (rights, options): that needs a person."""
    if args.table or args.exclude:
        raise errors.ConfigError(
            "--sync applies the stored capture rules: give no table or --exclude"
            " (--queue limits it to one queue's rules)"
        )
    with psycopg.connect(dsn(args)) as conn:
        rows = capture_rules.sync(conn, args.queue, dry_run=args.print)
    _show([r for r in rows if r.action != CAPTURED])
    print(f"capture rules{' (dry run)' if args.print else ''}: {_summary(rows, args.print)}")
    return 1 if any(r.action == SKIPPED and not r.keyless for r in rows) else 0


def cmd_detach(args: argparse.Namespace) -> int:
    if args.rule is not None:
        if args.table or args.queue:
            raise errors.ConfigError("--rule removes a capture rule: give no table or --queue")
        with psycopg.connect(dsn(args)) as conn:
            capture_rules.remove(conn, args.rule)
        print(f"capture rule {args.rule} removed (the tables it attached stay captured)")
        return 0
    if not args.table:
        raise errors.ConfigError("give the table to detach, or --rule ID")
    with psycopg.connect(dsn(args)) as conn:
        n = capture.detach(conn, args.table, args.queue)
    print(f"{args.table}: {n} capture(s) removed")
    return 0


def cmd_rules(args: argparse.Namespace) -> int:
    with psycopg.connect(dsn(args)) as conn:
        rows = capture_rules.rules(conn)
    if args.json:
        print(json.dumps(rows, default=str, indent=2))
        return 0
    if not rows:
        print("no capture rule")
        return 0
    for r in rows:
        pattern = f"{_glob_part(r['schema_glob'])}.{_glob_part(r['table_glob'])}"
        exclude = f"  exclude {', '.join(r['exclude'])}" if r["exclude"] else ""
        opts = {k: v for k, v in r["options"].items() if k != "format"}
        print(
            f"{r['rule_id']:>4}  {pattern}  {r['queue_name']}  {r['options'].get('format', 'json')}"
            f"  owner {r['owner'] or '(dropped)'}{exclude}  {json.dumps(opts)}"
        )
    return 0


def _glob_part(part: str) -> str:
    """A glob part as it is written on the command line (quoted when it must be)."""
    if "." in part or '"' in part:
        return '"' + part.replace('"', '""') + '"'
    return part


CURRENT = "current"
REFRESH = "refreshed at next write"  # stale, and the guard regenerates it before the next write
STALE = "STALE"  # stale, and nothing will regenerate it


def cmd_triggers(args: argparse.Namespace) -> int:
    """Captured tables with the state of their triggers: current, refreshed at next write
    (the table changed since the trigger was generated, and the guard trigger regenerates it
    before the table's next INSERT / UPDATE / DELETE, in that statement's transaction), or
    STALE (nothing will: attach it again). Exit UNHEALTHY (3) only for STALE."""
    from cdc.ops import status

    with psycopg.connect(dsn(args)) as conn:
        rows = capture.captures(conn)
        guarded = status.capture_guards(conn)
    for r in rows:
        if r["current"]:
            r["state"] = CURRENT
        elif guarded.get((r["table_name"], r["queue_name"])):
            r["state"] = REFRESH
        else:
            r["state"] = STALE
    if args.json:
        print(json.dumps(rows, default=str, indent=2))
        return exitcodes.UNHEALTHY if any(r["state"] == STALE for r in rows) else exitcodes.OK
    if not rows:
        print("no table is captured")
        return 0
    header = ("table", "queue", "format", "trigger", "options")
    lines = [header] + [
        (
            r["table_name"],
            r["queue_name"],
            r["format"],
            f"{STALE}: run cdc attach again" if r["state"] == STALE else r["state"],
            json.dumps({k: v for k, v in r["options"].items() if k != "format"}),
        )
        for r in rows
    ]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for line in lines:
        print("  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip())
    return exitcodes.UNHEALTHY if any(r["state"] == STALE for r in rows) else exitcodes.OK
