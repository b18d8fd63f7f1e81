"""Columns kept out of a target or masked in it: a ``[[tables]]`` entry's ``exclude_columns``
and ``mask`` (cdc.targets.options), the one set of rules the drain, the snapshot, verify and
the quarantine's replay apply alike, on either engine. Pure: no Spark, no Arrow, no database
(their renderings: cdc.engines.arrow.masking, cdc.engines.spark.masking).

::

    [[tables]]
    source = "public.customers"
    exclude_columns = ["notes", "tmp_*"]           # never in the target
    mask = { email = "sha256", phone = "null" }    # salted with $CDC_MASK_SALT

``resolve`` matches the entry's column globs (cdc.globs: ``*``, ``?``, case-sensitive) with
the source's columns and gives the table's ``Masking``:

- an **excluded** column is not in the target: not created, not decoded, not written, not
  compared (an event that carries it is read as if it did not);
- ``sha256``: the target column is a string, the lowercase hex SHA-256 of the salt's bytes
  followed by the UTF-8 bytes of the value's text as PostgreSQL outputs it (``text_of``:
  DateStyle ISO for a date; a char(n) without its trailing blanks, as PostgreSQL's cast to
  text drops them); NULL stays NULL. Only for the types whose text is one and the same in
  every event format, in the snapshot's read and in verify's (``HASHABLE``);
- ``null``: the column keeps its type and holds NULL.

The salt is read from the environment (``SALT_ENV``), never from the file, and never shown:
a table with a sha256 mask and no salt is refused before anything is written
(``require_salt``). Refused too, naming the column: a key column excluded or nulled (the fold
and the MERGE match rows by the key), a column two mask entries give different methods, or
one matched by both lists, and, in an entry that names one table, a glob without wildcards
that names no column (a typo would let the value through).

A key column masked with sha256 is allowed: the hash is keyed but deterministic, so one key
value always gives one hash (every path, both engines) and two values give two (a collision of
SHA-256 is not expected to be found), so the hashed key is as unique and as stable as the
source's.

``record`` is what the target keeps of its masking (the target property ``cdc.masking``,
cdc.targets.mask_record), to refuse a batch written under other rules or another salt.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from cdc.errors import ConfigError
from cdc.globs import is_pattern, matches
from cdc.pg.pgtypes import Column
from cdc.targets.options import TableOptions

if TYPE_CHECKING:
    from cdc.config import Pipeline

__all__ = [
    "HASHABLE",
    "NULL",
    "SALT_ENV",
    "SHA256",
    "Masked",
    "Masking",
    "date_text",
    "hasher",
    "require_salt",
    "require_salt_of",
    "resolve",
    "salt_check",
    "sha256_hex",
    "text_of",
]

SALT_ENV = "CDC_MASK_SALT"
SHA256, NULL = "sha256", "null"

# PostgreSQL types (as cdc.pg.pgtypes names them: a domain as its base type) whose text is the
# same in a json, urlenc and sql event, in the snapshot's read and in verify's, and is given
# back exactly by the value the engines decode (Spark's type -> its rendering, text_of)
HASHABLE = {
    "text": "string",
    "character varying": "string",
    "character": "string",
    "uuid": "string",
    "smallint": "short",
    "integer": "int",
    "bigint": "long",
    "date": "date",
}
PADDED = "character"  # char(n): its trailing blanks are not part of its text


@dataclass(frozen=True)
class Masked:
    """One masked column of the target."""

    name: str
    method: str  # SHA256 or NULL
    pg_type: str
    source_type: str  # the Spark type its source values decode to (before the mask)

    @property
    def target_type(self) -> str:
        return "string" if self.method == SHA256 else self.source_type


@dataclass(frozen=True)
class Masking:
    """A target's exclusions and masks over its source's columns (see the module)."""

    table: str  # schema.table, as messages name it
    exclude: tuple[str, ...] = ()  # the entry's globs
    mask: tuple[tuple[str, str], ...] = ()  # the entry's (glob, method)
    masked: tuple[Masked, ...] = ()  # the kept columns it masks, in the source's order
    columns: tuple[Column, ...] = ()  # the target's: kept columns, a sha256 one as a string
    salt: bytes | None = field(default=None, repr=False)  # never shown

    @property
    def active(self) -> bool:
        """Whether it changes anything (an entry without exclude_columns and mask: no)."""
        return bool(self.exclude or self.mask)

    def excludes(self, name: str) -> bool:
        """Whether a column of this name is kept out (also one the source no longer has)."""
        return any(matches(glob, name) for glob in self.exclude)

    def of(self, name: str) -> Masked | None:
        return next((m for m in self.masked if m.name == name), None)

    def target(self, columns: Iterable[Column]) -> list[Column]:
        """Source columns as the target holds them: excluded ones left out, a sha256 one as
        a string. Idempotent: the target's columns give themselves."""
        out = []
        for c in columns:
            if self.excludes(c.name):
                continue
            m = self.of(c.name)
            out.append(replace(c, spark_type=m.target_type) if m else c)
        return out

    def decoded(self, columns: Iterable[Column]) -> list[Column]:
        """The target's columns as their values are decoded: a masked column in its source's
        type (cast and checked as any value, then masked)."""
        out = []
        for c in columns:
            m = self.of(c.name)
            out.append(replace(c, spark_type=m.source_type) if m else c)
        return out

    def at(self, columns: Iterable[Column]) -> dict[int, Masked]:
        """The masked columns by their position in columns."""
        return {i: m for i, c in enumerate(columns) if (m := self.of(c.name)) is not None}

    def hash(self, text: str | None, masked: Masked) -> str | None:
        """A value's text (as PostgreSQL outputs it) hashed as the sha256 mask does."""
        return self.hasher(masked)(text)

    def hasher(self, masked: Masked) -> Callable[[str | None], str | None]:
        """``hash`` of one column, as one fast function (the engines call it per value)."""
        assert self.salt is not None, "resolve() gives every sha256 mask its salt"
        return hasher(self.salt, masked.pg_type)

    def value(self, value: Any, masked: Masked) -> Any:
        """A value as the target holds it, from its text (SHA256) or any value (NULL)."""
        return None if masked.method == NULL else self.hash(value, masked)

    def record(self) -> str:
        """What the target keeps of its masking (the configuration, and which salt)."""
        body: dict[str, Any] = {
            "exclude": sorted(self.exclude),
            "mask": sorted([glob, method] for glob, method in self.mask),
        }
        if any(method == SHA256 for _, method in self.mask) and self.salt is not None:
            body["salt"] = salt_check(self.salt)
        return json.dumps(body, sort_keys=True)


