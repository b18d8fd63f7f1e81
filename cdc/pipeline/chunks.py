"""One chunk of a table's snapshot: the next rows by key, read in one short PostgreSQL
snapshot, as Spark rows typed like event values.

A chunk is keyset-paged: the rows whose key is after the last key copied, in key order, at
most ``rows`` of them (``(k1, k2) > (v1, v2) order by k1, k2 limit n``: a row comparison,
so composite keys and any orderable key type page the same way, in PostgreSQL's order and
collation; the primary key's index serves it). The last key is kept as the key columns'
text values and bound back as parameters cast to the columns' own types (by their catalog
names, as identifiers), so it round-trips exactly under the text settings below.

``ChunkReader`` opens a REPEATABLE READ, read-only transaction whose snapshot is the
chunk's ``S_c`` (its ``txid_snapshot`` and the server clock just after it was taken are
returned), plans the chunk (``plan``: how many rows, and keys that cut it into ranges of
equal row counts), and reads its rows as text: with COPY into Arrow on the driver, or with
Spark's JDBC source, one key range per partition read in parallel by the executors, each
importing ``S_c`` (``pg_export_snapshot``). Every one of those sessions runs in
cdc.pg.reading's settings, so that no code of the table's owner runs in it, and a table whose
row-level security applies to the reading role is refused (``RowSecurityRefused``), never
copied in part. ``typed`` casts the text as event values are
cast (cdc.engines.spark.decode), so a chunk row and an event row of the same data are equal in
Delta; a row with a value that does not cast carries the reason (it goes to the quarantine).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import psycopg
import pyarrow as pa
from psycopg import sql
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc.engines.spark import decode as spark_decode
from cdc.pg import copyreader, pgtypes, reading
from cdc.targets.table import quote

__all__ = ["TEXT_SETTINGS", "ChunkPlan", "ChunkReader", "typed"]

# the session settings under which values are read as text: those the events carry
TEXT_SETTINGS = (
    "set datestyle = 'ISO, YMD'; set timezone = 'UTC'; set intervalstyle = 'postgres';"
    " set bytea_output = 'hex'; set extra_float_digits = 1"
)

KEY_TYPES_SQL = """
select a.attname, tn.nspname, t.typname
  from pg_attribute a
  join pg_type t on t.oid = a.atttypid
  join pg_namespace tn on tn.oid = t.typnamespace
 where a.attrelid = (select c.oid from pg_class c join pg_namespace n on n.oid = c.relnamespace
                      where n.nspname = %s and c.relname = %s)
   and a.attnum > 0 and not a.attisdropped
