"""A batch's events decoded on the driver, over the Arrow rows COPY read: the typed rows
cdc.engines.spark.decode would make in Spark, or no answer.

A Spark decode costs a few Spark jobs whatever its size (a second or more on two cores), and
more per event than Arrow's kernels. The events of a batch read with COPY are on the driver
already, so they are decoded there (cdc.pipeline.apply: small batches everywhere, every such
batch on a local master):

- events of one shape (their format's ``driver_shape``: the same names in the same order,
  spelled as the trigger spells them) are matched by one regular expression over the Arrow
  column and read column by column (json by Arrow's JSON reader, urlenc split at ``&``), up
  to MAX_SHAPES shapes per table and batch; where one shape holds every event, the events
  are read as they are (no copy);
- a shape is typed first where its format can (``Shape.typed``: json's integers, booleans,
  decimals and timestamps, cdc.casts' ``arrow_json``): its pattern admits in those columns
  only the JSON form of a text in the type's forms, which Arrow's JSON reader reads straight
  into the value the Arrow cast gives that text; only the checks of the values themselves
  remain (``checked``: years 1-9999 in UTC). Events the typed pattern refuses, and a
  typed read the reader refuses (an integer past its bits, 30 February), take the untyped
  shape;
- the others, at most ONE_BY_ONE, one by one: their format's ``driver_op`` and
  ``driver_map`` make the column -> text map;
- ``cast_column`` (cdc.engines.arrow.casts, rendered from cdc.casts) makes each column of
  texts the values Spark's cast (cdc.engines.spark.decode.cast_text) makes: one Arrow cast
  where the type has one, every text then in the forms PostgreSQL writes, else value by
  value (``cast``).

Only where the answer is certainly Spark's. Anything else is undecided, and the whole table
is decoded by Spark as before (which quarantines the bad events):

- a bad event of any kind (unknown type, undecodable payload, a missing key, a column the
  source lacks, a value that does not cast), a TRUNCATE and the marker of a table re-created
  under its name (formats.RECREATED), which empty the target (the driver's path takes none);
- more than ONE_BY_ONE events of no shape (sql events, which sqlglot parses one by one);
- a target column whose type differs from the source's (schema_drift's source_types);
- a value in a form PostgreSQL does not write (``" 12"``, ``"1e5"`` for an integer,
  ``"yes"`` for a boolean), a date or timestamp outside years 1-9999 or BC, an offset with
  seconds, a decimal with more digits than its type keeps, a float4 text halfway between
  two floats: each would need Spark's own rules for the exact answer.

tests/spark/test_driver_decode.py holds every answer equal to Spark's over the type sweep
and hostile events; tests/unit/test_driver_shapes.py and test_driver_typed_shapes.py every
shape's answer equal to the one-by-one decoder's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cdc import formats
from cdc.engines.arrow import masking as arrow_masking
from cdc.engines.arrow.casts import arrow_type, cast, cast_column, cast_rows, caster, checked
from cdc.formats.spec import Shape, Undecided
from cdc.pg.pgtypes import Column
from cdc.rows import meta, present, value

if TYPE_CHECKING:
    from cdc.targets.schema_drift import Drift

# the casts (cdc.engines.arrow.casts) are importable from here too
__all__ = ["Undecided", "arrow_type", "cast", "cast_column", "cast_rows", "caster", "decode"]

log = logging.getLogger("cdc.decode")

MAX_SHAPES = 8  # shapes tried per table and batch; events of other shapes decode one by one
# events decoded one by one at most per table and batch (sqlglot parses a sql event in about
# 100 µs: Spark decodes more at once)
ONE_BY_ONE = 10_000


def _formats(ev_types: pa.Array | pa.ChunkedArray) -> list[formats.Format | None]:
    """Each event's format, the first whose ev_type shape matches (registry order); None
    for no match."""
    found: list[formats.Format | None] = [None] * len(ev_types)
    for fmt in reversed(formats.FORMATS):
        for row, hit in enumerate(fmt.ev_type.arrow(ev_types).to_pylist()):
            if hit:
                found[row] = fmt
    return found


def _kv(fmt: formats.Format | None, ev_type: str | None, ev_data: str | None) -> tuple[str, dict]:
    """(op, column -> text) of one row event."""
    op = _op(fmt, ev_type)
    if ev_data is None:
        raise Undecided(f"op {op} without ev_data")
    assert fmt is not None and fmt.driver_map is not None
    return op, fmt.driver_map(op, ev_data)


def _op(fmt: formats.Format | None, ev_type: str | None) -> str:
    """The op (I, U, D) of one row event's ev_type, in a format that decodes on the driver."""
    if ev_type is None or ev_type in formats.TRUNCATE_TYPES or ev_type == formats.RECREATED:
        raise Undecided("a TRUNCATE, a table re-created, or an event without a type")
    if fmt is None or fmt.driver_op is None or fmt.driver_map is None:
        raise Undecided(f"ev_type {ev_type[:40]!r}: no driver-side decoder")
    op = fmt.driver_op(ev_type)
    if op not in ("I", "U", "D"):
        raise Undecided(f"op {op} of ev_type {ev_type[:40]!r}")
    return op


