"""A cdc command line shown in the documentation, checked against the CLI's parser
(cdc.cli.build_parser), as ``--help`` would show it: the words, then the whole line.

``problems(parsers, command)`` gives what is wrong with one line, each as a sentence that names
the bad word and what exists instead:

- the words: the command words walk down the subcommands (``cdc quarantine list``), each of
  which must exist; every option (``--x``, ``--x=v``, ``-v``) must be one of the parser it
  stands under (cdc's own before the command); a value of an option or a positional with
  choices must be one of them. A placeholder passes where it stands: ``...``, an ALL-CAPS word
  (``SCHEMA.TABLE``, ``N``), ``<...>``; ``[``, ``]`` and quotes around words are taken off, and
  ``a|b`` alternatives are each checked;
- the line: without any placeholder it also goes through ``parse_args``, a refusal being a
  problem (argparse's message). A span of the prose (``typed`` False) may name a command
  without the options it needs, or name an option without its value: "the following
  arguments are required" and "argument --x: expected one argument" pass there.

``cdc submit JOB ARGS [-- SPARK ARGS]``: the job's arguments are checked as the job's (as
cdc.cli.submit does), what follows ``--`` is spark-submit's and not checked. ``cdc sql``
lines are parsed by the fast parser too (``build_parser("sql")``, the one ``cdc sql`` runs).
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import re
import shlex
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from cdc.cli import submit
from cdc.cli.parser import build_parser, fast_command
from tests.support.doc_blocks import Command

_ALL_CAPS = re.compile(r"[A-Z][A-Z0-9_]*(?:[.=:][A-Z][A-Z0-9_]*)*")
# a span of the prose may leave these out: the options a command needs, an option's value
_LOOSE = ("the following arguments are required", "one of the arguments")
_LOOSE_END = ("expected one argument", "expected at least one argument")


class Refused(Exception):
    """argparse's refusal of a line (parser.error), instead of its exit."""


@dataclass(frozen=True)
class Parsers:
    """The full parser and ``cdc sql``'s fast one, built once, their errors raised."""

    full: argparse.ArgumentParser
    fast: argparse.ArgumentParser

    @classmethod
    def build(cls) -> Parsers:
        return cls(_raising(build_parser()), _raising(build_parser("sql")))


