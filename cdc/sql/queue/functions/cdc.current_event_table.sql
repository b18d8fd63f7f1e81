-- ----------------------------------------------------------------------
-- Function: cdc.current_event_table(queue_name)
--
--      The event table that inserts go to now, schema-qualified (e.g. cdc.event_1_0). It
--      changes on rotation; readers of a batch read every table of the queue, so an insert
--      that went to the previous table is still delivered.
-- ----------------------------------------------------------------------
create or replace function cdc.current_event_table(i_queue_name text)
returns text as $$
declare
    q cdc.queue;
begin
    q := cdc._queue(i_queue_name);
    if q.queue_disable_insert then
        raise exception using errcode = 'QC008',
            message = format('inserts into queue %L are disabled', i_queue_name),
            hint = 'enable them with cdc.set_queue_config(queue, ''disable_insert'', ''false'')';
    end if;
    return 'cdc.' || cdc._event_table(q.queue_id, q.queue_cur_table);
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;
