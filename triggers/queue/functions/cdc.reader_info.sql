-- What a consumer reads about its queue besides its batches, for roles that may not read the
-- engine's tables (a cdc_reader member: the drain, the snapshot, verify, status). Each one
-- is SECURITY DEFINER with a pinned search_path and granted to cdc_reader (grants.sql): the
-- drain never reads cdc.tick or cdc.subscription itself, so that a missing privilege cannot
-- quietly change what it does.


-- ----------------------------------------------------------------------
-- Function: cdc.next_batch_ticks(queue_name, consumer_name, max_events)
--
--      The min_count for cdc.next_batch_custom that makes the consumer's next batch join as
--      many ticks as hold at most max_events events (by the event sequence), at least one.
--
-- Returns:
--      That count, or NULL when the consumer has a batch open, is not registered, or no
--      later tick fits.
-- Tables: cdc.subscription, cdc.tick
-- ----------------------------------------------------------------------
create or replace function cdc.next_batch_ticks(
    i_queue_name text, i_consumer_name text, i_max_events bigint)
returns bigint as $$
declare
    s    cdc.subscription;
    prev bigint;
begin
    perform cdc._require(i_queue_name, 'queue name');
    perform cdc._require(i_consumer_name, 'consumer name');
    perform cdc._require(i_max_events, 'max events');
    select sub.* into s
      from cdc.subscription sub
      join cdc.queue q on q.queue_id = sub.sub_queue
      join cdc.consumer c on c.co_id = sub.sub_consumer
     where q.queue_name = i_queue_name and c.co_name = i_consumer_name;
    if not found or s.sub_batch is not null then
        return null;
    end if;
    select tick_event_seq into prev from cdc.tick
     where tick_queue = s.sub_queue and tick_id = s.sub_last_tick;
    return (select max(t.tick_event_seq) - prev
              from cdc.tick t
             where t.tick_queue = s.sub_queue and t.tick_id > s.sub_last_tick
               and t.tick_event_seq - prev <= i_max_events);
end;
$$ language plpgsql stable security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc.queue_has_new_events(queue_name)
--
--      Whether events may have arrived since the queue's last tick: the event sequence moved,
--      or a transaction that was running at the last tick has ended since (its events were
--      numbered before that tick and come after it). A follow-mode drain asks before ticking.
--      QC001 for an unknown queue.
--
-- Tables: cdc.queue, cdc.tick
-- ----------------------------------------------------------------------
create or replace function cdc.queue_has_new_events(i_queue_name text)
returns boolean as $$
declare
    q    cdc.queue;
    last cdc.tick;
begin
    q := cdc._queue(i_queue_name);
    select * into last from cdc.tick where tick_queue = q.queue_id order by tick_id desc limit 1;
    if not found then
        return true;
    end if;
    return cdc._event_seq(q) > last.tick_event_seq
        or exists (select 1 from txid_snapshot_xip(last.tick_snapshot) x
                    where txid_status(x) is distinct from 'in progress');
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc.get_tick_snapshot(queue_name, tick_id)
--
--      The snapshot a tick was made with (as text), NULL for an unknown tick. A snapshot's
--      copy is covered by the first tick whose snapshot sees every transaction it saw.
--      QC001 for an unknown queue.
--
-- Tables: cdc.tick
-- ----------------------------------------------------------------------
create or replace function cdc.get_tick_snapshot(i_queue_name text, i_tick_id bigint)
returns text as $$
declare
    q cdc.queue;
begin
    q := cdc._queue(i_queue_name);
    perform cdc._require(i_tick_id, 'tick id');
    return (select t.tick_snapshot::text from cdc.tick t
             where t.tick_queue = q.queue_id and t.tick_id = i_tick_id);
end;
$$ language plpgsql stable security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc.get_dead_letter_counts(queue_name, consumer_name)
--
--      The consumer's dead letters on the queue by the table their events name (ev_extra1,
--      NULL for events without one). QC001 for an unknown queue.
--
-- Tables: cdc.dead_letter
-- ----------------------------------------------------------------------
create or replace function cdc.get_dead_letter_counts(
    i_queue_name text, i_consumer_name text, out table_name text, out events bigint)
