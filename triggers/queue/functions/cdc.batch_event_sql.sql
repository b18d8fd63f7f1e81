-- PgQ's low-level batch readers: the tables a batch's events may be in, and the query that
-- reads them. Both act for the batch's consumer, so both check, like cdc.get_batch_events,
-- that the session may (QC003 for a batch that is not open, QC014 for another role's).


-- ----------------------------------------------------------------------
-- Function: cdc.batch_event_tables(batch_id)
--
--      The event tables the batch's events may be in, schema-qualified, oldest first. That
--      is every table of the queue: a writer whose snapshot predates a rotation (REPEATABLE
--      READ) may still insert into an older table, so batches read them all (PgQ names the
--      previous and the current table only, by the rotation bookkeeping).
--
-- Returns:
--      Table names such as cdc.event_1_2, cdc.event_1_0, ending with the current table.
-- Tables: cdc.subscription, cdc.queue
-- ----------------------------------------------------------------------
create or replace function cdc.batch_event_tables(x_batch_id bigint)
returns setof text as $$
declare
    s  cdc.subscription;
    q  cdc.queue;
begin
    s := cdc._batch_subscription(x_batch_id);  -- QC003, QC014
    select * into q from cdc.queue where queue_id = s.sub_queue;
    return query
        select 'cdc.' || cdc._event_table(q.queue_id, (q.queue_cur_table + k) % q.queue_ntables)
          from generate_series(1, q.queue_ntables) k
         order by k;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc.batch_event_sql(batch_id)
--
--      The SELECT that returns the batch's events, with the columns and order of
--      cdc.get_batch_events (it is the query that function runs, see docs/queue.md, "A
--      batch"). Every value in it comes from the engine's tables. It reads cdc.event,
--      which only the owner of schema cdc may read: others read batches through
--      cdc.get_batch_events or cdc.open_batch_cursor.
--
-- Returns:
--      SQL text.
-- ----------------------------------------------------------------------
create or replace function cdc.batch_event_sql(x_batch_id bigint)
returns text as $$
begin
    perform cdc._batch_subscription(x_batch_id);  -- QC003, QC014
    return cdc._batch_sql(x_batch_id);
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;
