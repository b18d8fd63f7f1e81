-- Privileges. Nothing is executable by PUBLIC except the info functions and quote_fqname;
-- each role gets EXECUTE on the functions of its part. Every public function is SECURITY
-- DEFINER with a pinned search_path, so no role needs privileges on the tables themselves;
-- but seq_getval and seq_setval, which run with the caller's rights (privileges on the
-- sequence decide), and quote_fqname, which reads nothing.
do $$
declare
    f      record;
    grantee text;
begin
    execute 'revoke all on all functions in schema cdc from public';
    execute 'revoke all on all tables in schema cdc from public';
    execute 'revoke all on all sequences in schema cdc from public';
    execute 'grant usage on schema cdc to public';
    for f in
        select p.oid::regprocedure as sig, p.proname::text as name
          from pg_proc p
         where p.pronamespace = 'cdc'::regnamespace and p.proname !~ '^_'
    loop
        grantee := case
            when f.name in ('get_queue_info', 'get_consumer_info', 'get_batch_info', 'version',
                            'get_queue_incarnation', 'quote_fqname')
                then 'public'
            when f.name in ('insert_event', 'current_event_table', 'insert_event_raw')
                then 'cdc_writer'
            when f.name in ('register_consumer', 'register_consumer_at', 'unregister_consumer',
                            'next_batch', 'next_batch_info', 'next_batch_custom',
                            'get_batch_events', 'open_batch_cursor', 'finish_batch',
                            'event_retry', 'batch_retry', 'event_dead',
                            'batch_event_tables', 'batch_event_sql', 'event_retry_raw',
                            'ticker', 'force_tick', 'get_capture_aliases', 'get_capture_info',
                            -- what the drain, snapshot, verify and status read besides
                            -- batches (queue/functions/cdc.reader_info.sql, cdc.status.sql)
                            'next_batch_ticks', 'queue_has_new_events', 'get_tick_snapshot',
                            'get_dead_letter_counts', 'tick_at_snapshot', 'consumer_owner',
                            'get_consumer_status')
                then 'cdc_reader'
            else 'cdc_admin'
        end;
        if grantee = 'public' then
            execute format('grant execute on function %s to public', f.sig);
            continue;
        end if;
        if exists (select 1 from pg_roles where rolname = grantee) then
            execute format('grant execute on function %s to %I', f.sig, grantee);
        end if;
        if grantee <> 'cdc_admin' and exists (select 1 from pg_roles where rolname = 'cdc_admin') then
            execute format('grant execute on function %s to cdc_admin', f.sig);
        end if;
    end loop;
end;
$$;

-- The version this install is at.
delete from cdc.installed;
insert into cdc.installed (inst_version) values (cdc.version());
