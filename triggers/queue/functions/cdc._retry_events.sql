-- Internal helpers of the queue engine. Not granted to anyone: the public functions, which
-- run as the owner (SECURITY DEFINER), call them.
--
-- Moving events of an open batch to the retry queue or the dead letters (QC010).


-- ----------------------------------------------------------------------
-- Function: cdc._event_not_in_batch(batch_id, ev_id)
--
--      Raises QC010.
-- ----------------------------------------------------------------------
create or replace function cdc._event_not_in_batch(i_batch_id bigint, i_ev_id bigint)
returns void as $$
begin
    raise exception using errcode = 'QC010',
        message = format('event %s is not in batch %s', i_ev_id, i_batch_id),
        hint = 'use an ev_id that the batch returned';
end;
$$ language plpgsql;


-- ----------------------------------------------------------------------
-- Function: cdc._retry_events(batch_id, ev_ids, retry_after, reason)
--
--      Moves events of an open batch (all of them when ev_ids is NULL) into the retry queue
--      of the batch's consumer. Events that already used up the queue's max_retries go to
--      cdc.dead_letter instead, with the reason. An event this consumer already put in the
--      retry queue stays there with its first retry time and is not counted (PgQ's rule:
--      event_retry then batch_retry keeps the event's own delay).
--
-- Returns:
--      Number of events moved.
-- Tables: cdc.retry_queue, cdc.dead_letter
-- ----------------------------------------------------------------------
create or replace function cdc._retry_events(
    i_batch_id bigint, i_ev_ids bigint[], i_retry_after timestamptz, i_reason text)
returns integer as $$
declare
    b       record;
    q       cdc.queue;
    ev      record;
    moved   integer := 0;
begin
    select * into b from cdc._batch(i_batch_id);
    select * into q from cdc.queue where queue_id = b.queue_id;
    for ev in execute cdc._batch_sql(i_batch_id, i_ev_ids) loop
        if exists (select 1 from cdc.retry_queue r where r.ev_owner = b.sub_id and r.ev_id = ev.ev_id) then
            continue;
        end if;
        if q.queue_max_retries is not null and coalesce(ev.ev_retry, 0) >= q.queue_max_retries then
            insert into cdc.dead_letter (dl_queue, dl_consumer, dl_reason, ev_id, ev_time, ev_txid,
                                         ev_retry, ev_type, ev_data, ev_extra1, ev_extra2,
                                         ev_extra3, ev_extra4)
            values (b.queue_id, b.consumer_name,
                    coalesce(i_reason || ': ', '') || format('retry limit of %s reached', q.queue_max_retries),
                    ev.ev_id, ev.ev_time, ev.ev_txid, ev.ev_retry, ev.ev_type, ev.ev_data,
                    ev.ev_extra1, ev.ev_extra2, ev.ev_extra3, ev.ev_extra4);
        else
            insert into cdc.retry_queue (ev_retry_after, ev_queue, ev_id, ev_time, ev_txid, ev_owner,
                                         ev_retry, ev_type, ev_data, ev_extra1, ev_extra2,
                                         ev_extra3, ev_extra4)
            values (i_retry_after, b.queue_id, ev.ev_id, ev.ev_time, ev.ev_txid, b.sub_id,
                    coalesce(ev.ev_retry, 0) + 1, ev.ev_type, ev.ev_data,
                    ev.ev_extra1, ev.ev_extra2, ev.ev_extra3, ev.ev_extra4);
        end if;
        moved := moved + 1;
    end loop;
    return moved;
end;
$$ language plpgsql;