def resolve(
    options: TableOptions, columns: list[Column], table: str, *, listed: bool = True
) -> Masking:
    """The table's Masking, its options matched with its source columns (ConfigError naming
    the column and the fix, see the module). listed: the entry names this one table (not a
    pattern rule's), so a glob without wildcards must name one of its columns."""
    where = f"table {table}"
    exclude, mask = options.exclude_columns, options.mask
    if not exclude and not mask:
        return Masking(table, columns=tuple(columns))
    if listed:
        names = {c.name for c in columns}
        for glob in (*exclude, *(g for g, _ in mask)):
            if not is_pattern(glob) and glob not in names:
                key = "exclude_columns" if glob in exclude else f"mask.{glob}"
                raise ConfigError(
                    f"{where}: {key} names column {glob!r}, which it does not have"
                    f" (columns: {', '.join(sorted(names))}); correct the name or remove it"
                )
    masked = []
    for c in columns:
        excluded = [g for g in exclude if matches(g, c.name)]
        methods = {m for g, m in mask if matches(g, c.name)}
        if excluded and methods:
            raise ConfigError(
                f"{where}: column {c.name} is both excluded ({excluded[0]!r}) and masked:"
                " an excluded column is not in the target at all; keep one"
            )
        if excluded and c.is_key:
            raise ConfigError(
                f"{where}: exclude_columns leaves out {c.name}, a key column: the drain folds"
                " and MERGEs rows by their key; keep it, or mask it with sha256 (the hash of a"
                " key is as unique as the key)"
            )
        if len(methods) > 1:
            raise ConfigError(
                f"{where}: column {c.name} is masked both with sha256 and null by the globs of"
                " mask; give it one method"
            )
        if not methods:
            continue
        method = methods.pop()
        if method == NULL and c.is_key:
            raise ConfigError(
                f'{where}: mask gives key column {c.name} "null": the drain folds and MERGEs'
                ' rows by their key; mask it with "sha256" (the hash of a key is as unique as'
                " the key), or leave it unmasked"
            )
        if method == SHA256 and c.pg_type not in HASHABLE:
            raise ConfigError(
                f'{where}: mask gives column {c.name} "sha256", but it is {c.pg_type}: sha256'
                f" takes {', '.join(HASHABLE)} columns, whose text is the same in every event"
                ' format, the snapshot and verify; mask it with "null", or exclude it'
            )
        masked.append(Masked(c.name, method, c.pg_type, c.spark_type))
    salt = None
    if any(m.method == SHA256 for m in masked) or any(m == SHA256 for _, m in mask):
        salt = _salt(f"{where} has a sha256 mask")
    out = Masking(table, tuple(exclude), tuple(mask), tuple(masked), salt=salt)
    return replace(out, columns=tuple(out.target(columns)))