"""

Key = tuple[str, ...]  # a key's columns' text values


@dataclass(frozen=True)
class ChunkPlan:
    """A chunk: its row count, and its ranges' upper keys (the last one is the chunk's last
    key); empty when no row is left."""

    rows: int
    bounds: tuple[Key, ...]

    @property
    def last_key(self) -> Key | None:
        return self.bounds[-1] if self.bounds else None

    def ranges(self, after: Key | None) -> list[tuple[Key | None, Key]]:
        """The (after, up to and including) key ranges that make up the chunk."""
        lows = [after, *self.bounds[:-1]]
        return list(zip(lows, self.bounds, strict=True))


class ChunkReader:
    """One chunk's transaction on its own connection (see the module's docstring)."""

    def __init__(self, dsn: str, schema: str, table: str, queue: str | None, jdbc: bool) -> None:
        self.schema, self.table = schema, table
        self.conn = psycopg.connect(dsn)
        try:
            self._begin(schema, table, queue, jdbc)
        except BaseException:
            self.conn.close()
            raise

    def _begin(self, schema: str, table: str, queue: str | None, jdbc: bool) -> None:
        self.conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        self.conn.read_only = True
        # S_c: taken by the transaction's first statement
        row = self.conn.execute(
            "select txid_current_snapshot()::text, txid_snapshot_xmax(txid_current_snapshot()),"
            " clock_timestamp()"
        ).fetchone()
        assert row is not None
        self.snapshot: str = row[0]
        self.xmax: int = int(row[1])
        self.snapshot_at: dt.datetime = row[2]
        self.export = (
            self.conn.execute("select pg_export_snapshot()").fetchone()[0] if jdbc else None
        )
        self.conn.execute(TEXT_SETTINGS)
        reading.prepare(self.conn)  # no code of the table's owner runs here (cdc.pg.reading)
        # the columns now (a column added or dropped since the last chunk is followed);
        # ConfigError when the table is gone
        self.columns = pgtypes.keyed_columns(
            self.conn, schema, table, queue, registry_required=True
        )
        reading.check(self.conn, schema, table)  # RowSecurityRefused: the table's failure
        self.by_output = reading.text_by_output(self.conn, schema, table)
        self.keys = [c for c in self.columns if c.is_key]
        types = {
            name: (nsp, typ) for name, nsp, typ in self.conn.execute(KEY_TYPES_SQL, (schema, table))
        }
        self.key_types = [sql.Identifier(*types[c.name]) for c in self.keys]

    def close(self) -> None:
        try:
            if not self.conn.closed:
                self.conn.rollback()
        except psycopg.OperationalError:
            pass  # the connection is gone already (the error that ended the chunk says why)
        finally:
            self.conn.close()

    def __enter__(self) -> ChunkReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ SQL pieces

    @property
    def _relation(self) -> sql.Composed:
        return sql.SQL("{}.{}").format(sql.Identifier(self.schema), sql.Identifier(self.table))

    @property
    def _key_list(self) -> sql.Composed:
        return sql.SQL(", ").join(sql.Identifier(c.name) for c in self.keys)

    @property
    def _jdbc_keys(self) -> sql.Composed:
        """The key columns as the JDBC subquery names them (its other columns are text)."""
        return sql.SQL(", ").join(sql.Identifier(_jdbc_key(i)) for i in range(len(self.keys)))

    def _range(
        self, after: Key | None, upto: Key | None, literal: bool, keys: sql.Composable | None = None
    ) -> sql.Composable:
        return key_range(keys or self._key_list, self.key_types, after, upto, literal)

    def _text(self, column: pgtypes.Column) -> sql.Composable:
        """A column's value as text: ``::text``, or its type's output where a user's function
        makes that cast (cdc.pg.reading)."""
        ident = sql.Identifier(column.name)
        if column.name in self.by_output:
            return reading.output_text(ident)
        return sql.SQL("{}::text").format(ident)

    def _text_select(self, where: sql.Composable, with_keys: bool = False) -> sql.Composed:
        cols = [
            sql.SQL("{} as {}").format(self._text(c), sql.Identifier(c.name)) for c in self.columns
        ]
        if with_keys:  # the keys as they are, for the JDBC partitions' range predicates
            cols += [
                sql.SQL("{} as {}").format(sql.Identifier(c.name), sql.Identifier(_jdbc_key(i)))
                for i, c in enumerate(self.keys)
            ]
        return sql.SQL("select {} from {} where {}").format(
            sql.SQL(", ").join(cols), self._relation, where
        )

    # ------------------------------------------------------------------ the chunk

    def plan(
        self, after: Key | None, rows: int, parts: int = 1, expected: int | None = None
    ) -> ChunkPlan:
        """The next chunk after the key (from the start: None): at most rows rows, cut into
        at most parts ranges of about equal row counts (of expected rows, when the chunk
        is known to be smaller than rows: the whole table)."""
        step = max(1, -(-min(rows, expected or rows) // max(1, parts)))
        texts = sql.SQL(", ").join(self._text(c) for c in self.keys)
        where = self._range(after, None, literal=False)
        query = sql.SQL(
            "select rn, {texts} from (select rn, {keys}, lead(rn) over (order by rn) as nxt"
            " from (select row_number() over (order by {keys}) as rn, {keys} from {rel}"
            " where {where} order by {keys} limit %s) i) j"
            " where rn %% %s = 0 or nxt is null order by rn"
        ).format(texts=texts, keys=self._key_list, rel=self._relation, where=where)
        params = [*(after or ()), rows, step]
        found = self.conn.execute(query, params).fetchall()
        if not found:
            return ChunkPlan(0, ())
        return ChunkPlan(int(found[-1][0]), tuple(tuple(r[1:]) for r in found))

    def estimate(self) -> int:
        """The table's rows as the planner estimates them (pg_class.reltuples, summed over a
        partitioned table's partitions); a count when it was never analysed."""
        query = sql.SQL(
            "select sum(greatest(c.reltuples, 0))::bigint,"
            " bool_and(c.reltuples < 0) filter (where c.relkind <> 'p')"
            " from pg_class c where c.oid = {rel}::regclass"
            " or c.oid in (select inhrelid from pg_partition_tree({rel}::regclass) p"
            " join pg_inherits on inhrelid = p.relid)"
        ).format(rel=sql.Literal(self._relation.as_string(self.conn)))
        total, unknown = self.conn.execute(query).fetchone()
        if unknown or not total:
            count = sql.SQL("select count(*) from {}").format(self._relation)
            return int(self.conn.execute(count).fetchone()[0])
        return int(total)

    def read_arrow(self, after: Key | None, plan: ChunkPlan) -> pa.Table | None:
        """The chunk's rows as text, with COPY on the driver, into Arrow (None: no row)."""
        return self._copy(self._text_select(self._range(after, plan.last_key, literal=True)))

    def _copy(self, select: sql.Composable) -> pa.Table | None:
        """A select of the text columns, with COPY into Arrow (None: no row)."""
        query = sql.SQL("copy ({}) to stdout with (format csv)").format(select)
        schema = pa.schema([(c.name, pa.string()) for c in self.columns])
        return copyreader.read_table(self.conn, query, schema)

    def read_next_arrow(self, after: Key | None, rows: int) -> tuple[ChunkPlan, pa.Table | None]:
        """The next chunk (at most rows rows after the key, in key order) read with COPY on
        the driver into Arrow, and its plan taken from the rows read (no plan query: the
        chunk is one range, its last key the last row's key columns as text)."""
        order = sql.SQL(", ").join(
            sql.SQL("{}.{}").format(self._relation, sql.Identifier(c.name)) for c in self.keys
        )
        select = self._text_select(self._range(after, None, literal=True))
        limited = sql.SQL("{} order by {} limit {}").format(select, order, sql.Literal(rows))
        data = self._copy(limited)
        if data is None:
            return ChunkPlan(0, ()), None
        last = tuple(data.column(c.name)[-1].as_py() for c in self.keys)
        return ChunkPlan(data.num_rows, (last,)), data

    def frame(self, spark: SparkSession, data: pa.Table | None) -> DataFrame:
        """read_arrow's rows as a Spark frame."""
        if data is None:
            return spark.createDataFrame(
                [], ", ".join(f"{quote(c.name)} string" for c in self.columns)
            )
        return spark.createDataFrame(data)

    def read_copy(self, spark: SparkSession, after: Key | None, plan: ChunkPlan) -> DataFrame:
        """The chunk's rows as text, with COPY on the driver."""
        return self.frame(spark, self.read_arrow(after, plan))

    def read_jdbc(
        self,
        spark: SparkSession,
        after: Key | None,
        plan: ChunkPlan,
        url: str,
        props: dict[str, str],
    ) -> DataFrame:
        """The chunk's rows as text, with Spark's JDBC source: one key range per partition,
        every partition in the chunk's snapshot."""
        assert self.export is not None, "the reader was opened without a snapshot to export"
        init = (
            "set transaction isolation level repeatable read read only;"
            f" set transaction snapshot '{self.export}'; {TEXT_SETTINGS}; {reading.SETTINGS}"
        )
        options = {**props, "sessionInitStatement": init, "fetchsize": "10000"}
        select = self._text_select(sql.SQL("true"), with_keys=True)
        subquery = f"({select.as_string(self.conn)}) s"
        predicates = [
            self._range(lo, hi, True, self._jdbc_keys).as_string(self.conn)
            for lo, hi in plan.ranges(after)
        ]
        frame = spark.read.jdbc(url, subquery, predicates=predicates, properties=options)
        return frame.drop(*[_jdbc_key(i) for i in range(len(self.keys))])


