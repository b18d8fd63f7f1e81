"""Table patterns: globs over ``schema.table``, the same everywhere (pipeline file, CLI, SQL).

A pattern is split like a table name: a part in double quotes is taken as written (a doubled
quote inside is one quote, a dot is a dot), a bare part is NOT case-folded. Each part is
matched against the catalog name on its own: ``*`` is any run of characters (also none),
``?`` exactly one character, every other character itself; case-sensitive. A part is a
pattern when it holds ``*`` or ``?``. Inside PostgreSQL the same rules are
``cdc._glob_regex`` and ``cdc._glob_split`` (triggers/capture/functions/cdc.capture_rules.sql).
"""

from __future__ import annotations

import re

from cdc.errors import ConfigError

WILDCARDS = frozenset("*?")


def split(text: str, default_schema: str | None = "public") -> tuple[str | None, str]:
    """``schema.table`` or ``table`` as (schema, table); the schema of a one-part pattern is
    default_schema. ConfigError naming the problem for anything else."""
    parts: list[str] = []
    i, n = 0, len(text)
    while True:
        cur: list[str] = []
        if text[i : i + 1] == '"':
            i += 1
            while True:
                if i >= n:
                    raise ConfigError(f"pattern {text!r}: a double quote is not closed")
                ch = text[i]
                i += 1
                if ch == '"':
                    if text[i : i + 1] != '"':
                        break
                    i += 1
                cur.append(ch)
        else:
            while i < n and text[i] not in '."':
                cur.append(text[i])
                i += 1
        if not cur:
            raise ConfigError(f"pattern {text!r}: a part is empty (write SCHEMA.TABLE)")
        parts.append("".join(cur))
        if i >= n:
            break
        if text[i] != "." or i == n - 1:
            raise ConfigError(
                f"pattern {text!r}: parts are separated by one dot; quote a part holding"
                ' a dot or a quote: "a.b"'
            )
        i += 1
    if len(parts) > 2:
        raise ConfigError(
            f'pattern {text!r} has {len(parts)} parts: write SCHEMA.TABLE (quote "a.b")'
        )
    if len(parts) == 1:
        return default_schema, parts[0]
    return parts[0], parts[1]


def is_pattern(part: str | None) -> bool:
    """Whether a name part holds a wildcard."""
    return part is not None and not WILDCARDS.isdisjoint(part)


def regex(glob: str) -> re.Pattern[str]:
    """The anchored regular expression of one part's glob."""
    out = "".join(".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in glob)
    return re.compile(rf"\A{out}\Z", re.DOTALL)


def matches(glob: str, name: str) -> bool:
    """Whether one part's glob matches a catalog name."""
    return regex(glob).match(name) is not None
