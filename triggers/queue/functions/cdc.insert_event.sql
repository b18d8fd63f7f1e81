-- ----------------------------------------------------------------------
-- Function: cdc.insert_event(queue_name, ev_type, ev_data [, ev_extra1, ev_extra2,
--                            ev_extra3, ev_extra4])
--
--      Inserts an event into the queue's current event table. The usual case is one static
--      INSERT ... SELECT with a cached plan: it looks the queue up and inserts, the row being
--      routed to the partition by ev_part. An unknown queue, disabled inserts (QC008) and a
--      per_tx_limit to count (QC007) take a second, slower path. As in PgQ, a session in
--      session_replication_role = replica (a replication replay) may insert into a queue
--      whose inserts are disabled; its events still count against per_tx_limit.
--
--      The argument names are PgQ's (a named call such as insert_event(queue_name => 'q',
--      ev_type => 't', ev_data => 'd') works on both). They equal column names of
--      cdc.event, so the body names them qualified with the function's name.
--
-- Returns:
--      The event id.
-- Tables: cdc.queue (read), cdc.event (insert)
-- ----------------------------------------------------------------------
create or replace function cdc.insert_event(
    queue_name text, ev_type text, ev_data text,
    ev_extra1 text, ev_extra2 text, ev_extra3 text, ev_extra4 text)
returns bigint as $$
declare
    q       cdc.queue;
    new_id  bigint;
begin
    insert into cdc.event (ev_id, ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4, ev_part)
    select nextval(qq.queue_event_seq::regclass), insert_event.ev_type, insert_event.ev_data,
           insert_event.ev_extra1, insert_event.ev_extra2, insert_event.ev_extra3, insert_event.ev_extra4,
           qq.queue_id * 1000 + qq.queue_cur_table
      from cdc.queue qq
     where qq.queue_name = insert_event.queue_name
       and not qq.queue_disable_insert
       and qq.queue_per_tx_limit is null
    returning cdc.event.ev_id into new_id;
    if found then
        return new_id;
    end if;

    q := cdc._queue(insert_event.queue_name);  -- QC001 for an unknown queue, QC006 for NULL
    perform cdc._admit_events(q, 1);           -- QC008, QC007
    insert into cdc.event (ev_id, ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4, ev_part)
    values (nextval(q.queue_event_seq::regclass), insert_event.ev_type, insert_event.ev_data,
            insert_event.ev_extra1, insert_event.ev_extra2, insert_event.ev_extra3, insert_event.ev_extra4,
            q.queue_id * 1000 + q.queue_cur_table)
    returning cdc.event.ev_id into new_id;
    return new_id;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;

-- The 3-argument form is a plain SQL wrapper with no SECURITY DEFINER and no SET, so the
-- planner inlines it into the caller's query: it costs no more than the 7-argument form,
-- which does the work (and runs as the owner, with a pinned search_path). The only name in
-- its body is schema-qualified, since an inlined body is parsed with the caller's search_path.
create or replace function cdc.insert_event(queue_name text, ev_type text, ev_data text)
returns bigint as $$
    select cdc.insert_event($1, $2, $3,
                            null::pg_catalog.text, null::pg_catalog.text,
                            null::pg_catalog.text, null::pg_catalog.text);
$$ language sql;
