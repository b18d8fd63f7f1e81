-- ----------------------------------------------------------------------
-- Function: cdc.event_retry(batch_id, ev_id, retry_time | retry_seconds)
--
--      Puts one event of an open batch into the retry queue: it comes back, to this
--      consumer only, in a batch after retry_time (cdc.maint_retry_events re-inserts it
--      with its original ev_id and ev_retry + 1). An event that has already been retried
--      max_retries times (a queue setting) goes to cdc.dead_letter instead.
--      QC010 if the event is not in the batch.
--
-- Returns:
--      1, or 0 when this consumer already put the event in the retry queue: it keeps its
--      first retry time (as in PgQ).
-- Tables: cdc.retry_queue, cdc.dead_letter
-- ----------------------------------------------------------------------
create or replace function cdc.event_retry(
    x_batch_id bigint, x_event_id bigint, x_retry_time timestamptz)
returns integer as $$
declare
    s cdc.subscription;
begin
    perform cdc._require(x_event_id, 'event id');
    perform cdc._require(x_retry_time, 'retry time');
    s := cdc._batch_subscription(x_batch_id);  -- QC003, QC014
    if exists (select 1 from cdc.retry_queue r where r.ev_owner = s.sub_id and r.ev_id = x_event_id) then
        return 0;  -- already waiting for its retry: its first retry time stays (as in PgQ)
    end if;
    if cdc._retry_events(x_batch_id, array[x_event_id], x_retry_time, null) = 0 then
        perform cdc._event_not_in_batch(x_batch_id, x_event_id);
    end if;
    return 1;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;

create or replace function cdc.event_retry(
    x_batch_id bigint, x_event_id bigint, x_retry_seconds integer)
returns integer as $$
begin
    perform cdc._require(x_retry_seconds, 'retry seconds');
    return cdc.event_retry(x_batch_id, x_event_id, now() + make_interval(secs => x_retry_seconds));
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc.batch_retry(batch_id, retry_seconds)
--
--      Puts every event of an open batch into the retry queue (see cdc.event_retry). Events
--      already there (cdc.event_retry) keep their own retry time.
--
-- Returns:
--      Number of events moved.
-- ----------------------------------------------------------------------
create or replace function cdc.batch_retry(i_batch_id bigint, i_retry_seconds integer)
returns integer as $$
begin
    perform cdc._require(i_retry_seconds, 'retry seconds');
    perform cdc._batch_subscription(i_batch_id);  -- QC003, QC014
    return cdc._retry_events(i_batch_id, null, now() + make_interval(secs => i_retry_seconds), null);
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc.event_dead(batch_id, ev_id, reason)
--
--      Gives up on one event of an open batch: it goes to cdc.dead_letter with the reason
--      and is not delivered again. QC010 if the event is not in the batch.
--
-- Returns:
--      1
-- Tables: cdc.dead_letter
-- ----------------------------------------------------------------------
create or replace function cdc.event_dead(i_batch_id bigint, i_ev_id bigint, i_reason text)
returns integer as $$
declare
    b      record;
    moved  integer;
begin
    perform cdc._require(i_ev_id, 'event id');
    perform cdc._require(i_reason, 'reason');
    perform cdc._batch_subscription(i_batch_id);  -- QC003, QC014
    select * into b from cdc._batch(i_batch_id);
    execute format('insert into cdc.dead_letter (dl_queue, dl_consumer, dl_reason, ev_id, ev_time,'
                   ' ev_txid, ev_retry, ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4)'
                   ' select %s, %L, %L, * from (%s) ev',
                   b.queue_id, b.consumer_name, i_reason, cdc._batch_sql(i_batch_id, array[i_ev_id]));
    get diagnostics moved = row_count;
    if moved = 0 then
        perform cdc._event_not_in_batch(i_batch_id, i_ev_id);
    end if;
    return 1;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;
