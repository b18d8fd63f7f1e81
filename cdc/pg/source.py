"""The drain's side of the queue: ticks, batches and events, for our engine or a real PgQ.

Both speak the same functions (``ticker``, ``force_tick``, ``register_consumer``,
``next_batch_custom``, ``get_batch_events``, ``finish_batch``) in their own schema, ``cdc``
or ``pgq``; the schema is always passed as an identifier. Events are read with COPY into
Arrow record batches of bounded size.
"""

from __future__ import annotations

import io
import itertools
import logging
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.csv as pacsv
from psycopg import sql

from cdc import errors
from cdc.config import Source, TableMap

log = logging.getLogger("cdc.source")

EVENT_SCHEMA = pa.schema(
    [
        ("ev_id", pa.int64()),
        ("ev_time", pa.timestamp("us", tz="UTC")),
        ("ev_txid", pa.int64()),
        ("ev_retry", pa.int32()),
        ("ev_type", pa.string()),
        ("ev_data", pa.string()),
        ("ev_extra1", pa.string()),
        ("ev_extra2", pa.string()),
        ("ev_extra3", pa.string()),
        ("ev_extra4", pa.string()),
    ]
)

# ev_time comes as UTC without an offset, which Arrow's parser reads as is
_CSV_SCHEMA = EVENT_SCHEMA.set(1, pa.field("ev_time", pa.timestamp("us")))
CSV_BLOCK = 16 << 20  # bytes of CSV parsed at a time
MAX_CSV_BLOCK = (1 << 31) - 1  # Arrow's largest block: holds a 1 GB value, quoted


class _CopyStream(io.RawIOBase):
    """A COPY TO STDOUT as a readable binary stream, for Arrow's CSV reader."""

    def __init__(self, copy: psycopg.Copy) -> None:
        self._copy = copy
        self._pending = memoryview(b"")
        self._done = False

    def readable(self) -> bool:
        return True

    def peek(self) -> bool:
        """Whether any byte comes (reads the first chunk, which read() then returns)."""
        if not self._pending and not self._done:
            chunk = self._copy.read()
            if chunk:
                self._pending = memoryview(bytes(chunk))
            else:
                self._done = True
        return bool(self._pending)

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        filled = 0
        while filled < len(view):
            if not self._pending:
                if self._done:
                    break
                chunk = self._copy.read()
                if not chunk:
                    self._done = True
                    break
                self._pending = memoryview(bytes(chunk))
            n = min(len(view) - filled, len(self._pending))
            view[filled : filled + n] = self._pending[:n]
            self._pending = self._pending[n:]
            filled += n
        return filled


@dataclass(frozen=True)
class BatchRef:
    batch_id: int
    tick_id: int  # the batch's end tick: stable across a reissued batch_id
    prev_tick_id: int
    first_seq: int  # the event sequence at the batch's first tick
    last_seq: int  # and at its end tick: most of its events have ids in between

    @property
    def events_upper_bound(self) -> int:
        return self.last_seq - self.first_seq


