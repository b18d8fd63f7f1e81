"""A source table's schema against its Delta table, every batch, before its events are applied.

``reconcile`` looks at the source's columns (cdc.pg.pgtypes) and the target's schema and:

- refuses (``TableUnappliable``) two source columns whose names differ only in case: Delta
  column names are case-insensitive, so the target cannot hold both;
- renames a Delta column whose source column was renamed (told from a drop and an add by
  its number in the source's catalog), and reads the old name in events as the new
  (cdc.targets.schema_changes: ``Drift.renamed``);
- widens a Delta column whose source column was retyped to a type it widens to without
  loss (smallint -> int -> bigint, an integer to a decimal with as many integer digits or to
  double, float -> double, decimal(p,s) -> decimal(p+k1, s+k2) with k1 >= k2 >= 0, date ->
  timestamp_ntz) as the table's ``type_changes`` says (cdc.targets.schema_changes: the table
  rewritten with the new type in one commit, or ``ALTER TABLE ... ALTER COLUMN ... TYPE``
  with Delta's typeWidening feature);
- keeps any other retyped column at its Delta type, and checks each value: it is written
  only when it converts to the Delta type and back to the source's type unchanged (a string
  column takes the event's text as it is); otherwise the event goes to quarantine with the
  reason ("column x is int in Delta but string in the source: resync the table");
- quarantines an INSERT or UPDATE that carries a column the source no longer has (dropped
  while the event waited in the queue, or renamed before the target recorded its number):
  its value would otherwise be lost; the dropped column stays in the target;
- adds the columns the target lacks; when the source rows that existed before a column was
  added hold a value without any event (``ADD COLUMN ... DEFAULT`` with a default that is not
  volatile: PostgreSQL's missing value), the Delta rows get that value before the batch, and
  events written before the column existed (they do not carry it) are read with it. A
  column added with a volatile default, as an identity or a generated column, holds per-row
  values only the source knows: ``TableUnappliable`` asking for a resync when the target
  has rows;
- makes a Delta column nullable once it is no longer part of the source's key (the key
  moved, the column was dropped), and, when the key moved to other columns, checks that the
  Delta rows are unique and complete by the new key (else ``TableUnappliable``).

The backfill is two commits (the ALTER and an UPDATE); the target's property
``cdc.backfill`` records it as pending first, so a drain killed in between completes it.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field

import psycopg
from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc import formats
from cdc import rows as contract
from cdc.engines.spark.decode import cast_text
from cdc.engines.spark.fold import norm_numeric
from cdc.errors import TableUnappliable
from cdc.pg import pgarray, sqlfiles
from cdc.pg.pgtypes import Column
from cdc.rows import value
from cdc.targets import delta_table, mask_record, masking, schema_changes
from cdc.targets.kind import TargetKind
from cdc.targets.masking import Masking
from cdc.targets.table import TableRef, quote

log = logging.getLogger("cdc.schema_drift")

BACKFILL = "cdc.backfill"  # target property: {column: text} still to be filled in
KEY = "cdc.key"  # target property: the key columns, once the key moved
INTEGERS = {"byte": 3, "short": 5, "int": 10, "long": 20}  # integer digits
DECIMAL = re.compile(r"^decimal\((\d+),(\d+)\)$")


@dataclass(frozen=True)
class Fill:
    """What the rows that predate a column hold in it, per the source's catalog."""

    missing: dict[str, str] = field(default_factory=dict)  # column -> its missing value
    per_row: frozenset[str] = frozenset()  # columns whose old rows hold per-row values


