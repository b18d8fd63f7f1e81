"""`cdc sql` without a query: ``;``-terminated statements from the terminal (at a prompt, with
line editing) or stdin, run one after the other in one engine's session until the end of
input or ``\\q``. An error is one line on stderr and the next statement runs; Ctrl-C while a
statement runs cancels it. Either engine (cdc.ops.query for Spark, cdc.ops.query_datafusion)
is a ``Queries``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol, TextIO

from cdc.errors import ConfigError
from cdc.ops.query_text import MORE, PROMPT, QUIT, Result, check_format, split

__all__ = ["Queries", "interactive"]


class Queries(Protocol):
    """An engine's session over a pipeline's tables."""

    engine: str  # its name, as --engine takes it
    names: list[str]  # the tables a statement can name
    backslash: bool  # whether its quotes take backslash escapes (query_text.split)

    def run(self, statement: str, limit: int, fmt: str) -> str:
        """The statement's rows rendered (query_text.render); ConfigError in one line."""
        ...

    def answer(self, statement: str, limit: int = 0) -> Result:
        """The statement's rows (up to limit, 0: all) as plain values; ConfigError in one
        line."""
        ...

    def cancel(self) -> None:
        """Cancels what a statement interrupted by Ctrl-C left running."""
        ...

    def close(self) -> None:
        """Undoes what the session put under the targets' names, where it outlives it."""
        ...


def _terminal_lines(read: Callable[[str], str], buffered: Callable[[], bool]) -> Iterator[str]:
    """Lines typed at a prompt (its continuation prompt while a statement is open)."""
    while True:
        try:
            yield read(MORE if buffered() else PROMPT)
        except (EOFError, KeyboardInterrupt):  # Ctrl-D, Ctrl-C at the prompt: quit
            return


def interactive(
    queries: Queries,
    limit: int,
    fmt: str,
    lines: Iterable[str] | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Runs the statements of lines (default: the terminal's, at a prompt, or stdin's) one
    after the other in the session; an error is one line on err and the next statement
    runs. Stops at the end of input or a line ``\\q``. The number of statements that failed."""
    check_format(fmt)
    out, err = out or sys.stdout, err or sys.stderr
    buffer = ""
    if lines is None:
        if sys.stdin.isatty():
            import readline  # noqa: F401  (line editing and history for input())

            print(
                f"cdc sql ({queries.engine}): tables {', '.join(queries.names) or 'none yet'};"
                f" end each statement with ; and quit with {QUIT} or Ctrl-D",
                file=err,
            )
            lines = _terminal_lines(input, lambda: bool(buffer.strip()))
        else:
            lines = sys.stdin
    failed = 0
    for line in lines:
        if line.strip() == QUIT and not buffer.strip():
            break
        statements, buffer = split(buffer + line.rstrip("\n") + "\n", queries.backslash)
        for statement in statements:
            failed += not _run_one(queries, statement, limit, fmt, out, err)
    last, rest = split(buffer + ";", queries.backslash)
    for statement in last:  # a last statement without its ;
        failed += not _run_one(queries, statement, limit, fmt, out, err)
    if rest.strip():
        print(f"cdc: error: unfinished statement at the end: {rest.strip()[:80]}", file=err)
        failed += 1
    return failed


def _run_one(
    queries: Queries, statement: str, limit: int, fmt: str, out: TextIO, err: TextIO
) -> bool:
    try:
        text = queries.run(statement, limit, fmt)
    except ConfigError as exc:
        print(f"cdc: error: {exc}", file=err, flush=True)
        return False
    except KeyboardInterrupt:  # Ctrl-C while it runs: cancel it, go on with the next
        queries.cancel()
        print("cdc: error: cancelled", file=err, flush=True)
        return False
    if text:
        print(text, file=out, flush=True)
    return True