class QueueSource:
    """One consumer's view of one queue, on one autocommit connection."""

    def __init__(self, conn: psycopg.Connection, cfg: Source) -> None:
        self.conn = conn
        self.cfg = cfg
        self.schema = sql.Identifier(cfg.queue_schema)

    def _call(self, fn: str, *args: object) -> object:
        query = sql.SQL("select {}.{}({})").format(
            self.schema, sql.Identifier(fn), sql.SQL(", ").join(sql.Placeholder() * len(args))
        )
        try:
            row = self.conn.execute(query, args).fetchone()
        except psycopg.Error as exc:
            raise errors.translate(exc) from exc
        return row[0] if row else None

    def register(self) -> None:
        self._call("register_consumer", self.cfg.queue, self.cfg.consumer)

    def tick(self, only_if_new: bool = False) -> int | None:
        """Makes a tick now (for runs without a ticker daemon): events committed before this
        call are in the next batches. only_if_new: only when events may have arrived since
        the last tick (a follow-mode drain asks often). Returns the new tick's id (None when
        none was made)."""
        if only_if_new:
            # new events by the sequence, or a transaction that was running at the last tick
            # and has ended since: its events (numbered before that tick) come after it
            query = sql.SQL(
                "select i.ev_new > 0 or exists (select 1 from {s}.tick t"
                " join {s}.queue q on q.queue_id = t.tick_queue,"
                " txid_snapshot_xip(t.tick_snapshot) x"
                " where q.queue_name = i.queue_name and t.tick_id = i.last_tick_id"
                " and txid_status(x) is distinct from 'in progress')"
                " from {s}.get_queue_info(%s) i"
            ).format(s=self.schema)
            row = self.conn.execute(query, (self.cfg.queue,)).fetchone()
            if row is None or not row[0]:
                return None
        self._call("force_tick", self.cfg.queue)
        tick_id = self._call("ticker", self.cfg.queue)
        return None if tick_id is None else int(tick_id)

    def _min_count(self) -> int | None:
        """How many events to ask next_batch_custom for, so that the batch joins as many ticks
        as fit in max_events (at least one tick)."""
        query = sql.SQL(
            "with s as (select sub_last_tick, sub_batch, sub_queue from {s}.subscription"
            " join {s}.queue on queue_id = sub_queue join {s}.consumer on co_id = sub_consumer"
            " where queue_name = %s and co_name = %s),"
            " prev as (select tick_event_seq from {s}.tick, s"
            " where tick_queue = sub_queue and tick_id = sub_last_tick)"
            " select (select sub_batch from s),"
            " (select max(t.tick_event_seq) - (select tick_event_seq from prev)"
            "  from {s}.tick t, s where t.tick_queue = s.sub_queue and t.tick_id > s.sub_last_tick"
            "  and t.tick_event_seq - (select tick_event_seq from prev) <= %s)"
        ).format(s=self.schema)
        try:
            row = self.conn.execute(
                query, (self.cfg.queue, self.cfg.consumer, self.cfg.max_events)
            ).fetchone()
        except psycopg.Error:
            return None  # the tables are not readable to this role: one tick per batch
        if row is None or row[0] is not None or row[1] is None or row[1] < 1:
            return None
        return int(row[1])

    def next_batch(self, one_tick: bool = False) -> BatchRef | None:
        """The open batch, or the next one; None when the consumer is caught up. one_tick:
        a batch up to the next tick only (no joining of ticks)."""
        min_count = None if one_tick else self._min_count()
        query = sql.SQL(
            "select batch_id, cur_tick_id, prev_tick_id, prev_tick_event_seq, cur_tick_event_seq"
            " from {}.next_batch_custom(%s, %s, null, %s, null)"
        ).format(self.schema)
        try:
            row = self.conn.execute(
                query, (self.cfg.queue, self.cfg.consumer, min_count)
            ).fetchone()
        except psycopg.Error as exc:
            raise errors.translate(exc) from exc
        if row is None or row[0] is None:
            return None
        return BatchRef(int(row[0]), int(row[1]), int(row[2]), int(row[3] or 0), int(row[4] or 0))

    def events(self, batch: BatchRef) -> Iterator[pa.RecordBatch]:
        """The batch's events in ev_id order as Arrow record batches, read with COPY in CSV
        form and parsed by Arrow's CSV reader as the bytes arrive: one pass, memory bounded
        by the reader's block, no Python object per value.

        A row larger than the block (a value of tens of MB; PostgreSQL allows 1 GB) cannot be
        parsed in it: the read goes on after the last event already returned, with a block
        that holds that row (its size asked from the server)."""
        block = CSV_BLOCK
        after: int | None = None  # the ev_id of the last event returned
        while True:
            try:
                for record_batch in self._copy_events(batch, block, after):
                    after = record_batch.column("ev_id")[-1].as_py()
                    yield record_batch
                return
            except pa.ArrowInvalid as exc:
                if "straddl" not in str(exc) or block >= MAX_CSV_BLOCK:
                    raise
                block = self._block_for_next_row(batch, after, block)
                log.info("batch %d: a large event, read on in blocks of %d MB",
                         batch.batch_id, block >> 20)  # fmt: skip

    def _block_for_next_row(self, batch: BatchRef, after: int | None, block: int) -> int:
        """A CSV block that holds the largest of the remaining rows (quoting may double a
        value's bytes), at least twice the last block."""
        query = sql.SQL(
            "select max(coalesce(octet_length(ev_type), 0) + coalesce(octet_length(ev_data), 0)"
            " + coalesce(octet_length(ev_extra1), 0) + coalesce(octet_length(ev_extra2), 0)"
            " + coalesce(octet_length(ev_extra3), 0) + coalesce(octet_length(ev_extra4), 0))"
            " from {}.get_batch_events({}) where ev_id > {}"
        ).format(self.schema, sql.Literal(batch.batch_id), sql.Literal(after or -1))
        try:
            largest = self.conn.execute(query).fetchone()[0] or 0
        except psycopg.Error as exc:
            raise errors.translate(exc) from exc
        return min(max(2 * block, 2 * int(largest) + (1 << 20)), MAX_CSV_BLOCK)

    def _copy_events(
        self, batch: BatchRef, block: int, after: int | None
    ) -> Iterator[pa.RecordBatch]:
        query = sql.SQL(
            "copy (select ev_id, ev_time at time zone 'UTC', ev_txid::bigint, ev_retry, ev_type,"
            " ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4 from {}.get_batch_events({})"
            " where ev_id > {} order by ev_id) to stdout with (format csv)"
        ).format(
            self.schema, sql.Literal(batch.batch_id), sql.Literal(-1 if after is None else after)
        )
        try:
            with self.conn.cursor() as cur, cur.copy(query) as copy:
                stream = _CopyStream(copy)
                if not stream.peek():
                    return  # an empty batch: Arrow's reader refuses an empty file
                reader = pacsv.open_csv(
                    stream,
                    read_options=pacsv.ReadOptions(
                        column_names=EVENT_SCHEMA.names, block_size=block
                    ),
                    # values may hold newlines (inside quotes)
                    parse_options=pacsv.ParseOptions(newlines_in_values=True),
                    convert_options=pacsv.ConvertOptions(
                        column_types=_CSV_SCHEMA,
                        null_values=[""],  # COPY writes NULL as nothing, and "" as ""
                        strings_can_be_null=True,
                        quoted_strings_can_be_null=False,
                    ),
                )
                for record_batch in reader:
                    if record_batch.num_rows:
                        yield record_batch.cast(EVENT_SCHEMA)
        except psycopg.Error as exc:
            raise errors.translate(exc) from exc

    def position(self) -> int | None:
        """The consumer's last finished tick."""
        query = sql.SQL(
            "select sub_last_tick from {s}.subscription join {s}.queue on queue_id = sub_queue"
            " join {s}.consumer on co_id = sub_consumer where queue_name = %s and co_name = %s"
        ).format(s=self.schema)
        row = self.conn.execute(query, (self.cfg.queue, self.cfg.consumer)).fetchone()
        return None if row is None else int(row[0])

    def finish(self, batch: BatchRef) -> None:
        self._call("finish_batch", batch.batch_id)


