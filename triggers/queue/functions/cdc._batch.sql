-- Internal helpers of the queue engine. Not granted to anyone: the public functions, which
-- run as the owner (SECURITY DEFINER), call them.
--
-- An open batch: what is known about it, and the query that returns its events.


-- ----------------------------------------------------------------------
-- Function: cdc._batch(batch_id)
--
--      Everything known about an open batch: its subscription, queue, and both ticks.
--      QC003 if no consumer has this batch open.
--
-- Tables: cdc.subscription, cdc.queue, cdc.consumer, cdc.tick
-- ----------------------------------------------------------------------
create or replace function cdc._batch(
    in  i_batch_id       bigint,
    out sub_id           integer,
    out queue_id         integer,
    out queue_name       text,
    out queue_ntables    integer,
    out consumer_name    text,
    out prev_tick_id     bigint,
    out prev_tick_time   timestamptz,
    out prev_event_seq   bigint,
    out prev_snapshot    txid_snapshot,
    out cur_tick_id      bigint,
    out cur_tick_time    timestamptz,
    out cur_event_seq    bigint,
    out cur_snapshot     txid_snapshot)
as $$
begin
    perform cdc._require(i_batch_id, 'batch id');
    select s.sub_id, q.queue_id, q.queue_name, q.queue_ntables, c.co_name,
           t1.tick_id, t1.tick_time, t1.tick_event_seq, t1.tick_snapshot,
           t2.tick_id, t2.tick_time, t2.tick_event_seq, t2.tick_snapshot
      into sub_id, queue_id, queue_name, queue_ntables, consumer_name,
           prev_tick_id, prev_tick_time, prev_event_seq, prev_snapshot,
           cur_tick_id, cur_tick_time, cur_event_seq, cur_snapshot
      from cdc.subscription s
      join cdc.queue q on q.queue_id = s.sub_queue
      join cdc.consumer c on c.co_id = s.sub_consumer
      join cdc.tick t1 on t1.tick_queue = s.sub_queue and t1.tick_id = s.sub_last_tick
      join cdc.tick t2 on t2.tick_queue = s.sub_queue and t2.tick_id = s.sub_next_tick
     where s.sub_batch = i_batch_id;
    if not found then
        raise exception using errcode = 'QC003',
            message = format('batch %s is not open: it was finished already, or never existed', i_batch_id),
            hint = 'take a new batch with cdc.next_batch()';
    end if;
end;
$$ language plpgsql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._batch_sql(batch_id, ev_ids)
--
--      The query that returns a batch's events, ordered by ev_id. An event belongs to the
--      batch when its transaction is visible in the batch's end snapshot and was not visible
--      in its start snapshot: its txid is in the start snapshot's xip list (it was running
--      then) or at or above the start snapshot's xmax. Both tests use the ev_txid index.
--      Only the consumer's own retried events are included (ev_owner).
--
--      All of the queue's event tables are read, not only the current one: a producer whose
--      snapshot predates a rotation (REPEATABLE READ) may still insert into an older table,
--      and each table costs one index probe when it holds nothing for the batch.
--
--      Every value in the text is generated here, never taken from a caller (the optional
--      arguments are numbers). ev_ids, when given, restricts the result to those events (used
--      by event_retry); ev_id_from / ev_id_to to ev_id_from <= ev_id < ev_id_to (a slice,
--      for parallel readers).
--
-- Returns:
--      SQL text of a SELECT with PgQ's get_batch_events columns.
-- ----------------------------------------------------------------------
create or replace function cdc._batch_sql(
    i_batch_id bigint, i_ev_ids bigint[] default null,
    i_ev_id_from bigint default null, i_ev_id_to bigint default null)
returns text as $$
declare
    b       record;
    xip     bigint[];
    txcond  text;
begin
    select * into b from cdc._batch(i_batch_id);
    xip := array(select txid_snapshot_xip(b.prev_snapshot));
    txcond := format('ev_txid >= %s', txid_snapshot_xmax(b.prev_snapshot));
    if cardinality(xip) > 0 then
        txcond := format('(ev_txid = any (%L::bigint[]) or %s)', xip, txcond);
    end if;
    return format(
        'select ev_id, ev_time, ev_txid, ev_retry, ev_type, ev_data,'
        ' ev_extra1, ev_extra2, ev_extra3, ev_extra4'
        ' from cdc.event'
        ' where ev_part >= %s and ev_part < %s'
        ' and %s and ev_txid < %s'
        ' and txid_visible_in_snapshot(ev_txid, %L::txid_snapshot)'
        ' and (ev_owner is null or ev_owner = %s)%s'
        ' order by ev_id',
        b.queue_id * 1000, b.queue_id * 1000 + b.queue_ntables,
        txcond, txid_snapshot_xmax(b.cur_snapshot), b.cur_snapshot, b.sub_id,
        case when i_ev_ids is null then ''
             else format(' and ev_id = any (%L::bigint[])', i_ev_ids) end
        || case when i_ev_id_from is null then '' else format(' and ev_id >= %s', i_ev_id_from) end
        || case when i_ev_id_to is null then '' else format(' and ev_id < %s', i_ev_id_to) end);
end;
$$ language plpgsql stable;
