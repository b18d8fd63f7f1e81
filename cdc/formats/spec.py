"""What a capture format is: a value binding a name to the ev_type shape its row events are
recognised by, its capability flags, and its decoder (ev_data -> column -> text value).

One ``Format`` per module (``json.py``, ``urlenc.py``, ``sql.py``), listed in one registry
(``cdc.formats.registry``), from which every classifier is made. Invariants:

- a row event (INSERT, UPDATE, DELETE) belongs to the first format whose ``ev_type`` shape
  matches; each shape is one predicate, a value (``StartsWith``, ``Matches``, ``OneOf``)
  with its Arrow form here and its Spark form in cdc.engines.spark.formats, which agree;
- a TRUNCATE needs no decoder (its column map is empty). json writes it in its own shape
  (``op`` TRUNCATE); urlenc and sql both write the bare ev_type ``R``
  (docs/event-format.md §3.6), so ``R`` tells no format: ``truncate_type`` records it,
  and classifiers give it op ``R`` and no format;
- its op comes from the ev_type by a rule (``op``: ``FirstLetter``, ``JsonOp``), and a format
  decodes either inside the JVM (``jvm_map``: a decoder named as a value, ``JsonObject`` or
  ``UrlEncoded``) or in Python (``python_map``: run in an Arrow UDF, on that format's events
  only). The rules and decoders are data: cdc.engines.spark.formats renders each as a Spark
  expression (a new kind of rule or decoder is one more value here and one more case
  there);
- a format may also decode on the driver, in plain Python (``driver_op``, ``driver_map``)
  (cdc.engines.arrow.decode): those answer exactly what its Spark decoder answers, or
  raise ``Undecided`` when they cannot be sure of it (then Spark decodes);
- and, to decode many events at once on the driver, a format may say what the events of one
  shape look like (``driver_shape``: the ``Shape`` of the ev_data of one event, which
  matches every ev_data with the same columns in the same order and the same spelling):
  the events it matches (one regular expression over the Arrow column) are read column by
  column (``Shape.read``). An ev_data the shape's pattern does not match is decoded one by
  one (``driver_map``), so the shape only needs to be exact where it matches;
- formats never import Spark (the layers' contract); importing this module, and the format
  modules, needs no pyarrow either: it is imported inside the functions that use it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

    ArrowStrings = pa.Array | pa.ChunkedArray

KvMap = dict[str, str | None]


class Undecided(ValueError):
    """A driver-side decoder cannot be sure that its answer is the Spark decoder's (an event
    it does not decode, a form of a value it does not know): the table's events are decoded
    by Spark, which also quarantines the bad ones."""


@dataclass(frozen=True)
class StartsWith:
    """ev_type begins with ``prefix``."""

    prefix: str

    def arrow(self, ev_type: ArrowStrings) -> ArrowStrings:
        import pyarrow.compute as pc

        return pc.starts_with(ev_type, self.prefix)


@dataclass(frozen=True)
class Matches:
    """ev_type contains a match of ``regex`` (a pattern that RE2 and Java read alike)."""

    regex: str

    def arrow(self, ev_type: ArrowStrings) -> ArrowStrings:
        import pyarrow.compute as pc

        return pc.match_substring_regex(ev_type, self.regex)


@dataclass(frozen=True)
class OneOf:
    """ev_type is exactly one of ``values``."""

    values: tuple[str, ...]

    def arrow(self, ev_type: ArrowStrings) -> ArrowStrings:
        import pyarrow as pa
        import pyarrow.compute as pc

        return pc.is_in(ev_type, pa.array(self.values))


EvTypeShape = StartsWith | Matches | OneOf


@dataclass(frozen=True)
class FirstLetter:
    """The op (I, U, D) is the ev_type's first letter."""


@dataclass(frozen=True)
class JsonOp:
    """The op is the first letter of the JSON string at ``path`` in the ev_type (INSERT,
    UPDATE, DELETE), R where it is ``truncate``."""

    path: str = "$.op"
    truncate: str = "TRUNCATE"


OpRule = FirstLetter | JsonOp


@dataclass(frozen=True)
class JsonObject:
    """ev_data is a JSON object, decoded into name -> text: a string as its content, a bare
    value as its JSON text, null as null; the map is null when ev_data is not an object.
    Strings up to ``max_string_len`` characters."""

    max_string_len: int