def lock_key(src: Source) -> str:
    return f"cdc-drain:{src.queue_schema}.{src.queue}/{src.consumer}"


@contextmanager
def drain_lock(conn: psycopg.Connection, src: Source, who: str) -> Iterator[None]:
    """The consumer's drain lock (a session advisory lock): held by a drain while it applies
    a batch, and by a snapshot for its whole run. Waits, saying so every 10 s."""
    key = lock_key(src)
    waited = 0.0
    while not conn.execute("select pg_try_advisory_lock(hashtext(%s))", (key,)).fetchone()[0]:
        if waited % 10 == 0:
            log.info("%s: waiting for the drain lock of %s/%s", who, src.queue, src.consumer)
        time.sleep(0.5)
        waited += 0.5
    try:
        yield
    finally:
        conn.execute("select pg_advisory_unlock(hashtext(%s))", (key,))


def jdbc_url(dsn: str) -> tuple[str, dict[str, str]] | None:
    """The JDBC URL and properties for a libpq DSN; None when it names a unix socket (which the
    JDBC driver does not reach)."""
    from psycopg.conninfo import conninfo_to_dict

    params = conninfo_to_dict(dsn)
    host = str(params.get("host") or "localhost")
    if host.startswith("/") or "," in host:
        return None
    url = f"jdbc:postgresql://{host}:{params.get('port') or 5432}/{params.get('dbname') or ''}"
    props = {"driver": "org.postgresql.Driver"}
    for key in ("user", "password"):
        if params.get(key):
            props[key] = str(params[key])
    return url, props