@dataclass(frozen=True)
class Drift:
    """How a table's events are written to its target this batch.

    columns: the source columns with the Spark types their values are written as (the
    Delta column's type where it differs), as the target holds them (cdc.targets.masking:
    the excluded ones left out, a sha256 one a string); source_types: for those, the
    source's own type; missing: per column index, the text of the value events written
    before the column existed stand for; masking: the target's exclusions and masks, which
    the decoders apply (cdc.engines.*.decode); renamed: the name events written before a
    rename carry -> the column's name now (cdc.targets.schema_changes), which the decoders
    read an event's columns by first."""

    columns: list[Column]
    source_types: dict[int, str] = field(default_factory=dict)
    missing: dict[int, str] = field(default_factory=dict)
    masking: Masking | None = None
    renamed: dict[str, str] = field(default_factory=dict)

    def rewrite_kv(self, kv: SparkColumn) -> SparkColumn:
        """The event's column -> text map, its renamed columns under their names now,
        without the excluded columns (read as if the event did not carry them), with the
        missing value of each column that an INSERT or a full-row UPDATE (json, urlenc)
        lacks: such an event predates the column."""
        if self.renamed:
            kv = F.transform_keys(kv, self._new_name)
        if self.masking is not None and self.masking.exclude:
            excluded = "|".join(_java_regex(g) for g in self.masking.exclude)
            kv = F.map_filter(kv, lambda k, _: ~k.rlike(excluded))
        op, fmt = F.col("op"), F.col("fmt")
        full_row = (op == "I") | ((op == "U") & formats.full_row(fmt))
        for i, text in self.missing.items():
            name = self.columns[i].name
            kv = F.when(
                full_row & ~F.map_contains_key(kv, F.lit(name)),
                F.map_concat(kv, F.create_map(F.lit(name), F.lit(text))),
            ).otherwise(kv)
        return kv

    def _new_name(self, key: SparkColumn, _: SparkColumn) -> SparkColumn:
        items = iter(self.renamed.items())
        old, new = next(items)
        name = F.when(key == F.lit(old), F.lit(new))
        for old, new in items:
            name = name.when(key == F.lit(old), F.lit(new))
        return name.otherwise(key)

    def reason(self, kv: SparkColumn) -> SparkColumn:
        """Why an event cannot be written (null when it can): a column the source does not
        have, or a value that does not fit its Delta column exactly."""
        op = F.col("op")
        names = F.array(*[F.lit(c.name) for c in self.columns])
        unknown = F.array_sort(F.array_except(F.map_keys(kv), names))
        reason = F.when(
            op.isin("I", "U") & (F.size(unknown) > 0),
            F.concat(
                F.lit("column(s) "),
                F.array_join(unknown, ", "),
                F.lit(
                    " not in the source table (renamed or dropped while the event waited in"
                    " the queue): resync the table"
                ),
            ),
        )
        for i, source_type in self.source_types.items():
            c = self.columns[i]
            if c.spark_type == "string":
                continue  # the event's text, as it is
            raw = kv.getItem(c.name)
            typed = cast_text(raw, source_type)
            slot = F.col(value(i))
            fits = (
                slot.isNotNull() & typed.isNotNull() & slot.try_cast(source_type).eqNullSafe(typed)
            )
            reason = reason.when(
                op.isin("I", "U") & raw.isNotNull() & ~fits,
                F.lit(
                    f"column {c.name} is {c.spark_type} in Delta but {source_type} in the"
                    " source, and this value does not fit the Delta column: resync the table"
                ),
            )
        return reason


def canonical(delta_type: str) -> str:
    """A Spark type's simple string in cdc.pg.pgtypes' words (smallint -> short, ...)."""
    out = re.sub(r"\bsmallint\b", "short", delta_type)
    out = re.sub(r"\btinyint\b", "byte", out)
    return re.sub(r"\bbigint\b", "long", out)


def widens(old: str, new: str) -> bool:
    """Whether Delta's type widening turns a column of type old into new without changing
    any value (PostgreSQL's conversion of the same retype gives the same values)."""
    decimal_new = DECIMAL.match(new)
    if old in INTEGERS:
        if new in INTEGERS:
            return INTEGERS[new] > INTEGERS[old]
        if new == "double":
            return old != "long"
        if decimal_new:
            precision, scale = int(decimal_new[1]), int(decimal_new[2])
            return precision - scale >= INTEGERS[old]
        return False
    decimal_old = DECIMAL.match(old)
    if decimal_old and decimal_new:
        p1, s1, p2, s2 = (int(x) for x in (*decimal_old.groups(), *decimal_new.groups()))
        return s2 >= s1 and p2 - s2 >= p1 - s1
    return (old, new) in {("float", "double"), ("date", "timestamp_ntz")}


def case_clash(columns: list[Column]) -> list[str]:
    """The source column names that another one equals but for case."""
    seen: dict[str, list[str]] = {}
    for c in columns:
        seen.setdefault(c.name.lower(), []).append(c.name)
    return [n for names in seen.values() if len(names) > 1 for n in names]


def fill_of(conn: psycopg.Connection, schema: str, table: str) -> Fill:
    """The source catalog's account of the rows that predate each column."""
    args = {"schema": schema, "table": table}
    rows = conn.execute(sqlfiles.query("column_fill"), args).fetchall()
    missing: dict[str, str] = {}
    per_row = set()
    for name, missing_text, own in rows:
        if own:
            per_row.add(name)
        elif missing_text is not None:
            try:
                elements = pgarray.parse(missing_text)
            except pgarray.ArrayLiteralError:
                per_row.add(name)  # not readable here: better a resync than a guess
                continue
            if elements and elements[0] is not None:
                missing[name] = elements[0]
    return Fill(missing, frozenset(per_row))


