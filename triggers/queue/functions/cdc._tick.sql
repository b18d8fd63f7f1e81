-- Internal helpers of the queue engine. Not granted to anyone: the public functions, which
-- run as the owner (SECURITY DEFINER), call them.
--
-- Ticks: when one is due, and inserting one (READ COMMITTED only, QC012).


-- ----------------------------------------------------------------------
-- Function: cdc._require_read_committed()
--
--      Ticks must see every transaction committed before them; a REPEATABLE READ or
--      SERIALIZABLE snapshot taken earlier would break the order of ticks.
-- ----------------------------------------------------------------------
create or replace function cdc._require_read_committed()
returns void as $$
begin
    if current_setting('transaction_isolation') <> 'read committed' then
        raise exception using errcode = 'QC012',
            message = format('ticks must be made in a READ COMMITTED transaction, not %s',
                             upper(current_setting('transaction_isolation'))),
            hint = 'call the ticker in its own transaction at the default isolation level';
    end if;
end;
$$ language plpgsql;


-- ----------------------------------------------------------------------
-- Function: cdc._event_seq(queue)
--
--      The queue's event sequence position: the last ev_id handed out, 0 before any.
-- ----------------------------------------------------------------------
create or replace function cdc._event_seq(q cdc.queue)
returns bigint as $$
    select coalesce(pg_sequence_last_value(q.queue_event_seq::regclass), 0);
$$ language sql;


-- ----------------------------------------------------------------------
-- Function: cdc._tick_due(queue)
--
--      Whether the ticker should tick this queue now: forced; or new events reached
--      ticker_max_count; or there are new events and ticker_max_lag has passed since the last
--      tick; or there are none and ticker_idle_period has passed.
-- ----------------------------------------------------------------------
create or replace function cdc._tick_due(q cdc.queue)
returns boolean as $$
declare
    last_time  timestamptz;
    last_seq   bigint;
    new_events bigint;
begin
    if q.queue_force_tick then
        return true;
    end if;
    select tick_time, tick_event_seq into last_time, last_seq
      from cdc.tick where tick_queue = q.queue_id
     order by tick_id desc limit 1;
    if not found then
        return true;
    end if;
    new_events := cdc._event_seq(q) - last_seq;
    if new_events > 0 then
        return new_events >= q.queue_ticker_max_count
            or now() - last_time >= q.queue_ticker_max_lag;
    end if;
    return now() - last_time >= q.queue_ticker_idle_period;
end;
$$ language plpgsql;


-- ----------------------------------------------------------------------
-- Function: cdc._insert_tick(queue [, tick_id, tick_time, event_seq])
--
--      Inserts a tick (the current snapshot and event sequence position, or the given id,
--      time and position for an external ticker), clears a forced tick, and notifies channel
--      'cdc_tick' with payload {"queue": name, "tick_id": id}. The caller holds the queue row
--      lock, which makes ticks one at a time.
--
-- Returns:
--      The new tick id.
-- ----------------------------------------------------------------------
create or replace function cdc._insert_tick(
    q cdc.queue, i_tick_id bigint, i_tick_time timestamptz, i_event_seq bigint)
returns bigint as $$
begin
    insert into cdc.tick (tick_queue, tick_id, tick_time, tick_event_seq)
    values (q.queue_id, i_tick_id, i_tick_time, i_event_seq);
    if q.queue_force_tick then
        update cdc.queue set queue_force_tick = false where queue_id = q.queue_id;
    end if;
    perform pg_notify('cdc_tick', json_build_object('queue', q.queue_name, 'tick_id', i_tick_id)::text);
    return i_tick_id;
end;
$$ language plpgsql;

create or replace function cdc._insert_tick(q cdc.queue)
returns bigint as $$
    select cdc._insert_tick(q, nextval(q.queue_tick_seq::regclass), now(), cdc._event_seq(q));
$$ language sql;


-- ----------------------------------------------------------------------
-- Function: cdc._tickable_queue(queue_name, external)
--
--      The queue, locked for a tick, after the checks both tickers make: READ COMMITTED
--      (QC012), the queue's ticks from the caller's kind of ticker, the general one or an
--      external one, and not paused (QC011).
-- ----------------------------------------------------------------------
create or replace function cdc._tickable_queue(i_queue_name text, i_external boolean)
returns cdc.queue as $$
declare
    q cdc.queue;
begin
    perform cdc._require_read_committed();
    q := cdc._queue(i_queue_name, true);
    if q.queue_external_ticker and not i_external then
        raise exception using errcode = 'QC011',
            message = format('queue %L takes its ticks from an external ticker', i_queue_name),
            hint = 'set external_ticker to false with cdc.set_queue_config() to tick it here';
    elsif i_external and not q.queue_external_ticker then
        raise exception using errcode = 'QC011',
            message = format('queue %L does not take ticks from an external ticker', i_queue_name),
            hint = 'set external_ticker to true with cdc.set_queue_config() to tick it from outside';
    end if;
    if q.queue_ticker_paused then
        raise exception using errcode = 'QC011',
            message = format('the ticker is paused for queue %L', i_queue_name),
            hint = 'set ticker_paused to false with cdc.set_queue_config()';
    end if;
    return q;
end;
$$ language plpgsql;
