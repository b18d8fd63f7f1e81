-- Event triggers that keep capture triggers current with their tables, and that apply the
-- capture rules to new tables. Creating an event trigger needs a superuser: without one, a
-- notice says so, and cdc._cap_guard_sql adds a BEFORE statement trigger to each captured
-- table that does the same before the next DML; new tables wait for cdc.sync_captures.
do $$
declare
    enabled "char";
begin
    if not (select rolsuper from pg_roles where rolname = current_user) then
        raise notice 'cdc: % is not a superuser, so no event trigger keeps capture triggers current after ALTER TABLE; each captured table gets a BEFORE statement trigger that regenerates its capture function after a column change instead; tables created later that a capture rule matches are captured by cdc attach --sync (run it from cron)', current_user;
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
    -- capture rules: a table created (or renamed, moved, detached from its parent) into a
    -- name a rule matches is captured in the same transaction (cdc.capture_rules.sql)
    if not exists (select 1 from pg_event_trigger where evtname = 'cdc_capture_rules') then
        create event trigger cdc_capture_rules on ddl_command_end
            when tag in ('CREATE TABLE', 'CREATE TABLE AS', 'SELECT INTO', 'ALTER TABLE')
            execute function cdc._on_table_ddl();
    end if;
end;
$$;
