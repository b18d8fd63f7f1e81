"""The Spark commands that run a pipeline file (--config): drain, snapshot, resync, verify."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from cdc.cli import exitcodes
from cdc.cli.common import pipeline_and_spark

log = logging.getLogger("cdc")


def cmd_drain(args: argparse.Namespace) -> int:
    from cdc.pipeline import drain

    pipeline, session = pipeline_and_spark(args, "cdc-drain", check="drain")
    on_batch = None
    if args.mode == "follow" and pipeline.metrics_port:
        on_batch = drain.serve_metrics(pipeline)
    with drain.Drain(pipeline, session, tick=not args.no_tick, workers=args.workers) as runner:
        runner.stop_on_signals()
        batches = runner.run(args.mode, on_batch=on_batch)
    log.debug("%d batch(es) applied", batches)  # the drain logged its summary
    return 0


def cmd_snapshot(args: argparse.Namespace) -> int:
    from cdc.pipeline import snapshot

    if args.request:
        from cdc import config

        pipeline = config.load(args.config)  # no Spark: one insert per table
        for table in args.tables:
            name = snapshot.request(pipeline, table)
            print(f"{name}: snapshot requested; the drain takes it between its batches")
        return 0
    if args.nice:
        os.nice(args.nice)  # before the JVM starts: it inherits the priority
    pipeline, session = pipeline_and_spark(args, "cdc-snapshot", check="snapshot")
    loader = snapshot.Snapshot(
        pipeline, session, progress=not args.no_progress, chunk_rows=args.chunk_rows
    )
    failed = 0
    for table in args.tables:
        try:
            result = loader.run(table, args.partitions, restart=args.restart)
        except snapshot.SnapshotFailed as exc:  # that table's: the others go on
            print(f"cdc: error: {exc}", file=sys.stderr)
            failed += 1
            continue
        resumed = f", resumed after {result.resumed_at:,} rows" if result.resumed_at else ""
        print(
            f"{result.table}: {result.rows:,} rows in {result.chunks} chunk(s) into"
            f" {', '.join(result.targets)} in {result.seconds:.1f} s{resumed}"
            + (f", {result.quarantined:,} quarantined" if result.quarantined else "")
            + "; done once the drain applies its next batch"
        )
    return exitcodes.COULD_NOT_RUN if failed else exitcodes.OK


def cmd_resync(args: argparse.Namespace) -> int:
    from cdc.pipeline import resync

    pipeline, session = pipeline_and_spark(args, "cdc-resync", check="drain")
    result = resync.resync(
        pipeline, session, args.table, args.partitions, progress=not args.no_progress
    )
    cleared = ", ".join(result.cleared) if result.cleared else "none was failing"
    print(
        f"{result.table}: {result.rows:,} rows at tick {result.position} in"
        f" {result.seconds:.1f} s"
        + (f", {result.quarantined:,} quarantined" if result.quarantined else "")
        + f"; failing marks cleared: {cleared}"
    )
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from cdc.pipeline import verify

    pipeline, session = pipeline_and_spark(args, "cdc-verify", check="verify")
    verdicts = verify.Verifier(pipeline, session, args.limit).run(args.tables)
    if args.json:
        print(json.dumps([v.as_dict() for v in verdicts], indent=2, default=str))
    else:
        for v in verdicts:
            if v.error:
                print(f"{v.source} -> {v.target}: NOT VERIFIED: {v.error}")
                continue
            state = {verify.OK: "ok", verify.QUARANTINED: "ok but for quarantined keys"}.get(
                v.state, "DIFFERS"
            )
            print(
                f"{v.source} -> {v.target}: {state} at tick {v.tick_id} (Delta version"
                f" {v.delta_version}): source {v.source_rows:,} rows, Delta {v.delta_rows:,}"
                f" rows, hashes {v.source_hash} / {v.delta_hash}"
            )
            if not v.ok:
                print(
                    f"  {v.differences:,} differing key(s), {v.quarantined:,} quarantined"
                    f" (an open quarantined event explains them: cdc quarantine list --table"
                    f" {v.source}); the first {len(v.keys)}:"
                )
                for k in v.keys:
                    kind = "quarantined, " + k["kind"] if k.get("quarantined") else k["kind"]
                    print(f"    {kind}: {k['key']}")
                    for c in k.get("columns", []):
                        print(f"      {c['column']}: source {c['source']!r}, Delta {c['delta']!r}")
    if any(v.differs for v in verdicts):
        return exitcodes.DIFFERS
    return exitcodes.COULD_NOT_RUN if any(v.error for v in verdicts) else exitcodes.OK