def reconcile(
    spark: SparkSession,
    conn: psycopg.Connection | None,
    target: TableRef,
    source: tuple[str, str],
    columns: list[Column],
    kind: TargetKind,
    fill: Fill | None = None,
    masks: Masking | None = None,
) -> Drift:
    """Brings the target's schema in line with the source's columns where that is lossless,
    and says how this batch's events are written (see the module docstring). Raises
    TableUnappliable when the target cannot follow the source. fill: the source's, read
    before (``fill_of``); without it, read here with conn. masks: the target's exclusions and
    masks over these columns (cdc.targets.masking.resolve); without it, resolved here from
    the kind's options. The target is made and compared with the columns it holds (the
    excluded ones left out, a sha256 one a string), and its recorded masking followed
    (cdc.targets.mask_record)."""
    name = f"{source[0]}.{source[1]}"
    if masks is None:
        masks = masking.resolve(kind.options, columns, name, listed=False)
    catalog = columns  # the source's, numbered (cdc.targets.schema_changes)
    columns = list(masks.columns)
    clash = case_clash(columns)
    if clash:
        raise TableUnappliable(
            name,
            f"columns {', '.join(clash)} differ only in case, and Delta column names are"
            " case-insensitive: rename one of them in the source, or leave all but one out"
            " of the capture (cdc attach --ignore), then resync the table",
        )
    if not kind.holds_rows:
        fill = Fill()
    elif fill is None:
        assert conn is not None, "reconcile needs a connection or the fill"
        fill = fill_of(conn, *source)
    if not delta_table.exists(spark, target):
        kind.ensure(spark, target, columns)
        if masks.active:
            mask_record.record(spark, target, masks)
        schema_changes.record(spark, target, catalog, columns, {}, None)
        return Drift(columns, missing=_missing(columns, fill), masking=_active(masks))
    props = delta_table.properties(spark, target)
    mask_record.follow(spark, target, name, masks, props)
    # the file's properties (and the change data feed), set again where it changed them
    wanted = dict(kind.layout(target, columns).properties)
    delta_table.keep_properties(spark, target, wanted, props)
    if props.get(BACKFILL):
        _finish_backfill(spark, target, json.loads(props[BACKFILL]))
    if props.get(delta_table.REWRITE_PENDING):
        delta_table.finish_rewrite(spark, target, json.loads(props[delta_table.REWRITE_PENDING]))
    fields = {f.name.lower(): f for f in delta_table.schema(spark, target).fields}
    # the kind's own columns, for options given to an existing target (soft deletes)
    kind.conform(spark, target, columns, set(fields), props)
    renamed = schema_changes.follow_renames(
        spark, target, name, catalog, columns, fields, props, masks
    )
    widened: dict[str, tuple[str, str]] = {}  # Delta column -> (its type, the source's)
    written: list[Column] = []
    source_types: dict[int, str] = {}
    for i, c in enumerate(columns):
        found = fields.get(c.name.lower())
        delta_type = canonical(found.dataType.simpleString()) if found else c.spark_type
        if found and delta_type != c.spark_type and widens(delta_type, c.spark_type):
            widened[found.name] = (delta_type, c.spark_type)
            delta_type = c.spark_type
        if delta_type != c.spark_type:
            source_types[i] = c.spark_type
            log.warning(
                "%s: column %s is %s in Delta but %s in the source: values that do not fit"
                " go to quarantine",
                name, c.name, delta_type, c.spark_type,
            )  # fmt: skip
        written.append(Column(c.name, c.pg_type, delta_type, c.is_key))
    # a rewrite leaves every column nullable: the key its NOT NULL columns say is recorded
    key = [f.name for f in fields.values() if not f.nullable] if not props.get(KEY) else []
    before = {KEY: json.dumps(key)} if key and kind.holds_rows else {}
    schema_changes.retype(spark, target, name, widened, kind.options, props, before)
    added = [c for c in columns if c.name.lower() not in fields]
    if added and kind.holds_rows:
        _add_columns(spark, target, name, added, fill, masks)
    elif added:
        kind.ensure(spark, target, columns)
    if kind.holds_rows:
        recorded = props.get(KEY)  # its columns under their names now
        if recorded and renamed:
            recorded = json.dumps([renamed.get(k, k) for k in json.loads(recorded)])
        _follow_key(spark, target, name, written, fields, recorded)
    schema_changes.record(spark, target, catalog, columns, renamed, props)
    return Drift(written, source_types, _missing(columns, fill), _active(masks), renamed)