def decode(
    raw: pa.Table, columns: list[Column], drift: Drift | None = None, tick_id: int | None = None
) -> pa.Table | None:
    """The typed rows of one table's raw events (cdc.pg.batch.EVENT_SCHEMA) of the batch
    ending at tick_id: meta op, ev_id, ev_txid, ev_time and tick_id, then value(i) and
    present(i) per column, as the Spark decoder's rows hold them (cdc.rows); None when any
    answer is undecided (see the module docstring). The drift's masking
    (cdc.targets.masking) applies: excluded columns are read as absent, a masked column is
    decoded in its source's type, then masked (cdc.engines.arrow.masking)."""
    masks = drift.masking if drift is not None else None
    try:
        if masks is None:
            return _decode(raw, columns, drift, tick_id)
        rows = _decode(raw, masks.decoded(columns), drift, tick_id)
        return arrow_masking.decoded(rows, masks, columns)
    except Undecided as why:
        log.debug("decoded by Spark: %s", why)
        return None
    except pa.ArrowException as exc:  # a capacity limit (a column past 2 GB), say
        log.warning("decoded by Spark: Arrow could not decode on the driver: %s", exc)
        return None


def _ticks(rows: int, tick_id: int | None) -> pa.Array:
    """The batch's tick as the decoded rows' meta tick_id (null when not given)."""
    if tick_id is None:
        return pa.nulls(rows, pa.int64())
    return pa.array(np.full(rows, tick_id, dtype=np.int64), pa.int64())


def _decode(
    raw: pa.Table, columns: list[Column], drift: Drift | None, tick_id: int | None = None
) -> pa.Table:
    """Events of a shape its format knows (Format.driver_shape) decoded at once, shape by
    shape (at most MAX_SHAPES), the rest one by one (``_decode_each``)."""
    if drift is not None and drift.source_types:
        raise Undecided("a target column's type differs from the source's")
    if raw.num_rows == 0:
        return _decode_each(raw, columns, drift, tick_id)
    if raw.column("ev_data").null_count:
        raise Undecided("an event without ev_data")
    kinds, ops = _ops(raw.column("ev_type"))
    types = {c.name: c.spark_type for c in columns}
    # the names events written before a rename carry, read as the column's (Drift.renamed)
    for old, new in (drift.renamed if drift is not None else {}).items():
        if new in types:
            types[old] = types[new]
    excluded = drift.masking.excludes if drift is not None and drift.masking else None
    ev_data = raw.column("ev_data")
    todo = np.ones(raw.num_rows, dtype=bool)  # not decoded yet
    alone = np.zeros(raw.num_rows, dtype=bool)  # to be decoded one by one
    parts = []
    for _ in range(MAX_SHAPES):
        pending = np.flatnonzero(todo & ~alone)
        if not len(pending):
            break
        row = int(pending[0])
        fmt = formats.FORMATS[kinds[row]]
        found = _match(fmt, ev_data, row, todo & (kinds == kinds[row]), types, excluded)
        if found is None:  # no shape, or spelled otherwise than the shape spells it
            alone[row] = True
            continue
        shapes, same = found
        if same.all():  # one shape holds every event: no copy of them
            parts.append(_decode_shape(raw, ops, fmt, shapes, columns, drift, tick_id))
        else:
            chosen = pa.array(same)
            part = raw.filter(chosen)
            chosen_ops = ops.filter(chosen)
            parts.append(_decode_shape(part, chosen_ops, fmt, shapes, columns, drift, tick_id))
        todo &= ~same
    if todo.any():
        if todo.sum() > ONE_BY_ONE:
            raise Undecided(f"{todo.sum():,} events of no shape decoded at once")
        parts.append(_decode_each(raw.filter(pa.array(todo)), columns, drift, tick_id))
    if len(parts) == 1:
        return parts[0]
    return pa.concat_tables(parts).sort_by(meta("ev_id"))


