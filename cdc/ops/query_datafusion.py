"""`cdc sql` on DataFusion, through delta-rs' QueryBuilder (``--engine datafusion``, and what
``auto`` takes for path targets on a local master: cdc.ops.query_engine): no JVM, and
nothing of Spark imported, so that a query answers in the time it takes to read the
tables' logs and the files it needs.

The tables are named as on Spark (cdc.ops.query): a path target by its target name with
``/`` (and any other character but letters, digits and ``_``) as ``_``, the quarantine
``_quarantine``; DataFusion folds unquoted names to lower case (a column whose name holds
capitals is written in double quotes, as in PostgreSQL). Read at a tick, a table is its
pinned version (``DeltaTable(..., version=)``), or its columns without rows when it had no
data yet.

Errors are one line, as on Spark: a syntax error says so and names what DataFusion found, an
unknown table lists the tables there are. A table delta-rs' QueryBuilder cannot read (a
feature of its protocol it refuses) is ``NotReadable`` before any statement runs, so that
``auto`` takes Spark instead.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping

from cdc.config import Pipeline
from cdc.errors import ConfigError
from cdc.ops import query_text
from cdc.ops.query_engine import targets, unreachable
from cdc.ops.query_text import view_name
from cdc.targets.delta import datafusion, object_store
from cdc.targets.delta.datafusion import QueryFailed

__all__ = ["DataFusionQueries", "NotReadable", "one_line"]

log = logging.getLogger(__name__)

ENGINE = "datafusion"
LONGEST = 600  # characters of an error kept (DataFusion's may hold a whole plan)


class NotReadable(Exception):
    """A table delta-rs' QueryBuilder refuses to read: why (a clause)."""


def one_line(text: str, names: list[str]) -> str:
    """DataFusion's error as one line that says what to do."""
    here = f"tables here: {', '.join(names) or 'none yet'}"
    flat = " ".join(line.strip() for line in text.splitlines() if line.strip())
    parser = re.search(r'ParserError\("(.*)"\)', flat)
    if parser:
        return (
            f"syntax error: {parser[1][:LONGEST]}: fix the statement's syntax (DataFusion's SQL;"
            " --engine spark runs Spark SQL)"
        )
    if re.search(r"table '[^']*' not found", flat):
        return f"{flat[:LONGEST]} ({here})"
    if "only supports a single SQL statement" in flat:
        return f"{flat[:LONGEST]}: give one statement (interactive input is split at ;)"
    return flat[:LONGEST]


class DataFusionQueries:
    """The datafusion engine's session over a pipeline's tables
    (cdc.ops.query_shell.Queries). pins: target -> the version to read (None: none yet,
    its columns without rows); a target not in pins is read at its latest version. conf:
    the Spark settings whose S3A ones reach an object store (query_engine.settings)."""

    engine = ENGINE
    backslash = False  # DataFusion's quotes have no backslash escapes

    def __init__(
        self,
        pipeline: Pipeline,
        pins: Mapping[str, int | None] | None = None,
        conf: Mapping[str, str] | None = None,
    ) -> None:
        object_store.configure(conf or {})
        self._tables = datafusion.Tables()
        self.names: list[str] = []
        left_out = unreachable(pipeline)
        for target in targets(pipeline):
            if target in left_out:
                log.warning("left out of the datafusion engine: %s", left_out[target])
                continue
            self._add(pipeline, target, pins)

    def _add(self, pipeline: Pipeline, target: str, pins: Mapping[str, int | None] | None) -> None:
        pinned = pins is not None and target in pins
        version = pins.get(target) if pins is not None else None
        try:
            table = datafusion.open_table(pipeline.table(target), version)
        except QueryFailed as exc:
            raise ConfigError(
                f"target {target}: version {version} cannot be read: {one_line(str(exc), [])}"
                " (a version is readable as long as its log entries and files are kept: see"
                " maintain's retention)"
            ) from None
        if table is None:  # not there yet
            return
        refused = datafusion.refusals(table)
        if refused:
            raise NotReadable(
                f"target {target} has {', '.join(refused)}, which delta-rs' QueryBuilder refuses"
            )
        name = view_name(target).lower()
        if name in self.names:
            log.warning("target %s is not named %s: another target has the name", target, name)
            return
        self._tables.add(name, table, empty=pinned and version is None)
        self.names.append(name)

    def run(self, statement: str, limit: int, fmt: str) -> str:
        """The statement's rows rendered; ConfigError in one line."""
        return query_text.render(self.answer(statement, limit), fmt)

    def answer(self, statement: str, limit: int = 0) -> query_text.Result:
        """The statement's rows (up to limit, 0: all); ConfigError in one line."""
        try:
            rows = self._tables.execute(statement, limit)
        except QueryFailed as exc:
            raise ConfigError(one_line(str(exc), self.names)) from None
        return query_text.from_arrow(rows)

    def cancel(self) -> None:
        """Nothing runs after Ctrl-C: the statement's stream was dropped."""

    def close(self) -> None:
        """Nothing to undo: the session's names live in this process only."""
