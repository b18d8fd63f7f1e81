-- ----------------------------------------------------------------------
-- Function: cdc.drop_queue(queue_name [, force])
--
--      Drops a queue with its events, ticks, retry and dead-letter rows. Refuses (QC009)
--      while consumers are registered, unless force is true.
--
-- Returns:
--      1
-- Tables: cdc.queue and everything that references it
-- ----------------------------------------------------------------------
create or replace function cdc.drop_queue(x_queue_name text, x_force boolean)
returns integer as $$
declare
    q          cdc.queue;
    consumers  text;
begin
    perform cdc._require(x_force, 'force');
    q := cdc._queue(x_queue_name, true);
    select string_agg(quote_literal(c.co_name), ', ' order by c.co_name) into consumers
      from cdc.subscription s join cdc.consumer c on c.co_id = s.sub_consumer
     where s.sub_queue = q.queue_id;
    if consumers is not null and not x_force then
        raise exception using errcode = 'QC009',
            message = format('queue %L still has consumers: %s', x_queue_name, consumers),
            hint = 'unregister them first, or call cdc.drop_queue(name, true)';
    end if;
    for n in 0 .. q.queue_ntables - 1 loop
        execute format('drop table cdc.%I', cdc._event_table(q.queue_id, n));
    end loop;
    delete from cdc.queue where queue_id = q.queue_id;
    execute format('drop sequence cdc.%I', 'event_' || q.queue_id || '_id_seq');
    execute format('drop sequence cdc.%I', 'event_' || q.queue_id || '_tick_seq');
    execute format('drop sequence if exists cdc.%I', 'event_' || q.queue_id || '_cur');
    return 1;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;

create or replace function cdc.drop_queue(x_queue_name text)
returns integer as $$
    select cdc.drop_queue(x_queue_name, false);
$$ language sql security definer set search_path = pg_catalog, pg_temp;