def _match(
    fmt: formats.Format,
    ev_data: pa.ChunkedArray,
    row: int,
    candidates: np.ndarray,
    types: dict[str, str],
    excluded: Callable[[str], bool] | None = None,
) -> tuple[tuple[Shape, Shape], np.ndarray] | None:
    """The shape of event ``row``, typed (Shape.typed: columns read straight into their
    types) where that shape matches it, else untyped, with the candidates it matches (row
    among them); and the untyped shape (a typed shape's read may refuse); None when row
    has no shape its columns hold (or excluded ones, read as text and left), or matches
    none."""
    untyped = fmt.driver_shape(ev_data[row].as_py()) if fmt.driver_shape else None
    if untyped is None or not all(
        n in types or (excluded is not None and excluded(n)) for n in untyped.names
    ):
        return None
    typed = untyped.typed(types) if untyped.typed else None
    rows = np.flatnonzero(candidates)
    texts = ev_data if len(rows) == len(ev_data) else ev_data.take(rows)
    for shape in (typed, untyped):
        if shape is None:
            continue
        hits = pc.fill_null(pc.match_substring_regex(texts, shape.pattern), False)
        same = np.zeros(len(ev_data), dtype=bool)
        same[rows] = hits.to_numpy(zero_copy_only=False)
        if same[row]:
            return (shape, untyped), same
    return None


def _ops(ev_types: pa.ChunkedArray) -> tuple[np.ndarray, pa.Array]:
    """Per event, the position of its format in formats.FORMATS (a numpy array) and its op;
    Undecided when an event has no driver-side decoder, or is a TRUNCATE."""
    distinct = pc.unique(ev_types)
    found = _formats(distinct)
    ops = pa.array([_op(f, t) for f, t in zip(found, distinct.to_pylist(), strict=True)])
    where = pc.index_in(ev_types, distinct).to_numpy(zero_copy_only=False)
    kinds = np.array([formats.FORMATS.index(f) for f in found])  # type: ignore[arg-type]
    return kinds[where], ops.take(pa.array(where))