def _java_regex(glob: str) -> str:
    """A column glob (cdc.globs) as an anchored Java regular expression (Spark's rlike)."""
    body = "".join(
        ".*" if ch == "*" else "." if ch == "?" else ch if ch.isalnum() else f"\\x{{{ord(ch):x}}}"
        for ch in glob
    )
    return f"(?s:\\A{body}\\z)"


def _active(masks: Masking) -> Masking | None:
    return masks if masks.active else None


def _missing(columns: list[Column], fill: Fill) -> dict[int, str]:
    return {i: fill.missing[c.name] for i, c in enumerate(columns) if c.name in fill.missing}


def _has_rows(spark: SparkSession, target: TableRef) -> bool:
    return bool(delta_table.read(spark, target).limit(1).count())


def _add_columns(
    spark: SparkSession,
    target: TableRef,
    name: str,
    added: list[Column],
    fill: Fill,
    masks: Masking | None = None,
) -> None:
    """Adds columns to a mirror; the rows it has get each column's missing value (masked
    as the target masks the column: never in clear, not even in the pending property)."""
    pending: dict[str, str] = {}
    if _has_rows(spark, target):
        per_row = [c.name for c in added if c.name in fill.per_row]
        if per_row:
            raise TableUnappliable(
                name,
                f"column(s) {', '.join(per_row)} were added with a volatile default (or as"
                " identity or generated columns): the rows that existed before hold values"
                " only the source knows; resync the table",
            )
        pending = {c.name: fill.missing[c.name] for c in added if c.name in fill.missing}
        for column, text in list(pending.items()):
            mask = masks.of(column) if masks is not None else None
            if masks is None or mask is None:
                continue
            hidden = masks.value(text, mask)
            if hidden is None:
                del pending[column]  # masked with null: NULL is the column's value
            else:
                pending[column] = hidden
    if pending:
        delta_table.set_properties(spark, target, {BACKFILL: json.dumps(pending)})
    comments = {c.name: c.comment for c in added if c.comment}
    delta_table.add_columns(spark, target, [(c.name, c.spark_type) for c in added], comments)
    if pending:
        _finish_backfill(spark, target, pending)


def _finish_backfill(spark: SparkSession, target: TableRef, fills: dict[str, str]) -> None:
    """Fills in the columns the target's cdc.backfill property names (rows that are null
    there predate the column: no event has been applied to it yet), then drops the mark."""
    types = {f.name: f.dataType.simpleString() for f in delta_table.schema(spark, target)}
    table = delta_table.spark_table(spark, target)
    for column, text in fills.items():
        if column not in types:
            continue
        table.update(
            F.col(quote(column)).isNull(),
            {quote(column): cast_text(F.lit(text), canonical(types[column]))},
        )
    delta_table.unset_property(spark, target, BACKFILL)
    log.info("%s: existing rows given the default of %s", target.location, ", ".join(fills))


def _follow_key(
    spark: SparkSession,
    target: TableRef,
    name: str,
    columns: list[Column],
    fields: dict,
    recorded: str | None,
) -> None:
    """Makes non-key columns nullable; after a key change, checks the rows by the new key."""
    key = [c.name for c in columns if c.is_key]
    old_key = (
        json.loads(recorded) if recorded else [f.name for f in fields.values() if not f.nullable]
    )
    if sorted(k.lower() for k in old_key) != sorted(k.lower() for k in key):
        _check_new_key(spark, target, name, columns, old_key)
        delta_table.set_properties(spark, target, {KEY: json.dumps(key)})
    lowered = {k.lower() for k in key}
    for f in fields.values():  # (columns added this batch are nullable)
        if not f.nullable and f.name.lower() not in lowered:
            delta_table.drop_not_null(spark, target, f.name)
            log.info("%s: column %s is no longer a key: nullable", target.location, f.name)


def _check_new_key(
    spark: SparkSession,
    target: TableRef,
    name: str,
    columns: list[Column],
    old_key: list[str],
) -> None:
    """The target's rows must be complete and unique by the new key to be matched by it."""
    keys = [c for c in columns if c.is_key]
    frame: DataFrame = delta_table.read(spark, target)
    exprs = [
        norm_numeric(F.col(quote(c.name))) if contract.is_numeric_text(c) else F.col(quote(c.name))
        for c in keys
    ]
    incomplete = frame.where(F.greatest(*[e.isNull() for e in exprs], F.lit(False)))
    total = frame.count()
    if total and (incomplete.limit(1).count() or frame.select(*exprs).distinct().count() != total):
        raise TableUnappliable(
            name,
            f"its primary key changed from ({', '.join(old_key)}) to"
            f" ({', '.join(c.name for c in keys)}), and the Delta rows are not unique and"
            " complete by the new key: resync the table",
        )
