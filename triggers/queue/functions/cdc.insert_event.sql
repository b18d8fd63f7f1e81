-- ----------------------------------------------------------------------
-- Function: cdc.insert_event(queue_name, ev_type, ev_data [, ev_extra1, ev_extra2,
--                            ev_extra3, ev_extra4])
--
--      Inserts an event into the queue's current event table. One static statement with a
--      cached plan: the row is routed to the partition by ev_part. Enforces the queue's
--      per_tx_limit (QC007) and disable_insert (QC008).
--
-- Returns:
--      The event id.
-- Tables: cdc.queue (read), cdc.event (insert)
-- ----------------------------------------------------------------------
create or replace function cdc.insert_event(
    i_queue_name text, i_ev_type text, i_ev_data text,
    i_ev_extra1 text, i_ev_extra2 text, i_ev_extra3 text, i_ev_extra4 text)
returns bigint as $$
declare
    q         record;
    new_id    bigint;
begin
    select queue_id, queue_cur_table, queue_event_seq::regclass as seq,
           queue_disable_insert, queue_per_tx_limit
      into q
      from cdc.queue where queue_name = i_queue_name;
    if not found then
        perform cdc._queue(i_queue_name);  -- raises QC001 (or QC006 for NULL)
        return cdc.insert_event(i_queue_name, i_ev_type, i_ev_data,
                                i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
    end if;
    if q.queue_disable_insert then
        raise exception using errcode = 'QC008',
            message = format('inserts into queue %L are disabled', i_queue_name),
            hint = 'enable them with cdc.set_queue_config(queue, ''disable_insert'', ''false'')';
    end if;
    if q.queue_per_tx_limit is not null then
        perform cdc._count_tx_event(q.queue_id, q.queue_per_tx_limit);
    end if;
    insert into cdc.event (ev_id, ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4, ev_part)
    values (nextval(q.seq), i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4,
            q.queue_id * 1000 + q.queue_cur_table)
    returning ev_id into new_id;
    return new_id;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;

create or replace function cdc.insert_event(i_queue_name text, i_ev_type text, i_ev_data text)
returns bigint as $$
    select cdc.insert_event(i_queue_name, i_ev_type, i_ev_data, null, null, null, null);
$$ language sql security definer set search_path = pg_catalog, pg_temp;
