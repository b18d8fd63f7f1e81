"""The quarantine's reasons and causes (cdc.targets.quarantine.CAUSES) for events the drain
does not apply: events of tables the pipeline does not replicate, and events of sources
whose target is failing (cdc.targets.failing). Their texts are made here only.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cdc.config import Pipeline
from cdc.pipeline.reader import BatchEvents
from cdc.targets import failing, quarantine

__all__ = ["failing_events", "stray_events"]


def stray_reason(pipeline: Pipeline) -> Column:
    """The quarantine's reason for an event of a table the pipeline does not replicate: why
    the resolution refused it (a rule's table whose target is another's, cdc.pipeline.tables),
    else that it is not in the configuration."""
    reason = F.lit("table not in the configuration")
    for r in pipeline.refused:
        refused = F.lit(f"table refused by the configuration: {r.reason}")
        reason = F.when(F.col("ev_extra1") == r.source, refused).otherwise(reason)
    return reason


def stray_events(pipeline: Pipeline, strays: DataFrame) -> DataFrame:
    """The events of tables the pipeline does not replicate, with their reason and cause."""
    return strays.withColumn("reason", stray_reason(pipeline)).withColumn(
        "cause", F.lit(quarantine.STRAY)
    )


def failing_events(
    pipeline: Pipeline,
    events: BatchEvents,
    marks: dict[str, failing.Mark],
    newly: dict[str, tuple[str, str]],
) -> list[DataFrame]:
    """The batch's events of the sources with a failing target, once per source, with the
    reasons (and the cause FAILING_TARGET)."""
    reasons: dict[str, list[str]] = {}
    for table in pipeline.tables:
        if table.target in newly:
            why = f"target {table.target} cannot be applied: {newly[table.target][1]}"
        elif table.target in marks:
            mark = marks[table.target]
            why = (
                f"target {table.target} is failing since tick {mark.tick_id}"
                f" ({mark.reason}): `cdc resync {table.source}` recovers it"
            )
        else:
            continue
        reasons.setdefault(table.source, []).append(why)
    return [
        events.tables[source]
        .withColumn("reason", F.lit("; ".join(why)))
        .withColumn("cause", F.lit(quarantine.FAILING_TARGET))
        for source, why in reasons.items()
        if source in events.tables
    ]
