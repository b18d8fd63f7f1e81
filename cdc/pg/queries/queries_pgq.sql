-- Runtime queries against a real PgQ (schema pgq): the consumer's calls, under the names
-- they have in queries.sql (cdc.pg.engine.PGQ reads this file).

-- name: register_consumer
select pgq.register_consumer(%(queue)s, %(consumer)s);

-- name: next_batch_custom
select * from pgq.next_batch_custom(%(queue)s, %(consumer)s,
                                    %(min_lag)s, %(min_count)s, %(min_interval)s);

-- name: finish_batch
select pgq.finish_batch(%(batch_id)s);

-- name: ticker_queue
select pgq.ticker(%(queue)s);

-- name: force_tick
select pgq.force_tick(%(queue)s);

-- name: next_batch_ticks
-- The min_count that joins as many ticks as hold at most max_events (cdc.next_batch_ticks).
with s as (select sub_last_tick, sub_batch, sub_queue from pgq.subscription
             join pgq.queue on queue_id = sub_queue join pgq.consumer on co_id = sub_consumer
            where queue_name = %(queue)s and co_name = %(consumer)s),
     prev as (select tick_event_seq from pgq.tick, s
               where tick_queue = sub_queue and tick_id = sub_last_tick)
select case when (select sub_batch from s) is null
            then (select max(t.tick_event_seq) - (select tick_event_seq from prev)
                    from pgq.tick t, s
                   where t.tick_queue = s.sub_queue and t.tick_id > s.sub_last_tick
                     and t.tick_event_seq - (select tick_event_seq from prev) <= %(max_events)s)
       end;

-- name: queue_has_new_events
select i.ev_new > 0 or exists (
           select 1 from pgq.tick t join pgq.queue q on q.queue_id = t.tick_queue,
                  txid_snapshot_xip(t.tick_snapshot) x
            where q.queue_name = i.queue_name and t.tick_id = i.last_tick_id
              and txid_status(x) is distinct from 'in progress')
  from pgq.get_queue_info(%(queue)s) i;

-- name: tick_snapshot
select t.tick_snapshot::text from pgq.tick t join pgq.queue q on q.queue_id = t.tick_queue
 where q.queue_name = %(queue)s and t.tick_id = %(tick_id)s;

-- name: consumer_position
select sub_last_tick from pgq.subscription join pgq.queue on queue_id = sub_queue
  join pgq.consumer on co_id = sub_consumer
 where queue_name = %(queue)s and co_name = %(consumer)s;

-- name: consumer_position_time
select s.sub_last_tick, t.tick_time from pgq.subscription s
  join pgq.queue q on q.queue_id = s.sub_queue
  join pgq.consumer c on c.co_id = s.sub_consumer
  join pgq.tick t on t.tick_queue = s.sub_queue and t.tick_id = s.sub_last_tick
 where q.queue_name = %(queue)s and c.co_name = %(consumer)s;
