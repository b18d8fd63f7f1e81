-- Named queries of `cdc status`, `cdc consumer` and `cdc queue config` (cdc.ops.status), for
-- both queue engines: {schema} is the engine's schema, passed as an identifier.

-- name: queue_info
select * from {schema}.get_queue_info(%(queue)s);

-- name: consumer_info
-- Every consumer of the queue, by sequence values (PgQ's get_consumer_info).
select * from {schema}.get_consumer_info(%(queue)s);

-- name: consumer_status
-- Every consumer of the queue with its exact pending events and dead letters (our engine),
-- the age of its last finished tick (lag) and of its oldest pending event.
select s.*, now() - s.last_tick_time as lag,
       case when s.pending_since is not null
            then greatest(now() - s.pending_since, interval '0') end as pending_age
  from {schema}.get_consumer_status(%(queue)s) s;

-- name: has_function
select to_regprocedure(%(function)s) is not null;

-- name: queue_config
select param_name, param_value from {schema}.get_queue_config(%(queue)s);

-- name: drain_lock_held
-- Whether a session holds the consumer's drain lock (cdc.pg.source.drain_lock: a drain
-- applying a batch, or a snapshot). pg_locks shows a bigint advisory key as its high and low
-- 32 bits (classid, objid) with objsubid 1.
select exists (
    select 1 from pg_catalog.pg_locks l, (select hashtext(%(key)s)::bigint as k) h
     where l.locktype = 'advisory' and l.granted and l.objsubid = 1
       and l.database = (select oid from pg_catalog.pg_database where datname = current_database())
       and l.classid::bigint = (h.k >> 32) & 4294967295
       and l.objid::bigint = h.k & 4294967295);

-- name: all_queue_info
select * from cdc.get_queue_info();

-- name: all_consumers
-- Every queue's consumers (our engine; `cdc uninstall` asks before dropping them).
select queue_name, consumer_name from cdc.get_consumer_info() order by 1, 2;

-- name: capture_guards
-- Per captured table (cdc triggers): whether an enabled BEFORE statement guard
-- (cdc._cap_guard) will regenerate its capture function at the table's next write.
select c.table_name, c.queue_name,
       exists (select 1 from pg_catalog.pg_trigger t
                where t.tgrelid = to_regclass(c.table_name)
                  and t.tgfoid = to_regprocedure('cdc._cap_guard()')
                  and t.tgenabled <> 'D') as guarded
  from cdc.get_capture_info() c;
