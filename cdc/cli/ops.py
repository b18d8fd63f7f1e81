"""The operations commands: status (no Spark), sql, maintain, demo, jars."""

from __future__ import annotations

import argparse

from cdc.cli.common import pipeline_and_spark


def cmd_status(args: argparse.Namespace) -> int:
    from prometheus_client import generate_latest

    from cdc import config
    from cdc.ops import status
    from cdc.pipeline.tables import resolved

    pipeline = resolved(config.load(args.config))
    state = status.collect(pipeline)
    if args.json:
        print(status.to_json(state))
    elif args.prometheus:
        print(generate_latest(status.registry(pipeline)).decode(), end="")
    else:
        print(status.render(state))
    return 1 if state.queue.stalled or state.failing else 0


def cmd_sql(args: argparse.Namespace) -> int:
    from cdc.ops import query

    pipeline, session = pipeline_and_spark(args, "cdc-sql")
    print(query.run(pipeline, session, args.query, args.limit, args.format))
    return 0


def cmd_maintain(args: argparse.Namespace) -> int:
    from cdc.ops import maintain

    pipeline, session = pipeline_and_spark(args, "cdc-maintain")
    done = maintain.maintain(
        pipeline,
        session,
        args.targets,
        optimize=not args.no_optimize,
        vacuum=not args.no_vacuum,
        retain_hours=args.retain_hours,
    )
    for m in done:
        print(f"{m.target}: {m.files_before} file(s) -> {m.files_after}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from cdc import demo

    return demo.main(["--dir", args.dir])


def cmd_jars(args: argparse.Namespace) -> int:
    from pathlib import Path

    from cdc import jars

    found = jars.fetch(Path(args.dest) if args.dest else None)
    print(f"{len(found)} jars in {found[0].parent}")
    return 0
