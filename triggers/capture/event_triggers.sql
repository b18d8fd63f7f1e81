-- Event triggers that keep capture triggers current with their tables. Creating an event
-- trigger needs a superuser: without one, a notice says so, and `cdc triggers` reports tables
-- whose columns changed as stale until `cdc attach` runs again.
do $$
begin
    if not (select rolsuper from pg_roles where rolname = current_user) then
        raise notice 'cdc: % is not a superuser, so no event trigger keeps capture triggers current after ALTER TABLE; run cdc attach after changing a captured table (cdc triggers lists stale ones)', current_user;
        return;
    end if;
    if not exists (select 1 from pg_event_trigger where evtname = 'cdc_capture_ddl') then
        create event trigger cdc_capture_ddl on ddl_command_end
            when tag in ('ALTER TABLE') execute function cdc._on_ddl_end();
    end if;
    if not exists (select 1 from pg_event_trigger where evtname = 'cdc_capture_drop') then
        create event trigger cdc_capture_drop on sql_drop
            when tag in ('DROP TABLE', 'DROP SCHEMA', 'DROP OWNED') execute function cdc._on_sql_drop();
    end if;
end;
$$;
