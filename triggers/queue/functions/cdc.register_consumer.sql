-- ----------------------------------------------------------------------
-- Function: cdc.register_consumer(queue_name, consumer_name)
--
--      Subscribes a consumer to a queue at the queue's latest tick: it sees every event
--      committed after that tick, none before. The consumer belongs to the session's role
--      (SET ROLE's, else the login role): only that role's members and cdc_admin members may
--      act for it afterwards (QC014 for others, also here when it is registered already).
--
-- Returns:
--      1 if the consumer was registered, 0 if it was registered already.
-- Tables: cdc.consumer, cdc.subscription
-- ----------------------------------------------------------------------
create or replace function cdc.register_consumer(x_queue_name text, x_consumer_id text)
returns integer as $$
declare
    q     cdc.queue;
    last  bigint;
begin
    q := cdc._queue(x_queue_name, true);
    select max(tick_id) into last from cdc.tick where tick_queue = q.queue_id;
    return cdc._subscribe(q, x_consumer_id, last, false);
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc.register_consumer_at(queue_name, consumer_name, tick_id)
--
--      Subscribes a consumer at a given tick, or moves a registered consumer there (dropping
--      its open batch, if any). The tick must still exist: ticks older than every
--      consumer's position are removed by maintenance, and with them the events they
--      would need (QC004). Moving another role's consumer: QC014.
--
-- Returns:
--      1 if the consumer was registered, 0 if it was moved.
-- ----------------------------------------------------------------------
create or replace function cdc.register_consumer_at(
    x_queue_name text, x_consumer_name text, x_tick_pos bigint)
returns integer as $$
declare
    q cdc.queue;
begin
    q := cdc._queue(x_queue_name, true);
    perform cdc._require(x_tick_pos, 'tick id');
    if not exists (select 1 from cdc.tick where tick_queue = q.queue_id and tick_id = x_tick_pos) then
        raise exception using errcode = 'QC004',
            message = format('tick %s of queue %L does not exist (any more)', x_tick_pos, x_queue_name),
            hint = 'choose a tick listed in cdc.tick for this queue';
    end if;
    return cdc._subscribe(q, x_consumer_name, x_tick_pos, true);
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc._subscribe(queue, consumer_name, tick_id, move)
--
--      Creates the consumer if needed and its subscription at tick_id, owned by the
--      session's role (cdc._session_role); an existing subscription, once this session is
--      found to be allowed to act for it, is moved there when move is true and left alone
--      otherwise.
-- ----------------------------------------------------------------------
create or replace function cdc._subscribe(
    q cdc.queue, i_consumer_name text, i_tick_id bigint, i_move boolean)
returns integer as $$
declare
    cid integer;
begin
    perform cdc._check_name('consumer', i_consumer_name);
    insert into cdc.consumer (co_name) values (i_consumer_name) on conflict (co_name) do nothing;
    select co_id into cid from cdc.consumer where co_name = i_consumer_name;
    insert into cdc.subscription (sub_queue, sub_consumer, sub_last_tick, sub_owner)
    values (q.queue_id, cid, i_tick_id, cdc._session_role())
    on conflict (sub_queue, sub_consumer) do nothing;
    if found then
        return 1;
    end if;
    perform cdc._check_consumer_access(s)
       from cdc.subscription s where s.sub_queue = q.queue_id and s.sub_consumer = cid;
    if i_move then
        update cdc.subscription
           set sub_last_tick = i_tick_id, sub_next_tick = null, sub_batch = null, sub_active = now()
         where sub_queue = q.queue_id and sub_consumer = cid;
    end if;
    return 0;
end;
$$ language plpgsql;