def jdbc_slices(batch: BatchRef, parts: int) -> list[tuple[int | None, int | None]]:
    """ev_id ranges [from, to) covering everything, the outer ones open: parts slices of the
    span between the batch's ticks' sequence positions."""
    span = max(batch.last_seq - batch.first_seq, parts)
    bounds = [batch.first_seq + span * i // parts for i in range(1, parts)]
    edges: list[int | None] = [None, *bounds, None]
    return list(itertools.pairwise(edges))


def jdbc_table(schema: str, batch: BatchRef, lo: int | None, hi: int | None) -> str:
    """The subquery one JDBC slice reads."""
    cols = ", ".join(EVENT_SCHEMA.names).replace("ev_txid", "ev_txid::bigint as ev_txid")
    lo_sql = "null" if lo is None else str(lo)
    hi_sql = "null" if hi is None else str(hi)
    if schema == "cdc":
        return f"(select {cols} from cdc.get_batch_events({batch.batch_id}, {lo_sql}, {hi_sql})) e"
    # PgQ has no slice function: each slice filters the whole batch
    cond = (
        " and ".join(
            c
            for c in (
                (f"ev_id >= {lo}" if lo is not None else ""),
                (f"ev_id < {hi}" if hi is not None else ""),
            )
            if c
        )
        or "true"
    )
    return f"(select {cols} from {schema}.get_batch_events({batch.batch_id}) where {cond}) e"


@dataclass(frozen=True)
class TableNames:
    """How the events of a batch name the configured tables, when some were renamed."""

    events: dict[str, str]  # an event's table name (ev_extra1) -> the configured source
    current: dict[str, tuple[str, str]]  # configured source -> its (schema, table) now, renamed

    def names_of(self, source: str) -> list[str]:
        """Every event table name that stands for this configured source."""
        return sorted(name for name, to in self.events.items() if to == source)


def _unquoted(name: str) -> str:
    """A schema.table name as the events write it (unquoted), from a quoted or bare form."""
    from cdc.config import parse_table_name

    try:
        schema, table = parse_table_name(name)
    except ValueError:
        return name
    return f"{schema}.{table}"


def capture_aliases(conn: psycopg.Connection, cfg: Source) -> dict[tuple[str, str], set[str]]:
    """The earlier names of captured tables (schema.table unquoted, as events write them),
    by their current (schema, table): from ``cdc.get_capture_aliases()``. Empty for a PgQ
    queue, an engine without that function, or a role that may not call it."""
    if cfg.queue_schema != "cdc":
        return {}
    query = (
        "select n.nspname, c.relname, a.alias from cdc.get_capture_aliases() a"
        " join pg_class c on c.oid = a.table_oid join pg_namespace n on n.oid = c.relnamespace"
    )
    try:
        with conn.transaction():
            rows = conn.execute(query).fetchall()
    except (psycopg.errors.UndefinedFunction, psycopg.errors.InsufficientPrivilege):
        return {}
    found: dict[tuple[str, str], set[str]] = {}
    for schema, table, alias in rows:
        current = f"{schema}.{table}"
        if alias and alias != current:
            found.setdefault((schema, table), set()).update({alias, _unquoted(alias)} - {current})
    return found


def _exists(conn: psycopg.Connection, schema: str, table: str) -> bool:
    query = (
        "select exists (select 1 from pg_class c join pg_namespace n on n.oid = c.relnamespace"
        " where n.nspname = %s and c.relname = %s)"
    )
    return bool(conn.execute(query, (schema, table)).fetchone()[0])


def table_names(conn: psycopg.Connection, cfg: Source, tables: Iterable[TableMap]) -> TableNames:
    """Routes a renamed table's events: events carrying an earlier name of a configured table
    go to it; a configured name that is now an earlier name of another table (renamed, and no
    table took the old name) stands for that table, with a warning to update the config."""
    aliases = capture_aliases(conn, cfg)
    sources = {t.source: t for t in tables}
    events = {source: source for source in sources}
    current: dict[str, tuple[str, str]] = {}
    for source, table in sources.items():
        names = set(aliases.get((table.schema, table.name), ()))
        if not names:
            renamed = [now for now, old in aliases.items() if source in old]
            if len(renamed) == 1 and not _exists(conn, table.schema, table.name):
                current[source] = now = renamed[0]
                names = {f"{now[0]}.{now[1]}", *aliases[now]}
                log.warning(
                    "table %s was renamed to %s.%s: its events are applied to the target(s)"
                    " of %s; update the configuration's source to the new name",
                    source, now[0], now[1], source,
                )  # fmt: skip
        for name in names:
            events.setdefault(name, source)  # a configured name stays its own table
    return TableNames(events, current)


def incarnation(conn: psycopg.Connection, cfg: Source) -> int | None:
    """Which incarnation of the queue this is: the OID of its event sequence, new whenever a
    queue of that name is created again (and its tick ids start again at 1). None when the
    engine cannot tell (a cdc install older than ``cdc.get_queue_incarnation``, read by a role
    that may not read ``cdc.queue``)."""
    schema = sql.Identifier(cfg.queue_schema)
    direct = sql.SQL(
        "select queue_event_seq::regclass::oid::bigint from {}.queue where queue_name = %s"
    ).format(schema)
    queries = [direct]
    if cfg.queue_schema == "cdc":
        queries.insert(0, sql.SQL("select cdc.get_queue_incarnation(%s)"))
    for query in queries:
        try:
            with conn.transaction():
                row = conn.execute(query, (cfg.queue,)).fetchone()
        except (psycopg.errors.UndefinedFunction, psycopg.errors.InsufficientPrivilege):
            continue
        except psycopg.Error as exc:
            raise errors.translate(exc) from exc
        return None if row is None or row[0] is None else int(row[0])
    return None


def app_id(cfg: Source, incarnation_id: int | None, target: str) -> str:
    """The Delta idempotent-write appId of a target: queue (and its incarnation), consumer
    and target. Without an incarnation, the id of earlier versions."""
    if incarnation_id is None:
        return legacy_app_id(cfg, target)
    return f"{cfg.queue}@{incarnation_id}/{cfg.consumer}/{target}"


def legacy_app_id(cfg: Source, target: str) -> str:
    """The appId written before queue incarnations were part of it."""
    return f"{cfg.queue}/{cfg.consumer}/{target}"
