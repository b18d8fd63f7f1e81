-- Internal helpers of the queue engine. Not granted to anyone: the public functions, which
-- run as the owner (SECURITY DEFINER), call them.
--
-- Whether a queue takes events now: disabled inserts (QC008) and the per-transaction event
-- limit (QC007). cdc.insert_event and the capture triggers ask here.


-- ----------------------------------------------------------------------
-- Function: cdc._count_tx_event(queue_id, limit, n)
--
--      Counts n more events of this queue in the current transaction and raises QC007 past
--      the queue's per-transaction limit. The count lives in a transaction-local setting, so
--      it resets at commit or rollback, and at the rollback of a savepoint (the events rolled
--      back are not in the queue, so they do not count).
-- ----------------------------------------------------------------------
create or replace function cdc._count_tx_event(i_queue_id integer, i_limit integer, i_n bigint default 1)
returns void as $$
declare
    key text := 'cdc.tx_events_' || i_queue_id;
    n   bigint;
begin
    n := coalesce(nullif(current_setting(key, true), ''), '0')::bigint + i_n;
    if n > i_limit then
        raise exception using errcode = 'QC007',
            message = format('transaction exceeds the limit of %s events for queue id %s', i_limit, i_queue_id),
            hint = 'split the change into smaller transactions, or raise the queue''s per_tx_limit';
    end if;
    perform set_config(key, n::text, true);
end;
$$ language plpgsql;


-- ----------------------------------------------------------------------
-- Function: cdc._admit_events(queue, n)
--
--      Lets n more events into the queue, or raises: QC008 when its inserts are disabled
--      (except under session_replication_role = replica, as in PgQ: a replication replay is
--      not refused), QC007 past its per_tx_limit (which counts in replica mode too).
-- ----------------------------------------------------------------------
create or replace function cdc._admit_events(q cdc.queue, i_n bigint)
returns void as $$
begin
    if q.queue_disable_insert and current_setting('session_replication_role') <> 'replica' then
        raise exception using errcode = 'QC008',
            message = format('inserts into queue %L are disabled', q.queue_name),
            hint = 'enable them with cdc.set_queue_config(queue, ''disable_insert'', ''false'')';
    end if;
    if q.queue_per_tx_limit is not null then
        perform cdc._count_tx_event(q.queue_id, q.queue_per_tx_limit, i_n);
    end if;
end;
$$ language plpgsql;