def _salt(why: str) -> bytes:
    value = os.environ.get(SALT_ENV)
    if not value:
        raise ConfigError(
            f"{why}, and ${SALT_ENV} is not set: set it in the environment of every cdc"
            " command that writes or verifies the table (the same value each time: another"
            " salt gives other hashes); it is never read from the pipeline file"
        )
    return value.encode()


def require_salt(entries: Iterable[tuple[str, TableOptions]]) -> None:
    """ConfigError when an entry (its name as messages give it, its options) has a sha256
    mask and the environment has no salt: before anything is read or written."""
    hashed = sorted({name for name, opts in entries if any(m == SHA256 for _, m in opts.mask)})
    if hashed:
        _salt(f"{', '.join(hashed)} {'has' if len(hashed) == 1 else 'have'} a sha256 mask")


def require_salt_of(pipeline: Pipeline) -> None:
    """require_salt over a pipeline's listed tables and pattern rules."""
    entries = [(t.source, t.options) for t in pipeline.tables]
    require_salt(entries + [(r.label, r.options) for r in pipeline.rules])


def sha256_hex(salt: bytes, text: str) -> str:
    """The sha256 mask of a text: lowercase hex SHA-256 of the salt's bytes and the text's
    UTF-8 bytes."""
    return hashlib.sha256(salt + text.encode()).hexdigest()


def hasher(salt: bytes, pg_type: str) -> Callable[[str | None], str | None]:
    """The sha256 mask of a column's texts (``text_of``, then ``sha256_hex``; NULL stays
    NULL), as one function without further calls: a batch calls it once a value."""
    sha = hashlib.sha256
    if pg_type == PADDED:
        return lambda t: None if t is None else sha(salt + t.rstrip(" ").encode()).hexdigest()
    return lambda t: None if t is None else sha(salt + t.encode()).hexdigest()


def salt_check(salt: bytes) -> str:
    """A short digest telling one salt from another (kept in the target's record; it shows
    nothing of the salt that a masked value would not)."""
    return hashlib.sha256(b"cdc.mask.salt\x00" + salt).hexdigest()[:16]


def text_of(pg_type: str, text: str) -> str:
    """A value's text as the mask hashes it: PostgreSQL's output, a char(n) without its
    trailing blanks (the snapshot reads it through a cast to text, which drops them)."""
    return text.rstrip(" ") if pg_type == PADDED else text


def date_text(days: int) -> str:
    """PostgreSQL's text of a date (DateStyle ISO), given as days since 1970-01-01: year,
    month and day in the proleptic Gregorian calendar, a year before 1 as ``... BC``, one past
    9999 in as many digits as it takes."""
    z = days + 719468  # days since 0000-03-01
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    year = yoe + era * 400 + (month <= 2)
    if year > 0:
        return f"{year:04d}-{month:02d}-{day:02d}"
    return f"{1 - year:04d}-{month:02d}-{day:02d} BC"
