-- ----------------------------------------------------------------------
-- Function: cdc.next_batch_custom(queue_name, consumer_name, min_lag, min_count,
--                                 min_interval)
--
--      Opens the consumer's next batch, or returns the one it has open already: a batch
--      stays the same, with the same events, until cdc.finish_batch(). The batch spans from
--      the consumer's last finished tick to:
--        - the next tick, when min_count and min_interval are NULL;
--        - otherwise the first later tick with at least min_count new events or at least
--          min_interval since the start (several ticks in one batch); none yet: no batch.
--      With min_lag, a batch whose end tick is younger than min_lag is not opened yet.
--      QC014 if the consumer is another role's (see cdc.register_consumer).
--
-- Returns:
--      batch_id (NULL when there is no batch yet) and both ticks' ids, times and event
--      sequence positions.
-- Tables: cdc.subscription, cdc.tick
-- ----------------------------------------------------------------------
create or replace function cdc.next_batch_custom(
    i_queue_name text, i_consumer_name text,
    i_min_lag interval, i_min_count integer, i_min_interval interval)
returns cdc.ret_batch_info as $$
declare
    r     cdc.ret_batch_info;
    s     cdc.subscription;
    prev  cdc.tick;
    cur   cdc.tick;
begin
    s := cdc._subscription(i_queue_name, i_consumer_name, true);
    perform cdc._check_consumer_access(s);
    select * into prev from cdc.tick where tick_queue = s.sub_queue and tick_id = s.sub_last_tick;
    if s.sub_batch is not null then
        select * into cur from cdc.tick where tick_queue = s.sub_queue and tick_id = s.sub_next_tick;
        r.batch_id := s.sub_batch;
    else
        if i_min_count is null and i_min_interval is null then
            select * into cur from cdc.tick
             where tick_queue = s.sub_queue and tick_id > s.sub_last_tick
             order by tick_id limit 1;
        else
            select * into cur from cdc.tick
             where tick_queue = s.sub_queue and tick_id > s.sub_last_tick
               and (tick_event_seq - prev.tick_event_seq >= i_min_count
                    or tick_time - prev.tick_time >= i_min_interval)
             order by tick_id limit 1;
        end if;
        if cur.tick_id is null or now() - cur.tick_time < i_min_lag then
            update cdc.subscription set sub_active = now() where sub_id = s.sub_id;
            return r;
        end if;
        r.batch_id := nextval('cdc.batch_id_seq');
        update cdc.subscription
           set sub_batch = r.batch_id, sub_next_tick = cur.tick_id, sub_active = now()
         where sub_id = s.sub_id;
    end if;
    r.cur_tick_id := cur.tick_id;
    r.cur_tick_time := cur.tick_time;
    r.cur_tick_event_seq := cur.tick_event_seq;
    r.prev_tick_id := prev.tick_id;
    r.prev_tick_time := prev.tick_time;
    r.prev_tick_event_seq := prev.tick_event_seq;
    return r;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc.next_batch_info(queue_name, consumer_name)
--
--      cdc.next_batch_custom() with one tick per batch.
-- ----------------------------------------------------------------------
create or replace function cdc.next_batch_info(i_queue_name text, i_consumer_name text)
returns cdc.ret_batch_info as $$
    select * from cdc.next_batch_custom(i_queue_name, i_consumer_name, null, null, null);
$$ language sql security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc.next_batch(queue_name, consumer_name)
--
-- Returns:
--      The id of the consumer's next (or still open) batch, NULL when there is none yet.
-- ----------------------------------------------------------------------
create or replace function cdc.next_batch(i_queue_name text, i_consumer_name text)
returns bigint as $$
    select batch_id from cdc.next_batch_custom(i_queue_name, i_consumer_name, null, null, null);
$$ language sql security definer set search_path = pg_catalog, pg_temp;
