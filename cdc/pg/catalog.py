"""The tables a pipeline's patterns may match, listed from the catalog in one query.

A candidate is an ordinary or a partitioned table (relkind r or p) that is not a partition
(a partition belongs to its partitioned table, the one source), not temporary, not part of
an extension, and not in a system schema (``pg_*``, ``information_schema``) nor in the
queue's own schemas (``cdc``; ``pgq``, ``pgq_ext``, ``pgq_node``, ``londiste`` of PgQ and
its tools): the tables the SQL capture rules consider (cdc._cap_rule_candidates). Views,
materialized views, foreign tables and sequences are not tables. Names come back unquoted,
as the catalog spells them, in the order the tables were created (by oid, which PostgreSQL
hands out in increasing order: of two tables whose targets meet, the older keeps its target,
cdc.pipeline.tables); the query reads only pg_class, pg_namespace and pg_depend, which every
role may read.
"""

from __future__ import annotations

import psycopg
from psycopg.pq import TransactionStatus

__all__ = ["EXCLUDED_SCHEMAS", "candidate_tables"]

EXCLUDED_SCHEMAS = ("information_schema", "cdc", "pgq", "pgq_ext", "pgq_node", "londiste")

CANDIDATE_TABLES = """
select n.nspname::text, c.relname::text
  from pg_catalog.pg_class c
  join pg_catalog.pg_namespace n on n.oid = c.relnamespace
 where c.relkind in ('r', 'p')
   and not c.relispartition
   and c.relpersistence <> 't'
   and n.nspname !~ '^pg_'
   and n.nspname <> all (%(excluded)s::text[])
   and not exists (select 1 from pg_catalog.pg_depend d
                    where d.classid = 'pg_catalog.pg_class'::regclass
                      and d.objid = c.oid and d.deptype = 'e')
 order by c.oid
"""


def candidate_tables(conn: psycopg.Connection) -> tuple[tuple[str, str], ...]:
    """(schema, table) of every table a pattern may match, in the order they were created
    (see the module doc)."""
    params = {"excluded": list(EXCLUDED_SCHEMAS)}
    if conn.autocommit or conn.info.transaction_status != TransactionStatus.IDLE:
        rows = conn.execute(CANDIDATE_TABLES, params).fetchall()
    else:  # not left idle in a transaction of its own
        with conn.transaction():
            rows = conn.execute(CANDIDATE_TABLES, params).fetchall()
    return tuple((schema, table) for schema, table in rows)
