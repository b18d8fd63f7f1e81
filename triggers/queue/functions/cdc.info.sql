-- ----------------------------------------------------------------------
-- Function: cdc.get_queue_info([queue_name])
--
--      Queues with their settings and ticker state, PgQ's columns: ticker_lag (since the
--      last tick), ev_per_sec (between the queue's two last ticks), ev_new (events since
--      the last tick), last_tick_id. QC001 for an unknown name.
--
-- Tables: cdc.queue, cdc.tick
-- ----------------------------------------------------------------------
create or replace function cdc.get_queue_info()
returns setof cdc.ret_queue_info as $$
    select q.queue_name, q.queue_ntables, q.queue_cur_table, q.queue_rotation_period,
           q.queue_switch_time, q.queue_external_ticker, q.queue_ticker_paused,
           q.queue_ticker_max_count, q.queue_ticker_max_lag, q.queue_ticker_idle_period,
           now() - t1.tick_time,
           case when t2.tick_time is not null and t1.tick_time > t2.tick_time
                then (t1.tick_event_seq - t2.tick_event_seq)
                     / extract(epoch from t1.tick_time - t2.tick_time)::float8 end,
           cdc._event_seq(q) - t1.tick_event_seq,
           t1.tick_id
      from cdc.queue q
      left join lateral (select * from cdc.tick t where t.tick_queue = q.queue_id
                          order by t.tick_id desc limit 1) t1 on true
      left join lateral (select * from cdc.tick t where t.tick_queue = q.queue_id
                          order by t.tick_id desc offset 1 limit 1) t2 on true
     order by q.queue_name;
$$ language sql security definer set search_path = pg_catalog, pg_temp;

create or replace function cdc.get_queue_info(i_queue_name text)
returns setof cdc.ret_queue_info as $$
begin
    perform cdc._queue(i_queue_name);
    return query select * from cdc.get_queue_info() i where i.queue_name = i_queue_name;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc.get_consumer_info([queue_name [, consumer_name]])
--
--      Consumers with their position: lag (age of the last finished tick), last_seen (time
--      since the consumer last asked for or finished a batch), last_tick, current_batch,
--      next_tick, pending_events (events inserted since the last finished tick).
--      QC001 / QC002 for an unknown name.
-- ----------------------------------------------------------------------
create or replace function cdc.get_consumer_info()
returns setof cdc.ret_consumer_info as $$
    select q.queue_name, c.co_name, now() - t.tick_time, now() - s.sub_active,
           s.sub_last_tick, s.sub_batch, s.sub_next_tick,
           cdc._event_seq(q) - t.tick_event_seq
      from cdc.subscription s
      join cdc.queue q on q.queue_id = s.sub_queue
      join cdc.consumer c on c.co_id = s.sub_consumer
      join cdc.tick t on t.tick_queue = s.sub_queue and t.tick_id = s.sub_last_tick
     order by q.queue_name, c.co_name;
$$ language sql security definer set search_path = pg_catalog, pg_temp;

create or replace function cdc.get_consumer_info(i_queue_name text)
returns setof cdc.ret_consumer_info as $$
begin
    perform cdc._queue(i_queue_name);
    return query select * from cdc.get_consumer_info() i where i.queue_name = i_queue_name;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;

create or replace function cdc.get_consumer_info(i_queue_name text, i_consumer_name text)
returns setof cdc.ret_consumer_info as $$
begin
    perform cdc._subscription(i_queue_name, i_consumer_name);
    return query select * from cdc.get_consumer_info() i
                  where i.queue_name = i_queue_name and i.consumer_name = i_consumer_name;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc.get_batch_info(batch_id)
--
--      An open batch: its queue and consumer, the times and ids of its two ticks, its lag
--      (age of the end tick) and the event sequence positions at both ends.
-- ----------------------------------------------------------------------
create or replace function cdc.get_batch_info(
    in  x_batch_id     bigint,
    out queue_name     text,
    out consumer_name  text,
    out batch_start    timestamptz,
    out batch_end      timestamptz,
    out prev_tick_id   bigint,
    out tick_id        bigint,
    out lag            interval,
    out seq_start      bigint,
    out seq_end        bigint)
as $$
    select b.queue_name, b.consumer_name, b.prev_tick_time, b.cur_tick_time,
           b.prev_tick_id, b.cur_tick_id, now() - b.cur_tick_time,
           b.prev_event_seq, b.cur_event_seq
      from cdc._batch(x_batch_id) b;
$$ language sql security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc.version()
--
--      The version of the installed queue engine (the Python package's version).
-- ----------------------------------------------------------------------
create or replace function cdc.version()
returns text as $$
    select '0.1.0'::text;
$$ language sql immutable security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc.get_queue_incarnation(queue_name)
--
--      Which incarnation of the queue this is: the OID of its event sequence, new each time
--      a queue of that name is created again (its tick ids start again at 1). A consumer that
--      keeps its own record of ticks (the drain's Delta commits) names them with it.
--      QC001 for an unknown queue.
-- ----------------------------------------------------------------------
create or replace function cdc.get_queue_incarnation(i_queue_name text)
returns bigint as $$
    select q.queue_event_seq::regclass::oid::bigint from cdc._queue(i_queue_name) q;
$$ language sql stable security definer set search_path = pg_catalog, pg_temp;
