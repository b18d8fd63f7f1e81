-- ----------------------------------------------------------------------
-- Function: cdc.finish_batch(batch_id)
--
--      Closes a batch: the consumer's position moves to the batch's end tick. QC003 if the
--      batch is not open, QC014 if its consumer is another role's.
--
-- Returns:
--      1
-- Tables: cdc.subscription
-- ----------------------------------------------------------------------
create or replace function cdc.finish_batch(i_batch_id bigint)
returns integer as $$
declare
    s cdc.subscription;
begin
    s := cdc._batch_subscription(i_batch_id);  -- QC003, QC014
    update cdc.subscription
       set sub_last_tick = sub_next_tick, sub_next_tick = null, sub_batch = null, sub_active = now()
     where sub_id = s.sub_id and sub_batch = i_batch_id;
    if not found then  -- finished by a concurrent call since
        raise exception using errcode = 'QC003',
            message = format('batch %s is not open: it was finished already, or never existed', i_batch_id),
            hint = 'take a new batch with cdc.next_batch()';
    end if;
    return 1;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;