returns setof record as $$
declare
    q cdc.queue;
begin
    q := cdc._queue(i_queue_name);
    perform cdc._require(i_consumer_name, 'consumer name');
    return query
        select d.ev_extra1, count(*)
          from cdc.dead_letter d
         where d.dl_queue = q.queue_id and d.dl_consumer = i_consumer_name
         group by d.ev_extra1
         order by 1;
end;
$$ language plpgsql stable security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc.tick_at_snapshot(queue_name)
--
--      Makes a tick of the queue with the snapshot of the calling REPEATABLE READ
--      transaction, so that a second session that imports that snapshot (SET TRANSACTION
--      SNAPSHOT, after pg_export_snapshot() here) sees of every table exactly what the tick
--      sees: the consistent point of `cdc verify`, without locking the tables it verifies.
--
--      Ticks must follow each other in snapshot order. The queue row lock makes ticks one at
--      a time; a tick committed after this transaction's snapshot was taken (invisible to
--      it, but its id handed out by the tick sequence) would precede this one with a newer
--      snapshot, so that case raises serialization_failure (40001): call again in a new
--      transaction. A tick rolled back leaves the same trace until the next tick: the caller
--      makes an ordinary tick before trying again. QC012 outside REPEATABLE READ, QC011 for
--      a queue with an external ticker or a paused ticker, QC001 for an unknown queue.
--
-- Returns:
--      The new tick id.
-- Tables: cdc.queue, cdc.tick
-- ----------------------------------------------------------------------
create or replace function cdc.tick_at_snapshot(i_queue_name text)
returns bigint as $$
declare
    q       cdc.queue;
    visible bigint;
begin
    perform cdc._require(i_queue_name, 'queue name');
    if current_setting('transaction_isolation') <> 'repeatable read' then
        raise exception using errcode = 'QC012',
            message = format('cdc.tick_at_snapshot() needs a REPEATABLE READ transaction, not %s',
                             upper(current_setting('transaction_isolation'))),
            hint = 'begin isolation level repeatable read, and call it before any other query';
    end if;
    q := cdc._queue(i_queue_name, true);
    if q.queue_external_ticker or q.queue_ticker_paused then
        raise exception using errcode = 'QC011',
            message = format('queue %L %s', i_queue_name,
                             case when q.queue_external_ticker
                                  then 'takes its ticks from an external ticker'
                                  else 'has its ticker paused' end),
            hint = 'set external_ticker and ticker_paused to false with cdc.set_queue_config()';
    end if;
    select max(tick_id) into visible from cdc.tick where tick_queue = q.queue_id;
    if coalesce(pg_sequence_last_value(q.queue_tick_seq::regclass), 0) <> coalesce(visible, 0) then
        raise exception using errcode = 'serialization_failure',
            message = format('queue %L ticked after this transaction''s snapshot was taken',
                             i_queue_name),
            hint = 'make an ordinary tick, then try again in a new transaction';
    end if;
    return cdc._insert_tick(q);
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc.consumer_owner(queue_name, consumer_name)
--
--      Who may act for a consumer, asked before a command starts (cdc.pg.privileges): the
--      role it belongs to (NULL when none: cdc_admin members only), and whether this session
--      may act for it (cdc._may_act_for). No row when the consumer is not registered.
--      QC001 for an unknown queue.
--
-- Tables: cdc.subscription, cdc.consumer
-- ----------------------------------------------------------------------
create or replace function cdc.consumer_owner(
    i_queue_name text, i_consumer_name text, out owner text, out allowed boolean)
returns setof record as $$
declare
    q cdc.queue;
begin
    q := cdc._queue(i_queue_name);
    perform cdc._require(i_consumer_name, 'consumer name');
    return query
        select r.rolname::text, cdc._may_act_for(s.sub_owner)
          from cdc.subscription s
          join cdc.consumer c on c.co_id = s.sub_consumer
          left join pg_catalog.pg_roles r on r.oid = s.sub_owner
         where s.sub_queue = q.queue_id and c.co_name = i_consumer_name;
end;
$$ language plpgsql stable security definer set search_path = pg_catalog, pg_temp;
