-- ----------------------------------------------------------------------
-- Function: cdc.insert_event_raw(queue_name, ev_id, ev_time, ev_owner, ev_retry, ev_type,
--                                ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4)
--
--      Inserts an event with every field given: ev_id NULL takes the next id of the
--      queue's sequence (which every call advances, as in PgQ, so that the ticker counts
--      an event given its own ev_id as new too), ev_time NULL is now(), ev_owner (a
--      subscription id, NULL for every consumer) and ev_retry are stored as given. An ev_id is not checked for duplicates,
--      as in PgQ. Like cdc.insert_event it refuses a queue with disable_insert (QC008;
--      but in a session with session_replication_role = replica, as PgQ does) and counts
--      the event against the queue's per_tx_limit (QC007).
--
-- Returns:
--      The event id.
-- Tables: cdc.queue (read), cdc.event (insert)
-- ----------------------------------------------------------------------
create or replace function cdc.insert_event_raw(
    queue_name text, ev_id bigint, ev_time timestamptz, ev_owner integer, ev_retry integer,
    ev_type text, ev_data text,
    ev_extra1 text, ev_extra2 text, ev_extra3 text, ev_extra4 text)
returns bigint as $$
declare
    q   cdc.queue;
    id  bigint;
begin
    -- The arguments have the columns' names: they are always written qualified here.
    q := cdc._queue(insert_event_raw.queue_name);  -- QC001, QC006
    id := nextval(q.queue_event_seq::regclass);
    perform cdc._admit_events(q, 1);  -- QC008 (not in replica mode), QC007
    id := coalesce(insert_event_raw.ev_id, id);
    insert into cdc.event (ev_id, ev_time, ev_owner, ev_retry, ev_type, ev_data,
                           ev_extra1, ev_extra2, ev_extra3, ev_extra4, ev_part)
    values (id, coalesce(insert_event_raw.ev_time, now()), insert_event_raw.ev_owner,
            insert_event_raw.ev_retry, insert_event_raw.ev_type, insert_event_raw.ev_data,
            insert_event_raw.ev_extra1, insert_event_raw.ev_extra2,
            insert_event_raw.ev_extra3, insert_event_raw.ev_extra4,
            q.queue_id * 1000 + q.queue_cur_table);
    return id;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;
