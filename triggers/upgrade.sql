-- Runs first on every install: drops internal functions whose signature changed, so that
-- `create or replace` below does not leave an old overload next to the new one. Only internal
-- (underscore) helpers are listed here; public functions keep their signatures.
drop function if exists cdc._cap_changed(text, oid);
drop function if exists cdc._cap_sql_value(text, text, oid);
drop function if exists cdc._cap_sql_payload(text, regclass, text[], text[]);
drop function if exists cdc._batch_sql(bigint, bigint[]);
-- Payload builders now one per format (capture/formats/), behind cdc._cap_payload.
drop function if exists cdc._cap_row_payload(text, text, regclass, text[]);
drop function if exists cdc._cap_sql_payload(text, regclass, text[], text[], text, text);
-- Capture generators that now return the function DDL and the trigger DDL apart (out
-- parameters instead of text).
do $$
begin
    drop function if exists cdc._cap_tree_refusal(text, regclass);
    if exists (select 1 from pg_proc where oid = to_regproc('cdc._cap_ddl') and prorettype = 'text'::regtype) then
        drop function cdc._cap_ddl(regclass, text, text, text, text, boolean);
    end if;
    if exists (select 1 from pg_proc where oid = to_regproc('cdc._cap_statement_sql') and prorettype = 'text'::regtype) then
        execute 'drop function cdc._cap_statement_sql(regclass, cdc.queue, jsonb, text[], text[], text, text)';
    end if;
end;
$$;
-- Now with an optional count of events (cdc._count_tx_event(queue_id, limit, n)).
drop function if exists cdc._count_tx_event(integer, integer);
-- Functions whose argument names are now PgQ's: PostgreSQL cannot rename an argument with
-- create or replace, so an install that has them under other names drops them here and the
-- files below create them again (grants.sql grants them again). Each pair: the signature,
-- then its argument names as PgQ 3.5 has them.
do $$
declare
    f record;
begin
    for f in
        select p.oid::regprocedure as sig
          from (values
                ('cdc.current_event_table(text)',                     '{x_queue_name}'),
                ('cdc.drop_queue(text)',                              '{x_queue_name}'),
                ('cdc.drop_queue(text, boolean)',                     '{x_queue_name,x_force}'),
                ('cdc.event_retry(bigint, bigint, integer)',          '{x_batch_id,x_event_id,x_retry_seconds}'),
                ('cdc.event_retry(bigint, bigint, timestamptz)',      '{x_batch_id,x_event_id,x_retry_time}'),
                ('cdc.finish_batch(bigint)',                          '{x_batch_id}'),
                ('cdc.get_batch_events(bigint)',                      '{x_batch_id}'),
                ('cdc.get_batch_info(bigint)',                        '{x_batch_id}'),
                ('cdc.insert_event(text, text, text)',                '{queue_name,ev_type,ev_data}'),
                ('cdc.insert_event(text, text, text, text, text, text, text)',
                 '{queue_name,ev_type,ev_data,ev_extra1,ev_extra2,ev_extra3,ev_extra4}'),
                ('cdc.register_consumer(text, text)',                 '{x_queue_name,x_consumer_id}'),
                ('cdc.register_consumer_at(text, text, bigint)',      '{x_queue_name,x_consumer_name,x_tick_pos}'),
                ('cdc.set_queue_config(text, text, text)',            '{x_queue_name,x_param_name,x_param_value}'),
                ('cdc.unregister_consumer(text, text)',               '{x_queue_name,x_consumer_name}')
               ) as want(sig, names)
          join pg_proc p on p.oid = to_regprocedure(want.sig)
         where (p.proargnames)[1:cardinality(want.names::text[])] is distinct from want.names::text[]
    loop
        execute format('drop function %s', f.sig);
    end loop;
end;
$$;
