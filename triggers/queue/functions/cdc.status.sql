-- What `cdc status`, `cdc consumer list` and `cdc queue config` read: a queue's settings and
-- each consumer's health, exact where the info functions count by sequence values.


-- ----------------------------------------------------------------------
-- Function: cdc.get_consumer_status(queue_name)
--
--      One row per consumer of the queue: its position (last finished tick and the time of
--      that tick, open batch, time since it last asked for or finished a batch), its pending
--      events and its dead letters.
--
--      Pending events are the queue's committed events that are not yet in a batch the
--      consumer finished: their transaction is visible now and was not visible in the
--      snapshot of its last finished tick. A rolled-back transaction never becomes visible,
--      so its events are never counted (cdc.get_consumer_info's pending_events counts by
--      sequence values, and does count them); other consumers' retried events are not
--      counted either. Events of the open batch are pending until it is finished.
--
--      pending_since is the later of the oldest pending event's time (ev_time: the start of
--      its transaction) and the time of the consumer's last finished tick: no pending event
--      can have been waiting, committed, for longer. NULL when nothing is pending.
--
--      dead_letters counts the consumer's dead letters; dead_by_table the same by table
--      (ev_extra1, the table of a captured event), as a JSON object
--      (cdc.get_dead_letter_counts).
--
--      QC001 for an unknown queue.
--
-- Tables: cdc.queue, cdc.subscription, cdc.consumer, cdc.tick, cdc.event, cdc.dead_letter
-- ----------------------------------------------------------------------
create or replace function cdc.get_consumer_status(
    in  i_queue_name    text,
    out consumer_name   text,
    out last_tick       bigint,
    out last_tick_time  timestamptz,
    out current_batch   bigint,
    out last_seen       interval,
    out pending_events  bigint,
    out pending_since   timestamptz,
    out dead_letters    bigint,
    out dead_by_table   jsonb)
returns setof record as $$
declare
    q       cdc.queue;
    s       record;
    oldest  timestamptz;
    visible txid_snapshot := txid_current_snapshot();
begin
    q := cdc._queue(i_queue_name);
    for s in
        select sub.sub_id, c.co_name, sub.sub_last_tick, sub.sub_batch, sub.sub_active,
               t.tick_time, t.tick_snapshot
          from cdc.subscription sub
          join cdc.consumer c on c.co_id = sub.sub_consumer
          join cdc.tick t on t.tick_queue = sub.sub_queue and t.tick_id = sub.sub_last_tick
         where sub.sub_queue = q.queue_id
         order by c.co_name
    loop
        consumer_name := s.co_name;
        last_tick := s.sub_last_tick;
        last_tick_time := s.tick_time;
        current_batch := s.sub_batch;
        last_seen := now() - s.sub_active;
        -- the queue's partitions by number (as cdc._batch_sql), every value generated here;
        -- ev_txid >= the tick's xmin uses the ev_txid index
        execute format(
            'select count(*), min(ev_time) from cdc.event'
            ' where ev_part >= %s and ev_part < %s and ev_txid >= $1'
            ' and not txid_visible_in_snapshot(ev_txid, $2)'
            ' and txid_visible_in_snapshot(ev_txid, $3)'
            ' and (ev_owner is null or ev_owner = %s)',
            q.queue_id * 1000, q.queue_id * 1000 + q.queue_ntables, s.sub_id)
           into pending_events, oldest
          using txid_snapshot_xmin(s.tick_snapshot), s.tick_snapshot, visible;
        pending_since := case when pending_events > 0 then greatest(oldest, s.tick_time) end;
        select coalesce(sum(d.events), 0),
               coalesce(jsonb_object_agg(d.table_name, d.events)
                        filter (where d.table_name is not null), '{}')
          into dead_letters, dead_by_table
          from cdc.get_dead_letter_counts(i_queue_name, s.co_name) d;
        return next;
    end loop;
end;
$$ language plpgsql stable security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc.get_queue_config(queue_name)
--
--      The settings of a queue that cdc.set_queue_config changes, one row each: the name
--      set_queue_config takes and the value as text (NULL: no limit). QC001 for an unknown
--      queue.
--
-- Tables: cdc.queue
-- ----------------------------------------------------------------------
create or replace function cdc.get_queue_config(
    in i_queue_name text, out param_name text, out param_value text)
returns setof record as $$
declare
    q cdc.queue;
begin
    q := cdc._queue(i_queue_name);
    return query select v.name, v.value from (values
        (1, 'ticker_max_count',   q.queue_ticker_max_count::text),
        (2, 'ticker_max_lag',     q.queue_ticker_max_lag::text),
        (3, 'ticker_idle_period', q.queue_ticker_idle_period::text),
        (4, 'ticker_paused',      q.queue_ticker_paused::text),
        (5, 'rotation_period',    q.queue_rotation_period::text),
        (6, 'external_ticker',    q.queue_external_ticker::text),
        (7, 'disable_insert',     q.queue_disable_insert::text),
        (8, 'per_tx_limit',       q.queue_per_tx_limit::text),
        (9, 'max_retries',        q.queue_max_retries::text)) v (ord, name, value)
     order by v.ord;
end;
$$ language plpgsql stable security definer set search_path = pg_catalog, pg_temp;
