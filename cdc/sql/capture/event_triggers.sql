-- Event triggers that keep capture triggers current with their tables. Creating an event
-- trigger needs a superuser: without one, a notice says so, and cdc._cap_guard_sql adds a
-- BEFORE statement trigger to each captured table that does the same before the next DML.
do $$
declare
    enabled "char";
begin
    if not (select rolsuper from pg_roles where rolname = current_user) then
        raise notice 'cdc: % is not a superuser, so no event trigger keeps capture triggers current after ALTER TABLE; each captured table gets a BEFORE statement trigger that regenerates its capture function after a column change instead', current_user;
        return;
    end if;
    -- ALTER SCHEMA: a renamed schema renames its tables (C18); earlier installs listened to
    -- ALTER TABLE only, so their trigger is replaced (keeping whether it was enabled)
    select evtenabled into enabled from pg_event_trigger
     where evtname = 'cdc_capture_ddl' and evttags is distinct from array['ALTER TABLE', 'ALTER SCHEMA'];
    if found then
        drop event trigger cdc_capture_ddl;
    end if;
    if not exists (select 1 from pg_event_trigger where evtname = 'cdc_capture_ddl') then
        create event trigger cdc_capture_ddl on ddl_command_end
            when tag in ('ALTER TABLE', 'ALTER SCHEMA') execute function cdc._on_ddl_end();
        if enabled = 'D' then
            alter event trigger cdc_capture_ddl disable;
        end if;
    end if;
    if not exists (select 1 from pg_event_trigger where evtname = 'cdc_capture_drop') then
        create event trigger cdc_capture_drop on sql_drop
            when tag in ('DROP TABLE', 'DROP SCHEMA', 'DROP OWNED') execute function cdc._on_sql_drop();
    end if;
end;
$$;