def _decode_shape(
    raw: pa.Table,
    ops: pa.Array,
    fmt: formats.Format,
    shapes: tuple[Shape, Shape],
    columns: list[Column],
    drift: Drift | None,
    tick_id: int | None = None,
) -> pa.Table:
    """Events whose ev_data all match the pattern of shapes[0] (typed or not), decoded
    column by column: by the untyped shapes[1] where the typed one's read refuses."""
    n = raw.num_rows
    shape, untyped = shapes
    try:
        read = shape.read(raw.column("ev_data"))
    except Undecided as why:
        if shape is untyped:
            raise
        log.debug("read as text: %s", why)
        shape, read = untyped, untyped.read(raw.column("ev_data"))
    renamed = drift.renamed if drift is not None else {}
    texts = {renamed.get(n, n): t for n, t in zip(shape.names, read, strict=True)}
    typed = {
        renamed.get(name, name)
        for name, kind in zip(shape.names, shape.types, strict=False)
        if kind
    }
    nowhere = pa.array(np.zeros(n, dtype=bool))
    present_in = dict.fromkeys(texts, pa.array(np.ones(n, dtype=bool)))
    filled = pc.equal(ops, "I")
    if fmt.full_row:
        filled = pc.or_(filled, pc.equal(ops, "U"))
    for i, text in (drift.missing if drift else {}).items():
        name = columns[i].name
        if name not in texts:
            texts[name] = pc.if_else(filled, pa.scalar(text, pa.string()), None)
            present_in[name] = filled
    for c in columns:
        if c.is_key and (c.name not in texts or texts[c.name].null_count):
            raise Undecided("an event without a value for a key column")
    out: dict[str, pa.Array | pa.ChunkedArray] = {
        meta("op"): ops,
        meta("ev_id"): raw.column("ev_id"),
        meta("ev_txid"): raw.column("ev_txid"),
        meta("ev_time"): raw.column("ev_time"),
        meta("tick_id"): _ticks(raw.num_rows, tick_id),
    }
    for i, c in enumerate(columns):
        if c.name in typed:  # read in its type (its pattern admitted only its forms)
            out[value(i)] = checked(texts[c.name], c.spark_type)
        elif c.name in texts:
            out[value(i)] = cast_column(texts[c.name], c.spark_type)
        else:
            out[value(i)] = pa.nulls(n, arrow_type(c.spark_type))
    for i, c in enumerate(columns):
        out[present(i)] = present_in.get(c.name, nowhere)
    return pa.table(out)


def _decode_each(
    raw: pa.Table, columns: list[Column], drift: Drift | None, tick_id: int | None = None
) -> pa.Table:
    """Events decoded one by one, by their format's driver_map."""
    names = [c.name for c in columns]
    known = set(names)
    masks = drift.masking if drift is not None else None
    excluded = masks.excludes if masks is not None and masks.exclude else None
    keys = [c.name for c in columns if c.is_key]
    missing = {names[i]: text for i, text in (drift.missing if drift else {}).items()}
    casts = [caster(c.spark_type) for c in columns]
    ops: list[str] = []
    values: list[list[Any]] = [[] for _ in columns]
    presence: list[list[bool]] = [[] for _ in columns]
    kinds = _formats(raw.column("ev_type"))
    rows = zip(
        kinds, raw.column("ev_type").to_pylist(), raw.column("ev_data").to_pylist(), strict=True
    )
    for fmt, ev_type, ev_data in rows:
        op, kv = _kv(fmt, ev_type, ev_data)
        if drift is not None and drift.renamed:
            kv = {drift.renamed.get(k, k): t for k, t in kv.items()}
        assert fmt is not None
        if missing and (op == "I" or (op == "U" and fmt.full_row)):
            kv = {**{n: t for n, t in missing.items() if n not in kv}, **kv}
        if any(kv.get(k) is None for k in keys):
            raise Undecided("an event without a value for a key column")
        if (
            op != "D"
            and not kv.keys() <= known
            and (excluded is None or not all(k in known or excluded(k) for k in kv))
        ):
            raise Undecided("a column the source does not have")
        ops.append(op)
        for i, name in enumerate(names):
            text = kv.get(name)
            values[i].append(None if text is None else casts[i](text))
            presence[i].append(name in kv)
    out: dict[str, pa.Array | pa.ChunkedArray] = {
        meta("op"): pa.array(ops, pa.string()),
        meta("ev_id"): raw.column("ev_id"),
        meta("ev_txid"): raw.column("ev_txid"),
        meta("ev_time"): raw.column("ev_time"),
        meta("tick_id"): _ticks(raw.num_rows, tick_id),
    }
    for i, c in enumerate(columns):
        out[value(i)] = pa.array(values[i], arrow_type(c.spark_type))
    for i in range(len(columns)):
        out[present(i)] = pa.array(presence[i], pa.bool_())
    return pa.table(out)
