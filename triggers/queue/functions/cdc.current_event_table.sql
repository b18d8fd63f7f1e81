-- ----------------------------------------------------------------------
-- Function: cdc.current_event_table(queue_name)
--
--      The event table that inserts go to now, schema-qualified (e.g. cdc.event_1_0). It
--      changes on rotation; readers of a batch read every table of the queue, so an insert
--      that went to the previous table is still delivered. QC008 when the queue's inserts
--      are disabled, except under session_replication_role = replica (as in PgQ).
-- ----------------------------------------------------------------------
create or replace function cdc.current_event_table(x_queue_name text)
returns text as $$
declare
    q cdc.queue;
begin
    q := cdc._queue(x_queue_name);
    perform cdc._admit_events(q, 0);  -- QC008, unless in replica mode
    return 'cdc.' || cdc._event_table(q.queue_id, q.queue_cur_table);
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;