def _raising(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The parser and its subparsers raise Refused instead of printing usage and exiting."""

    def error(message: str) -> None:
        raise Refused(message)

    for each in _tree(parser):
        each.error = error  # type: ignore[method-assign]
    return parser


def _tree(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    sub = _subcommands(parser)
    if sub is not None:
        for child in dict.fromkeys(sub.choices.values()):
            yield from _tree(child)


def _subcommands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    found = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return found[0] if found else None


def is_placeholder(word: str) -> bool:
    """``...``, ``<the salt>``, ``[--x]``, ``a|b``, ``SCHEMA.TABLE``, ``N``: not a real word."""
    bare = word.strip("[]")
    return (
        "..." in word
        or word != bare
        or "|" in word
        or bare.startswith("<")
        or bare.endswith(">")
        or _ALL_CAPS.fullmatch(bare) is not None
    )


def words_of(command: Command) -> tuple[list[str], str | None]:
    """The words of a line as the shell splits them (comments dropped), and a problem when its
    quotes do not close (a line with placeholders is split on spaces instead: they are prose)."""
    try:
        return shlex.split(command.text, comments=True), None
    except ValueError as exc:
        loose = command.text.split(" #")[0].split()
        if any(is_placeholder(w) for w in loose):
            return loose, None
        return loose, f"the shell cannot split it: {exc}"


def problems(parsers: Parsers, command: Command) -> list[str]:
    """What is wrong with one command line (nothing: [])."""
    words, problem = words_of(command)
    if problem:
        return [problem]
    found = _Walk(parsers.full).words(words)
    if found or any(is_placeholder(w) for w in words):
        return found
    return _parse(parsers, words, loose=not command.typed)


def _parse(parsers: Parsers, words: list[str], *, loose: bool) -> list[str]:
    """parse_args over the line (and over a submitted job's own arguments, as cdc submit
    parses them)."""
    found: list[str] = []
    args = _parse_one(parsers.full, words, loose, found)
    if fast_command(words):
        _parse_one(parsers.fast, words, loose, found)
    if args is not None and args.command == "submit":
        job_args, _, _ = submit.split_arguments(args.args)
        _parse_one(parsers.full, [args.job, *job_args], loose, found)
    return found


def _parse_one(
    parser: argparse.ArgumentParser, argv: list[str], loose: bool, found: list[str]
) -> argparse.Namespace | None:
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            return parser.parse_args(argv)
    except Refused as exc:
        text = str(exc)
        named_only = text.startswith("argument ") and text.endswith(_LOOSE_END)
        if not (loose and (named_only or text.startswith(_LOOSE))):
            found.append(f"cdc refuses {shlex.join(argv)!r}: {exc}")
    except SystemExit as exc:  # --help, --version: shown, then exit 0
        if exc.code:
            found.append(f"cdc exits {exc.code} on {shlex.join(argv)!r}")
    return None


class _Walk:
    """The words of one line walked down the parsers (see the module docstring)."""

    def __init__(self, root: argparse.ArgumentParser) -> None:
        self.root = root
        self.found: list[str] = []

    def words(self, words: list[str]) -> list[str]:
        parser, name = self.root, "cdc"
        positionals = _positionals(parser)
        job_of_submit = False
        i = 0
        while i < len(words):
            word = words[i].strip("[]")
            i += 1
            if not word or word == "|":
                continue
            if word == "--":
                break  # positionals (or spark-submit's own arguments) from here on
            if word.startswith("-") and len(word) > 1 and not word[1].isdigit():
                i += self._option(parser, name, word, words[i] if i < len(words) else None)
                continue
            sub = _subcommands(parser)
            if sub is not None and not job_of_submit:
                if is_placeholder(word) and not set(word.split("|")) & set(sub.choices):
                    break  # a command named by a placeholder: its options are unknown
                for alt in word.split("|"):
                    if alt not in sub.choices:
                        self._no(f"{name} has no command {alt!r}", alt, sub.choices)
                        return self.found
                word = word.split("|")[0]
                parser, name = sub.choices[word], f"{name} {word}"
                positionals = _positionals(parser)
                job_of_submit = word == "submit"
                continue
            action = positionals[0] if positionals else None
            if action is not None and action.nargs not in ("*", "+", argparse.REMAINDER):
                positionals = positionals[1:]
            if action is not None and action.choices is not None:
                self._choices(action, f"{name}'s {action.metavar or action.dest}", word)
            if job_of_submit and action is not None and action.dest == "job":
                if word not in self.root_commands():
                    break  # refused just above, or a placeholder
                parser, name = self.root_commands()[word], f"{name} {word}"
                positionals = _positionals(parser)
                job_of_submit = False
        return self.found

    def root_commands(self) -> dict[str, argparse.ArgumentParser]:
        sub = _subcommands(self.root)
        assert sub is not None
        return sub.choices

    def _option(
        self, parser: argparse.ArgumentParser, name: str, word: str, following: str | None
    ) -> int:
        """Checks an option word (``a|b`` alternatives each); how many words it takes after
        it (its value's, when not ``--x=v``)."""
        taken = 0
        for alt in word.split("|"):
            option, equals, value = alt.partition("=")
            action = _option_action(parser, option)
            if action is None and option == "--print" and name.startswith("cdc submit "):
                continue  # cdc submit JOB ... --print: the submit's, taken out of the job's
            if action is None:
                if parser is not self.root and _option_action(self.root, option):
                    self.found.append(
                        f"{option} is not an option of {name}: cdc's own options go before the"
                        f" command ({name.replace('cdc ', f'cdc {option} ', 1)})"
                    )
                else:
                    options = [o for o in parser._option_string_actions if o.startswith("--")]
                    self._no(f"{option} is not an option of {name}", option, options)
                continue
            if action.nargs == 0:
                continue
            if not equals:
                value = (following or "").strip("[]")
                if value.startswith("-") and len(value) > 1 and not value[1].isdigit():
                    continue  # named without its value (prose): the next word is an option
                taken = 1
            if action.choices is not None and value:
                self._choices(action, f"{name} {option}", value)
        return taken

    def _choices(self, action: argparse.Action, what: str, word: str) -> None:
        assert action.choices is not None
        for alt in word.split("|"):
            if not is_placeholder(alt) and alt not in action.choices:
                self._no(f"{what} is one of {', '.join(map(str, action.choices))}, not {alt!r}")

    def _no(self, text: str, word: str = "", known: Iterable[str] = ()) -> None:
        """A problem; the words known instead, the close ones when there are."""
        known = sorted(known)
        close = difflib.get_close_matches(word, known, n=3, cutoff=0.6) if word else []
        if close:
            text += f" (did you mean {' or '.join(close)}?)"
        elif word and known:
            text += f" (there are: {', '.join(known)})"
        self.found.append(text)


def _positionals(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        a
        for a in parser._actions
        if not a.option_strings and not isinstance(a, argparse._SubParsersAction)
    ]


def _option_action(parser: argparse.ArgumentParser, option: str) -> argparse.Action | None:
    """The action of an option word; ``-vv`` is ``-v`` twice."""
    action = parser._option_string_actions.get(option)
    if action is None and re.fullmatch(r"-([a-zA-Z])\1+", option):
        action = parser._option_string_actions.get(option[:2])
        return action if action is not None and action.nargs == 0 else None
    return action