@dataclass(frozen=True)
class UrlEncoded:
    """ev_data is name=value pairs separated by ``separator``, names and values url-decoded
    (``+`` a space, ``%XX`` a byte of UTF-8); a bare name maps to null."""

    separator: str = "&"
    equals: str = "="


JvmMap = JsonObject | UrlEncoded


def driver_first_letter(ev_type: str) -> str:
    """FirstLetter on the driver: the op of an ev_type its format's shape matched."""
    if ev_type[:1] not in ("I", "U", "D"):
        raise Undecided(f"ev_type {ev_type[:20]!r} does not start with an op")
    return ev_type[0]


def re2_literal(text: str) -> str:
    """text as an RE2 pattern that matches exactly it: letters, digits and non-ASCII as they
    are, every other character as a hex escape."""
    return "".join(
        ch if ch.isalnum() or not ch.isascii() else f"\\x{{{ord(ch):02x}}}" for ch in text
    )


@dataclass(frozen=True)
class Shape:
    """The ev_data of one shape: ``pattern`` (RE2, anchored) matches exactly the texts of
    this shape, with one capture group ``g<k>`` per column of ``names`` (in order); ``read``
    turns texts the pattern matches into one column of texts per name (null for NULL), as
    the format's ``driver_map`` gives them, raising ``Undecided`` where it cannot be
    sure.

    A typed shape reads some columns straight into their type: ``types`` holds per name
    its Spark type where ``read`` gives the column in that type's Arrow type (the pattern
    then admits only values in that type's forms, each read into the value the Arrow cast
    of its text makes), None where it gives texts; its ``read`` raises ``Undecided`` where
    the reader refuses a value (the untyped shape, whose pattern matches every text the
    typed one matches, decides then). ``typed`` makes the typed shape of an untyped one
    from the columns' Spark types (None: it has none)."""

    pattern: str
    names: tuple[str, ...]
    read: Callable[[ArrowStrings], list[pa.Array]]
    types: tuple[str | None, ...] = ()
    typed: Callable[[Mapping[str, str]], Shape | None] | None = None


def captured(
    ev_data: ArrowStrings, pattern: str, count: int, texts: Callable[[pa.Array], pa.Array]
) -> list[pa.Array]:
    """Shape.read by the pattern's capture groups ``g0`` .. ``g<count-1>``: each group's
    tokens made texts by ``texts`` (a general read, and a slow one: RE2 extracts
    submatches at several times the cost of a match)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    groups = pc.extract_regex(ev_data, pattern)
    if not isinstance(groups, pa.StructArray):
        groups = groups.combine_chunks()
    return [texts(groups.field(f"g{k}")) for k in range(count)]


@dataclass(frozen=True)
class Format:
    """One capture format, with PgQ's trigger of the same events."""

    name: str  # as `cdc attach --format` takes it
    pgq_trigger: str  # PgQ's trigger function writing the same events
    ev_type: EvTypeShape  # the ev_type of its row events (INSERT, UPDATE, DELETE)
    # every column in each event (less ignored ones); False: an UPDATE carries the changed
    # columns and the key, a DELETE the key only
    full_row: bool
    op: OpRule  # ev_type -> I, U, D or R
    truncate_type: str | None = None  # the ev_type of its TRUNCATE, when ``ev_type`` misses it
    jvm_map: JvmMap | None = None  # decoded in the JVM: ev_data -> map<string,string>
    # Python: (op, ev_data) -> column -> text, None when undecodable
    python_map: Callable[[str | None, str | None], KvMap | None] | None = None
    # on the driver, the same answers as ``op`` and the map (or Undecided): ev_type -> I, U,
    # D or R; (op, ev_data) -> column -> text. None: Spark decodes every event of the format
    driver_op: Callable[[str], str] | None = None
    driver_map: Callable[[str, str], KvMap] | None = None
    # on the driver, many events at once: one event's ev_data -> the Shape of the ev_data like
    # it, None when it has none (it is then decoded by driver_map); None: no shapes
    driver_shape: Callable[[str], Shape | None] | None = None

    def __post_init__(self) -> None:
        if (self.jvm_map is None) == (self.python_map is None):
            raise ValueError(f"format {self.name}: give exactly one of jvm_map and python_map")
