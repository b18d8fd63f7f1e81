"""What the drain, the snapshot and resync share about a pipeline's source, besides its
consumer (``cdc.pg.consumer``): the drain lock, the JDBC URL of the source (``source_jdbc``),
how events name renamed tables, the queue's incarnation and the Delta appIds built on it.

The engine (``cdc`` or ``pgq``) is asked by its flags (``cdc.pg.engine``); its schema is
always passed as an identifier.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psycopg
from psycopg import sql

from cdc import errors
from cdc.config import Source, TableMap
from cdc.pg import jdbc

# re-exported for the callers: the JDBC settings of a DSN are worked out in cdc.pg.jdbc
from cdc.pg.jdbc import jdbc_url as jdbc_url
from cdc.pg.jdbc import require_jdbc as require_jdbc

log = logging.getLogger("cdc.source")


def source_jdbc(
    src: Source, conn: psycopg.Connection | None = None
) -> tuple[str, dict[str, str]] | None:
    """The JDBC URL and properties of every JDBC read of the source (a drain's large batches,
    a snapshot's chunks, resync): ``source.jdbc_url`` when the file sets one, with the DSN's
    role and password when it names no user (``cdc.pg.jdbc.configured``: so a DSN over a
    unix socket can still have the executors read); else the URL made from libpq's settings
    of the DSN, None when JDBC cannot follow them (a unix socket): the caller reads with COPY.
    ``conn``: a connection opened with the DSN, else one short connection is opened here."""
    if src.jdbc_url is not None:
        target = jdbc.configured(src.jdbc_url, src.dsn, conn)
        return target.url, target.properties
    return jdbc_url(src.dsn, conn)


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


def table_lock_key(src: Source, table: str) -> str:
    return f"cdc-table:{src.queue_schema}.{src.queue}/{src.consumer}:{table}"


@contextmanager
def table_locks(
    conn: psycopg.Connection, src: Source, tables: list[str], who: str
) -> Iterator[None]:
    """The tables' locks under the consumer (session advisory locks): a chunk of a table's
    snapshot holds its table's lock while it reads and writes; a drain holds the locks of
    the tables its batch touches from before their applies until the batch is finished. So a
    chunk is never read and written in the middle of a batch that changes its table, while
    every other table's batches go on. The free locks are taken at once (one round trip), the
    others waited for in name order, in PostgreSQL's lock queue, saying so every 10 s. No
    deadlock: a snapshot chunk and maintenance take one lock each, and only the consumer's
    drain (one at a time, under its drain lock) takes several."""
    taken: list[str] = []
    keys = {table: table_lock_key(src, table) for table in sorted(set(tables))}
    try:
        # those free now, in one round trip (a try never waits: no order needed); then the
        # others one by one, in name order, waiting
        got = conn.execute(
            "select k from unnest(%s::text[]) as k where pg_try_advisory_lock(hashtext(k))",
            (list(keys.values()),),
        ).fetchall()
        taken.extend(k for (k,) in got)
        free = set(taken)
        conn.execute("set lock_timeout = '10s'")
        try:
            for table, key in keys.items():
                if key in free:
                    continue
                while True:
                    try:
                        conn.execute("select pg_advisory_lock(hashtext(%s))", (key,))
                        break
                    except psycopg.errors.LockNotAvailable:
                        log.info("%s: waiting for the lock of table %s", who, table)
                taken.append(key)
        finally:
            conn.execute("reset lock_timeout")
        yield
    finally:
        if taken:
            conn.execute(
                "select pg_advisory_unlock(hashtext(k)) from unnest(%s::text[]) as k", (taken,)
            )


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
    if not cfg.engine.has_capture_registry:
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
    engine = cfg.engine
    direct = sql.SQL(
        "select queue_event_seq::regclass::oid::bigint from {}.queue where queue_name = %s"
    ).format(engine.schema)
    queries = [direct]
    if engine.has_incarnations:
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
