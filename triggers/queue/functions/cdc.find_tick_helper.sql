-- ----------------------------------------------------------------------
-- Function: cdc.find_tick_helper(queue_id, prev_tick_id, prev_tick_time, prev_tick_seq,
--                                min_count, min_interval)
--
--      PgQ's tick search for a batch that spans several ticks: the end tick for a batch
--      starting at prev_tick that holds at least min_count events (by event sequence
--      position) or lasts at least min_interval. If the queue's last tick meets a criterion
--      without passing it twice over, the last tick; if it passes one twice over, the first
--      tick that meets one; otherwise none. (cdc.next_batch_custom searches on its own: it
--      always takes the first tick that meets a criterion.)
--
-- Returns:
--      next_tick_id, next_tick_time, next_tick_seq; all NULL when no tick fits, when both
--      criteria are NULL, or for an unknown queue.
-- Tables: cdc.tick
-- ----------------------------------------------------------------------
create or replace function cdc.find_tick_helper(
    in  i_queue_id        integer,
    in  i_prev_tick_id    bigint,
    in  i_prev_tick_time  timestamptz,
    in  i_prev_tick_seq   bigint,
    in  i_min_count       bigint,
    in  i_min_interval    interval,
    out next_tick_id      bigint,
    out next_tick_time    timestamptz,
    out next_tick_seq     bigint)
as $$
declare
    last     cdc.tick;
    meets    boolean;
    too_far  boolean;
begin
    select * into last from cdc.tick
     where tick_queue = i_queue_id and tick_id > i_prev_tick_id
     order by tick_id desc limit 1;
    if not found then
        return;
    end if;
    meets := coalesce(last.tick_event_seq - i_prev_tick_seq >= i_min_count, false)
          or coalesce(last.tick_time - i_prev_tick_time >= i_min_interval, false);
    too_far := coalesce(last.tick_event_seq - i_prev_tick_seq > i_min_count * 2, false)
            or coalesce(last.tick_time - i_prev_tick_time > i_min_interval * 2, false);
    if too_far then
        select * into last from cdc.tick
         where tick_queue = i_queue_id and tick_id > i_prev_tick_id
           and (tick_event_seq - i_prev_tick_seq >= i_min_count
                or tick_time - i_prev_tick_time >= i_min_interval)
         order by tick_id limit 1;
    elsif not meets then
        return;
    end if;
    next_tick_id := last.tick_id;
    next_tick_time := last.tick_time;
    next_tick_seq := last.tick_event_seq;
end;
$$ language plpgsql stable security definer set search_path = pg_catalog, pg_temp;
