-- ----------------------------------------------------------------------
-- Function: cdc._cap_check_expressions(table, options)
--
--      Checks the stored option expressions against the table as it is now: each must still
--      compile (its columns exist), and when must be boolean. QC024 otherwise, so that a
--      generated trigger never fails at run time.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_check_expressions(i_table regclass, i_opts jsonb)
returns void as $$
declare
    key  text;
    expr text;
    typ  regtype;
    src  text := format('(select * from %s limit 0)', i_table);
begin
    foreach key in array array['when', 'extra1', 'extra2', 'extra3', 'extra4', 'ev_type'] loop
        expr := i_opts ->> key;
        continue when expr is null;
        begin
            -- one row of NULLs with the table's row type under each name the expression may use
            execute format('select pg_typeof(%s) from (select) z left join %s "__cdc_row" on true'
                           ' left join %s new on true left join %s old on true',
                           expr, src, src, src)
               into typ;
        exception when others then
            raise exception using errcode = 'QC024',
                message = format('the %s expression of the capture of %s no longer fits the table: %s',
                                 key, i_table, sqlerrm),
                hint = 'detach the table, or attach it again with a new expression, in the same transaction';
        end;
        if key = 'when' and typ is distinct from 'boolean'::regtype then
            raise exception using errcode = 'QC024',
                message = format('the when expression of the capture of %s is %s, not boolean', i_table, typ);
        end if;
    end loop;
end;
$$ language plpgsql;


-- ----------------------------------------------------------------------
-- Function: cdc._on_ddl_end()  (event trigger, ddl_command_end)
--
--      After an ALTER TABLE on a captured table whose columns changed (added, dropped,
--      renamed, retyped), regenerates its capture triggers in the same transaction, so that
--      the application's next statement finds a trigger that matches the table. If the
--      options no longer fit (a key or expression column was dropped), the ALTER TABLE fails
--      with a message saying so, rather than leaving a trigger that would fail the
--      application's DML later.
-- ----------------------------------------------------------------------
create or replace function cdc._on_ddl_end()
returns event_trigger as $$
declare
    cap cdc.capture;
begin
    for cap in
        select c.* from cdc.capture c
         where c.cap_table in (select objid from pg_event_trigger_ddl_commands()
                                where classid = 'pg_class'::regclass)
           and c.cap_columns is distinct from cdc._cap_signature(c.cap_table)
    loop
        perform cdc.attach(cap.cap_table::regclass, cap.cap_queue, cap.cap_options);
    end loop;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc._on_sql_drop()  (event trigger, sql_drop)
--
--      Forgets the captures of dropped tables and drops their generated functions (the
--      triggers went with the tables).
-- ----------------------------------------------------------------------
create or replace function cdc._on_sql_drop()
returns event_trigger as $$
declare
    cap cdc.capture;
begin
    for cap in
        select c.* from cdc.capture c
         where c.cap_table in (select objid from pg_event_trigger_dropped_objects()
                                where classid = 'pg_class'::regclass and object_type = 'table')
    loop
        execute format('drop function if exists cdc.%I()', cap.cap_function);
        delete from cdc.capture where cap_table = cap.cap_table and cap_queue = cap.cap_queue;
    end loop;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_guard()  (BEFORE statement trigger, without event triggers)
--
--      Without an event trigger, an ALTER TABLE leaves the capture function as it was, and a
--      function naming a dropped or renamed column would fail the application's next
--      statement. This trigger runs before each INSERT / UPDATE / DELETE statement on a
--      captured table (one index probe and one look at the table's columns) and, when the
--      columns changed, regenerates the capture function in the application's transaction,
--      before any row reaches it. Only the function is replaced: the triggers stay as they
--      are. Concurrent first statements after the change queue on an advisory lock.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_guard()
returns trigger as $$
declare
    cap cdc.capture;
    ddl text;
    sig text := cdc._cap_signature(TG_RELID);
begin
    if not exists (select 1 from cdc.capture
                    where cap_table = TG_RELID and cap_columns is distinct from sig) then
        return null;
    end if;
    perform pg_advisory_xact_lock('cdc.capture'::regclass::oid::integer, TG_RELID::integer);
    -- a concurrent first statement may have regenerated it meanwhile (READ COMMITTED: this
    -- query sees its commit)
    for cap in select * from cdc.capture
                where cap_table = TG_RELID and cap_columns is distinct from sig
                  for update
    loop
        ddl := cdc.capture_sql(TG_RELID, cap.cap_queue, cap.cap_options);
        -- the generated DDL begins with the function; what follows recreates the triggers
        execute left(ddl, strpos(ddl, E'$cdc$;\n') + length('$cdc$;'));
        update cdc.capture set cap_columns = sig, cap_created = now()
         where cap_table = cap.cap_table and cap_queue = cap.cap_queue;
    end loop;
    return null;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;
