-- Internal helpers of the queue engine. Not granted to anyone: the public functions, which
-- run as the owner (SECURITY DEFINER), call them.
--
-- Looking a queue, or a consumer's subscription on it, up by name (QC001, QC002).


-- ----------------------------------------------------------------------
-- Function: cdc._queue(queue_name, lock)
--
--      Looks a queue up by name, optionally locking its row. Every operation that changes the
--      queue's structure or ticks it (ticker, rotation, consumer registration, config) locks
--      the row, so they run one at a time; producers and batch readers never lock it.
--
-- Tables: cdc.queue
-- ----------------------------------------------------------------------
create or replace function cdc._queue(i_queue_name text, i_lock boolean default false)
returns cdc.queue as $$
declare
    q cdc.queue;
begin
    perform cdc._require(i_queue_name, 'queue name');
    if i_lock then
        select * into q from cdc.queue where queue_name = i_queue_name for update;
    else
        select * into q from cdc.queue where queue_name = i_queue_name;
    end if;
    if not found then
        raise exception using errcode = 'QC001',
            message = format('queue %L does not exist', i_queue_name),
            hint = 'create it with cdc.create_queue(), or check the name with cdc.get_queue_info()';
    end if;
    return q;
end;
$$ language plpgsql;


-- ----------------------------------------------------------------------
-- Function: cdc._subscription(queue_name, consumer_name, lock)
--
--      The subscription of a consumer on a queue, or QC001 / QC002.
--
-- Tables: cdc.subscription, cdc.consumer, cdc.queue
-- ----------------------------------------------------------------------
create or replace function cdc._subscription(
    i_queue_name text, i_consumer_name text, i_lock boolean default false)
returns cdc.subscription as $$
declare
    q cdc.queue;
    s cdc.subscription;
begin
    q := cdc._queue(i_queue_name);
    perform cdc._require(i_consumer_name, 'consumer name');
    if i_lock then
        select s1.* into s from cdc.subscription s1 join cdc.consumer c on c.co_id = s1.sub_consumer
         where s1.sub_queue = q.queue_id and c.co_name = i_consumer_name
           for update of s1;
    else
        select s1.* into s from cdc.subscription s1 join cdc.consumer c on c.co_id = s1.sub_consumer
         where s1.sub_queue = q.queue_id and c.co_name = i_consumer_name;
    end if;
    if not found then
        raise exception using errcode = 'QC002',
            message = format('consumer %L is not registered on queue %L', i_consumer_name, i_queue_name),
            hint = 'register it with cdc.register_consumer()';
    end if;
    return s;
end;
$$ language plpgsql;