def _row(key: Key, types: list[sql.Composable], literal: bool) -> sql.Composed:
    """``(v1::t1, v2::t2)``: a key's values cast to the key columns' types, as parameters
    (or literals, for the JDBC partitions' predicates)."""
    values = [
        sql.SQL("{}::{}").format(sql.Literal(v) if literal else sql.Placeholder(), t)
        for v, t in zip(key, types, strict=True)
    ]
    return sql.SQL("({})").format(sql.SQL(", ").join(values))


def key_range(
    keys: sql.Composable,
    types: list[sql.Composable],
    after: Key | None,
    upto: Key | None,
    literal: bool,
) -> sql.Composable:
    """The condition of the keys after one key and up to another (either may be None)."""
    parts: list[sql.Composable] = []
    if after is not None:
        parts.append(sql.SQL("({}) > {}").format(keys, _row(after, types, literal)))
    if upto is not None:
        parts.append(sql.SQL("({}) <= {}").format(keys, _row(upto, types, literal)))
    return sql.SQL(" and ").join(parts) if parts else sql.SQL("true")


def _jdbc_key(index: int) -> str:
    return f"__cdc_key{index}"


def typed(raw: DataFrame, columns: list[pgtypes.Column]) -> DataFrame:
    """The columns cast from text as event values are, and the reason a row cannot be
    (``__reason``, with its text values as JSON in ``__raw``)."""
    casts = [
        spark_decode.cast_text(F.col(quote(c.name)), c.spark_type).alias(c.name) for c in columns
    ]
    failed = [
        F.when(F.col(quote(c.name)).isNotNull() & cast.isNull(), F.lit(c.name))
        for c, cast in zip(columns, casts, strict=True)
    ]
    reason = F.concat(
        F.lit("snapshot: value does not cast to the column type: "), F.concat_ws(", ", *failed)
    )
    any_failed = spark_decode.any_of([f.isNotNull() for f in failed])
    raw_json = F.to_json(F.struct(*[F.col(quote(c.name)) for c in columns]))
    return raw.select(
        *casts,
        F.when(any_failed, reason).alias("__reason"),
        F.when(any_failed, raw_json).alias("__raw"),
    )
