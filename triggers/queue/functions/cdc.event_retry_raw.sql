-- ----------------------------------------------------------------------
-- Function: cdc.event_retry_raw(queue, consumer, retry_after, ev_id, ev_time, ev_retry,
--                               ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4)
--
--      Puts an event, given field by field, straight into the consumer's retry queue: from
--      retry_after on, cdc.maint_retry_events() delivers it to that consumer only, as it is
--      (no retry limit is applied, ev_retry is stored as given). An ev_id of NULL takes the
--      next id of the queue's event sequence. QC001 / QC002 for an unknown queue or
--      consumer, QC014 if the consumer is another role's; an ev_id the consumer has in the
--      retry queue already is a unique violation (23505).
--
-- Returns:
--      The event id.
-- Tables: cdc.retry_queue
-- ----------------------------------------------------------------------
create or replace function cdc.event_retry_raw(
    x_queue text, x_consumer text, x_retry_after timestamptz,
    x_ev_id bigint, x_ev_time timestamptz, x_ev_retry integer,
    x_ev_type text, x_ev_data text,
    x_ev_extra1 text, x_ev_extra2 text, x_ev_extra3 text, x_ev_extra4 text)
returns bigint as $$
declare
    s   cdc.subscription;
    q   cdc.queue;
    id  bigint;
begin
    s := cdc._subscription(x_queue, x_consumer);  -- QC001, QC002, QC006
    perform cdc._check_consumer_access(s);        -- QC014
    select * into q from cdc.queue where queue_id = s.sub_queue;
    id := coalesce(x_ev_id, nextval(q.queue_event_seq::regclass));
    insert into cdc.retry_queue (ev_retry_after, ev_queue, ev_id, ev_time, ev_owner, ev_retry,
                                 ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4)
    values (x_retry_after, s.sub_queue, id, x_ev_time, s.sub_id, x_ev_retry,
            x_ev_type, x_ev_data, x_ev_extra1, x_ev_extra2, x_ev_extra3, x_ev_extra4);
    return id;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;
