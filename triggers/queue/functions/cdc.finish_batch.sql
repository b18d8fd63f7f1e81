-- ----------------------------------------------------------------------
-- Function: cdc.finish_batch(batch_id)
--
--      Closes a batch: the consumer's position moves to the batch's end tick. A batch that
--      is not open (finished already, never existed, or NULL) changes nothing: a WARNING
--      says so and the result is 0, as in PgQ, so that a script that finishes a batch twice
--      goes on. QC014 if the batch's consumer is another role's.
--
-- Returns:
--      1 if the batch was closed, 0 if it was not open.
-- Tables: cdc.subscription
-- ----------------------------------------------------------------------
create or replace function cdc.finish_batch(x_batch_id bigint)
returns integer as $$
declare
    s cdc.subscription;
begin
    select * into s from cdc.subscription where sub_batch = x_batch_id;
    if found then
        perform cdc._check_consumer_access(s);  -- QC014
        update cdc.subscription
           set sub_last_tick = sub_next_tick, sub_next_tick = null, sub_batch = null, sub_active = now()
         where sub_id = s.sub_id and sub_batch = x_batch_id;
    end if;
    if not found then  -- not open, or finished by a concurrent call since
        raise warning 'finish_batch: batch % not found', x_batch_id
            using hint = 'the batch was finished already or never existed; take a new one with cdc.next_batch()';
        return 0;
    end if;
    return 1;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;
