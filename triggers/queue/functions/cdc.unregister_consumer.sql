-- ----------------------------------------------------------------------
-- Function: cdc.unregister_consumer(queue_name, consumer_name)
--
--      Removes a consumer's subscription, with its pending retries. QC002 if the consumer
--      is not registered on the queue, QC014 if it is another role's.
--
-- Returns:
--      1
-- ----------------------------------------------------------------------
create or replace function cdc.unregister_consumer(x_queue_name text, x_consumer_name text)
returns integer as $$
declare
    q  cdc.queue;
    s  cdc.subscription;
begin
    q := cdc._queue(x_queue_name, true);
    s := cdc._subscription(x_queue_name, x_consumer_name, true);
    perform cdc._check_consumer_access(s);
    delete from cdc.subscription where sub_id = s.sub_id;
    delete from cdc.consumer c
     where c.co_id = s.sub_consumer
       and not exists (select 1 from cdc.subscription where sub_consumer = c.co_id);
    return 1;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;
