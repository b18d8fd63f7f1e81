-- ----------------------------------------------------------------------
-- Function: cdc.ticker(queue_name)
--
--      Ticks one queue if a tick is due (see cdc._tick_due), and notifies channel
--      'cdc_tick'. Raises QC011 for a paused queue or one with an external ticker, QC012
--      outside READ COMMITTED. Ticks of a queue are made one at a time (queue row lock), so
--      their snapshots follow tick order.
--
-- Returns:
--      The new tick id, or NULL when no tick was due.
-- Tables: cdc.tick
-- ----------------------------------------------------------------------
create or replace function cdc.ticker(i_queue_name text)
returns bigint as $$
declare
    q cdc.queue;
begin
    q := cdc._tickable_queue(i_queue_name, false);  -- QC011, QC012
    if cdc._tick_due(q) then
        return cdc._insert_tick(q);
    end if;
    return null;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc.ticker(queue_name, tick_id, orig_timestamp, event_seq)
--
--      The external ticker: inserts exactly this tick (id, time and event sequence
--      position) into a queue with external_ticker set, with the current snapshot, like any
--      tick (queue row lock, READ COMMITTED, notification on 'cdc_tick'). The queue's tick
--      and event sequences are raised to the given values when they are lower, never
--      lowered. QC011 for a queue without external_ticker or a paused one; QC006 for a
--      NULL argument or a tick id not above the queue's last tick (PgQ accepts a lower id,
--      which would put a newer snapshot before an older one and break batches).
--      Only cdc_admin members (and the owner of schema cdc) may call it, QC015 for others:
--      cdc_reader may execute every ticker overload, but the ids given here decide the
--      queue's later ticks, so a reader must not choose them.
--
-- Returns:
--      The tick id.
-- Tables: cdc.tick
-- ----------------------------------------------------------------------
create or replace function cdc.ticker(
    i_queue_name text, i_tick_id bigint, i_orig_timestamp timestamptz, i_event_seq bigint)
returns bigint as $$
declare
    q     cdc.queue;
    last  bigint;
begin
    if not cdc._may_act_for(null) then  -- cdc_admin members and the schema owner's
        raise exception using errcode = 'QC015',
            message = format('role %s may not run the external ticker: only cdc_admin members may',
                             quote_ident(session_user)),
            hint = 'connect as a member of cdc_admin';
    end if;
    q := cdc._tickable_queue(i_queue_name, true);  -- QC011, QC012
    perform cdc._require(i_tick_id, 'tick id');
    perform cdc._require(i_orig_timestamp, 'tick time');
    perform cdc._require(i_event_seq, 'event sequence position');
    select max(tick_id) into last from cdc.tick where tick_queue = q.queue_id;
    if i_tick_id <= last then
        raise exception using errcode = 'QC006',
            message = format('tick id %s of queue %L is not above its last tick %s',
                             i_tick_id, i_queue_name, last),
            hint = 'an external ticker gives each queue increasing tick ids';
    end if;
    perform cdc._insert_tick(q, i_tick_id, i_orig_timestamp, i_event_seq);
    perform cdc.seq_setval(q.queue_tick_seq, i_tick_id);
    perform cdc.seq_setval(q.queue_event_seq, i_event_seq);
    return i_tick_id;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc.ticker()
--
--      Ticks every queue that is due, skipping paused queues, queues with an external
--      ticker, and queues another ticker is ticking at this moment.
--
-- Returns:
--      Number of ticks made.
-- ----------------------------------------------------------------------
create or replace function cdc.ticker()
returns bigint as $$
declare
    q     cdc.queue;
    made  bigint := 0;
begin
    perform cdc._require_read_committed();
    for q in select * from cdc.queue
              where not queue_ticker_paused and not queue_external_ticker
              order by queue_id
                for update skip locked
    loop
        if cdc._tick_due(q) then
            perform cdc._insert_tick(q);
            made := made + 1;
        end if;
    end loop;
    return made;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc.force_tick(queue_name)
--
--      Makes the next ticker call tick this queue whatever its thresholds.
--
-- Returns:
--      The queue's last tick id, so that a caller can wait for a newer one.
-- ----------------------------------------------------------------------
create or replace function cdc.force_tick(i_queue_name text)
returns bigint as $$
declare
    q cdc.queue;
begin
    q := cdc._queue(i_queue_name, true);
    update cdc.queue set queue_force_tick = true where queue_id = q.queue_id;
    return (select max(tick_id) from cdc.tick where tick_queue = q.queue_id);
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;
