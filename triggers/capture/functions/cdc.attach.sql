-- ----------------------------------------------------------------------
-- Function: cdc.attach(table, queue_name, options)
--
--      Attaches capture to a table: generates the trigger function and triggers
--      (cdc.capture_sql) and runs them, replacing what an earlier attach of the same table
--      and queue created, and records the capture in cdc.capture. One transaction: on any
--      error nothing changes. The owner of the cdc schema must be allowed to create triggers
--      on the table (own it, or hold the TRIGGER privilege).
--
-- Returns:
--      The SQL that was run.
-- Tables: cdc.capture
-- ----------------------------------------------------------------------
create or replace function cdc.attach(i_table regclass, i_queue_name text, i_opts jsonb)
returns text as $$
declare
    ddl   text;
    names record;
    q     cdc.queue;
begin
    ddl := cdc.capture_sql(i_table, i_queue_name, i_opts);
    q := cdc._queue(i_queue_name);
    select * into names from cdc._cap_names(i_table, q);
    execute ddl;
    insert into cdc.capture (cap_table, cap_schema, cap_name, cap_queue, cap_options, cap_columns, cap_function)
    select i_table, n.nspname, c.relname, i_queue_name, i_opts, cdc._cap_signature(i_table), names.func
      from pg_class c join pg_namespace n on n.oid = c.relnamespace where c.oid = i_table
    on conflict (cap_table, cap_queue) do update
       set cap_schema = excluded.cap_schema, cap_name = excluded.cap_name,
           cap_options = excluded.cap_options, cap_columns = excluded.cap_columns,
           cap_function = excluded.cap_function, cap_created = now();
    return ddl;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc.detach(table [, queue_name])
--
--      Removes capture from a table: its triggers and generated functions, for one queue or
--      for all. QC023 if the table is not captured (into that queue).
--
-- Returns:
--      Number of captures removed.
-- ----------------------------------------------------------------------
create or replace function cdc.detach(i_table regclass, i_queue_name text default null)
returns integer as $$
declare
    cap   cdc.capture;
    names record;
    n     integer := 0;
begin
    perform cdc._require(i_table, 'table');
    for cap in select * from cdc.capture
                where cap_table = i_table and (i_queue_name is null or cap_queue = i_queue_name)
                  for update
    loop
        select * into names from cdc._cap_names(i_table, cdc._queue(cap.cap_queue));
        execute cdc._cap_drop_triggers(i_table, names.row_trigger);
        execute format('drop function if exists cdc.%I()', cap.cap_function);
        delete from cdc.capture where cap_table = cap.cap_table and cap_queue = cap.cap_queue;
        n := n + 1;
    end loop;
    if n = 0 then
        raise exception using errcode = 'QC023',
            message = format('table %s is not captured%s', i_table,
                             coalesce(format(' into queue %L', i_queue_name), '')),
            hint = 'cdc triggers lists what is captured';
    end if;
    return n;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc.get_capture_info()
--
--      What is captured: table, queue, format, options, and whether the trigger is current
--      with the table's columns (stale when columns were added, dropped, renamed or retyped
--      since it was generated).
-- ----------------------------------------------------------------------
create or replace function cdc.get_capture_info(
    out table_name text, out queue_name text, out format text, out options jsonb,
    out current boolean, out created timestamptz)
returns setof record as $$
    select format('%I.%I', n.nspname, c.relname), cap.cap_queue, cap.cap_options ->> 'format',
           cap.cap_options, cap.cap_columns = cdc._cap_signature(cap.cap_table), cap.cap_created
      from cdc.capture cap
      join pg_class c on c.oid = cap.cap_table
      join pg_namespace n on n.oid = c.relnamespace
     order by 1, 2;
$$ language sql stable security definer set search_path = pg_catalog, pg_temp;
