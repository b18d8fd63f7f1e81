"""Source columns from PostgreSQL's catalog, and the Spark type each one becomes.

| PostgreSQL | Spark |
|---|---|
| int2 / int4 / int8 | short / int / long |
| numeric(p,s) with p <= 38 | decimal(p,s) |
| numeric without a precision (any scale), or p > 38 | string: its exact text |
| float4 / float8 | float / double |
| bool | boolean |
| date | date |
| timestamp | timestamp_ntz |
| timestamptz | timestamp (an instant, shown in the session time zone) |
| bytea | binary |
| arrays of the above | arrays (one-dimensional, lower bound 1; others are quarantined) |
| anything else: text, varchar, json, jsonb, uuid, enum, inet, time, interval ... | string |

Domains are mapped as their base type. box[] stays its text (box elements are separated by
';', and box is a string anyway).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import psycopg

from cdc.errors import ConfigError
from cdc.pg import sqlfiles

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger("cdc.pgtypes")
_warned: set[tuple[str, str]] = set()  # tables whose registry warning was logged

COLUMNS_SQL = """
select a.attname, a.attnum, a.attrelid::bigint,
       coalesce(nullif(bt.typbasetype, 0), a.atttypid)::regtype::text as base,
       case when coalesce(nullif(bt.typbasetype, 0), a.atttypid) = a.atttypid then a.atttypmod
            else bt.typtypmod end as typmod,
       coalesce(a.attnum = any (i.indkey), false) as is_key,
       col_description(a.attrelid, a.attnum) as comment
  from pg_attribute a
  join pg_type bt on bt.oid = a.atttypid
  left join pg_index i on i.indrelid = a.attrelid and i.indisprimary
 where a.attrelid = (select c.oid from pg_class c join pg_namespace n on n.oid = c.relnamespace
                      where n.nspname = %s and c.relname = %s)
   and a.attnum > 0 and not a.attisdropped
 order by a.attnum
