-- Internal helpers of the queue engine. Not granted to anyone: the public functions, which
-- run as the owner (SECURITY DEFINER), call them.
--
-- The per-transaction event limit of a queue (QC007).


-- ----------------------------------------------------------------------
-- Function: cdc._count_tx_event(queue_id, limit)
--
--      Counts one more event of this queue in the current transaction and raises QC007 past
--      the queue's per-transaction limit. The count lives in a transaction-local setting, so
--      it resets at commit or rollback and at the rollback of a savepoint.
-- ----------------------------------------------------------------------
create or replace function cdc._count_tx_event(i_queue_id integer, i_limit integer)
returns void as $$
declare
    key text := 'cdc.tx_events_' || i_queue_id;
    n   integer;
begin
    n := coalesce(nullif(current_setting(key, true), ''), '0')::integer + 1;
    if n > i_limit then
        raise exception using errcode = 'QC007',
            message = format('transaction exceeds the limit of %s events for queue id %s', i_limit, i_queue_id),
            hint = 'split the change into smaller transactions, or raise the queue''s per_tx_limit';
    end if;
    perform set_config(key, n::text, true);
end;
$$ language plpgsql;