"""

_SCALAR = {
    "smallint": "short",
    "integer": "int",
    "bigint": "long",
    "real": "float",
    "double precision": "double",
    "boolean": "boolean",
    "date": "date",
    "timestamp without time zone": "timestamp_ntz",
    "timestamp with time zone": "timestamp",
    "bytea": "binary",
}


# element types whose array literal separates elements with ';' (pg_type.typdelim)
SEMICOLON_DELIMITED = frozenset({"box"})
# PgQ's magic columns (_pgq_ev_type, _pgq_ev_data, _pgq_ev_extra1..4): they give fields of the
# event and are never in its payload, with PgQ's triggers and ours alike (docs/event-format.md)
MAGIC_COLUMN_PREFIX = "_pgq_ev_"


@dataclass(frozen=True)
class Column:
    name: str
    pg_type: str  # the base type as regtype text, "integer[]" for arrays
    spark_type: str  # a Spark SQL type name
    is_key: bool
    # where the catalog has it (columns()): the column's number in its table, which a RENAME
    # COLUMN keeps, and the table's oid (cdc.targets.schema_changes tells a renamed column
    # by them); not compared
    attnum: int | None = field(default=None, compare=False)
    relid: int | None = field(default=None, compare=False)
    # its comment (COMMENT ON COLUMN), which the target's column carries
    # (cdc.targets.layout); not compared
    comment: str | None = field(default=None, compare=False)


DECIMAL_TYPE = re.compile(r"decimal\((\d+),(\d+)\)")  # a Spark decimal type name


def arrow_type(spark_type: str) -> pa.DataType:
    """The Arrow type of a Spark type name (as Spark's ``toArrow`` gives it, timestamps in
    UTC); ValueError for one without a mapping here."""
    import pyarrow as pa

    if spark_type.startswith("array<"):
        return pa.list_(arrow_type(spark_type[len("array<") : -1]))
    decimal = DECIMAL_TYPE.fullmatch(spark_type)
    if decimal:
        return pa.decimal128(int(decimal[1]), int(decimal[2]))
    scalar = {
        "string": pa.string(),
        "short": pa.int16(),
        "int": pa.int32(),
        "long": pa.int64(),
        "float": pa.float32(),
        "double": pa.float64(),
        "boolean": pa.bool_(),
        "binary": pa.binary(),
        "date": pa.date32(),
        "timestamp_ntz": pa.timestamp("us"),
        "timestamp": pa.timestamp("us", tz="UTC"),
    }
    if spark_type not in scalar:
        raise ValueError(f"no Arrow type for Spark type {spark_type}")
    return scalar[spark_type]


def spark_type(pg_type: str, typmod: int) -> str:
    """The Spark SQL type for a PostgreSQL base type name (regtype text) and typmod."""
    if pg_type.endswith("[]"):
        if pg_type[:-2] in SEMICOLON_DELIMITED:
            return "string"  # the array's text: its elements are not separated by commas
        return f"array<{spark_type(pg_type[:-2], typmod)}>"
    if pg_type == "numeric":
        if typmod >= 4:
            precision, scale = ((typmod - 4) >> 16) & 0xFFFF, (typmod - 4) & 0xFFFF
            if 0 < precision <= 38 and 0 <= scale <= precision:
                return f"decimal({precision},{scale})"
        # no fixed scale (or more digits than Spark's decimal holds): any decimal type would
        # round some values, so the exact text is kept
        return "string"
    return _SCALAR.get(pg_type, "string")


def keyed_columns(
    conn: psycopg.Connection,
    schema: str,
    table: str,
    queue: str | None = None,
    *,
    registry_required: bool = False,
) -> list[Column]:
    """columns(), for a table the drain can fold: it must exist and have a key. The key is
    the primary key; without one, the pkey= columns it is captured with into queue (cdc
    attach --pkey), provided they are NOT NULL and unique (a unique index within them).

    Columns its capture into queue ignores (cdc attach --ignore), and PgQ's magic columns
    (``_pgq_ev_*``, never in an event), are left out: they are neither copied, nor compared,
    nor created in Delta. registry_required: ConfigError when
    this role cannot read the capture registry (snapshot and verify, which would otherwise
    copy or compare ignored columns); without it such a role gets every column."""
    cols = columns(conn, schema, table)
    if not cols:
        raise ConfigError(f"source table {schema}.{table} does not exist in the source database")
    options = capture_options(conn, schema, table, queue, registry_required) if queue else None
    ignored = set((options or {}).get("ignore") or ())
    cols = [c for c in cols if c.name not in ignored and not c.name.startswith(MAGIC_COLUMN_PREFIX)]
    if any(c.is_key for c in cols):
        return cols
    pkey = list((options or {}).get("pkey") or ()) or None
    if not pkey:
        raise ConfigError(
            f"source table {schema}.{table} has no primary key: the drain folds events by key."
            " Add a primary key, or capture the table with --pkey naming NOT NULL columns"
            " that a unique index covers"
        )
    args = {"schema": schema, "table": table, "key": pkey}
    nullable, unique = conn.execute(sqlfiles.query("capture_key_check"), args).fetchone()
    if nullable or not unique:
        why = f"{', '.join(nullable)} may be null" if nullable else "no unique index within them"
        raise ConfigError(
            f"source table {schema}.{table} has no primary key, and its capture key"
            f" ({', '.join(pkey)}) is not a key the drain can fold by: {why}."
            " Add a primary key, or make the columns NOT NULL with a unique index"
        )
    return [replace(c, is_key=c.name in pkey) for c in cols]


def capture_options(
    conn: psycopg.Connection, schema: str, table: str, queue: str, required: bool = False
) -> dict[str, Any] | None:
    """The options (ignore, pkey, ...) the table is captured with into queue, from the
    capture registry: None when it is not captured there, or when this role may read
    neither cdc.capture nor cdc.get_capture_info() (ConfigError instead when required)."""
    table_ok, info_ok = conn.execute(sqlfiles.query("capture_access")).fetchone()
    if not table_ok and not info_ok:
        if required:
            raise ConfigError(
                f"cannot read the capture registry (cdc.get_capture_info()) as role"
                f" {conn.info.parameter_status('session_authorization') or '?'}: it tells"
                f" which columns of {schema}.{table} its capture ignores (cdc attach"
                " --ignore), which must not be copied or compared; run this as a member of"
                " cdc_admin"
            )
        if (schema, table) not in _warned:
            _warned.add((schema, table))
            log.warning(
                "cannot read the capture registry: columns of %s.%s its capture ignores, if any,"
                " are created in Delta (and stay empty)",
                schema, table,
            )  # fmt: skip
        return None
    name = "capture_options_table" if table_ok else "capture_options_info"
    args = {"schema": schema, "table": table, "queue": queue}
    row = conn.execute(sqlfiles.query(name), args).fetchone()
    return dict(row[0]) if row and row[0] else None


def columns(conn: psycopg.Connection, schema: str, table: str) -> list[Column]:
    """The table's live columns in order, with their Spark types; the primary key marked.
    Empty when there is no such table."""
    rows = conn.execute(COLUMNS_SQL, (schema, table)).fetchall()
    return [
        Column(name, base, spark_type(base, typmod), bool(key), attnum, relid, comment)
        for name, attnum, relid, base, typmod, key, comment in rows
    ]


# One row per table of the list that exists: a digest of everything keyed_columns and the
# fill of its columns (cdc.targets.schema_drift.fill_of) read from the catalog: the live
# columns (name, position, type, domain base, typmod, NOT NULL, missing value, identity,
# generated, default), the indexes (primary, unique, valid, partial, expressions) and,
# {options}, the table's capture options.
FINGERPRINT_SQL = """
with wanted as (select * from unnest(%(schemas)s::text[], %(tables)s::text[]) as w(s, t))
select w.s, w.t, md5(concat_ws('|', c.oid::text,
         (select string_agg(concat_ws(',', a.attnum, a.attname, a.atttypid, a.atttypmod,
                                      a.attnotnull, a.atthasmissing, a.attmissingval::text,
                                      a.attidentity, a.attgenerated, bt.typbasetype,
                                      bt.typtypmod, d.adbin::text), ';' order by a.attnum)
            from pg_attribute a
            join pg_type bt on bt.oid = a.atttypid
            left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
           where a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped),
         (select string_agg(concat_ws(',', i.indexrelid, i.indkey::text, i.indnkeyatts,
                                      i.indisprimary, i.indisunique, i.indisvalid,
                                      i.indpred is null, i.indexprs is null), ';'
                            order by i.indexrelid)
            from pg_index i where i.indrelid = c.oid),
         {options}))
  from wanted w
  join pg_namespace n on n.nspname = w.s
  join pg_class c on c.relnamespace = n.oid and c.relname = w.t
"""
_OPTIONS = {
    "table": "(select p.cap_options::text from cdc.capture p"
    " where p.cap_table = c.oid and p.cap_queue = %(queue)s)",
    "info": "(select p.options::text from cdc.get_capture_info() p"
    " where p.table_name = format('%%I.%%I', w.s, w.t) and p.queue_name = %(queue)s)",
    "none": "''",
}


def fingerprints(
    conn: psycopg.Connection, tables: list[tuple[str, str]], queue: str | None
) -> dict[tuple[str, str], str]:
    """A digest per (schema, table) of what keyed_columns (and the fill of its columns) read,
    in one query for all the tables: equal digests, equal answers. A table that does not
    exist has none. Captured into queue: the capture options count too (when this role may
    read them)."""
    if not tables:
        return {}
    how = "none"
    if queue is not None:
        table_ok, info_ok = conn.execute(sqlfiles.query("capture_access")).fetchone()
        how = "table" if table_ok else "info" if info_ok else "none"
    query = FINGERPRINT_SQL.format(options=_OPTIONS[how])
    args = {"schemas": [s for s, _ in tables], "tables": [t for _, t in tables], "queue": queue}
    return {(s, t): digest for s, t, digest in conn.execute(query, args).fetchall()}
