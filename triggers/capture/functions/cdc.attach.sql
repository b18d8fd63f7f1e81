-- ----------------------------------------------------------------------
-- Function: cdc._cap_require_owner(table, action)
--
--      Capture puts a trigger on the table whose function runs with the cdc owner's rights,
--      so only who could do that to the table anyway may ask for it: the table's owner. The
--      caller is the session's login role (session_user: inside a SECURITY DEFINER function
--      current_user is always the cdc owner); it must be a member of the role that owns the
--      table (superusers are). So a cdc_admin member cannot capture, print the capture SQL
--      of, or detach a table it has no rights on. QC025 otherwise.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_require_owner(i_table regclass, i_action text)
returns void as $$
declare
    owner oid := (select relowner from pg_class where oid = i_table);
begin
    perform cdc._require(i_table, 'table');
    if owner is null or not pg_has_role(session_user, owner, 'MEMBER') then
        raise exception using errcode = 'QC025',
            message = format('%s may not %s %s: the table belongs to %s', session_user, i_action,
                             i_table, coalesce(owner::regrole::text, '?')),
            hint = format('run it as %s or as a member of that role', coalesce(owner::regrole::text, 'its owner'));
    end if;
end;
$$ language plpgsql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_record(table, queue_name, options)
--
--      Records a capture as just generated in cdc.capture: the table's current name, column
--      signature and options (with their format: cdc._cap_format_options). When the table's name changed since the last generation, the
--      earlier one ("schema.name", the ev_extra1 form) is added to cap_aliases, so that queued
--      events carrying it can still be routed (cdc.get_capture_aliases).
-- ----------------------------------------------------------------------
create or replace function cdc._cap_record(i_table regclass, i_queue_name text, i_opts jsonb)
returns void as $$
    insert into cdc.capture as cap (cap_table, cap_schema, cap_name, cap_queue, cap_options, cap_columns, cap_function)
    select i_table, n.nspname, c.relname, i_queue_name, cdc._cap_format_options(i_opts),
           cdc._cap_signature(i_table),
           (cdc._cap_names(i_table, cdc._queue(i_queue_name))).func
      from pg_class c join pg_namespace n on n.oid = c.relnamespace where c.oid = i_table
    on conflict (cap_table, cap_queue) do update
       set cap_schema = excluded.cap_schema, cap_name = excluded.cap_name,
           cap_options = excluded.cap_options, cap_columns = excluded.cap_columns,
           cap_function = excluded.cap_function, cap_created = now(),
           cap_aliases = case
               when (cap.cap_schema, cap.cap_name) is distinct from (excluded.cap_schema, excluded.cap_name)
                    and not (cap.cap_schema || '.' || cap.cap_name = any (cap.cap_aliases))
               then cap.cap_aliases || (cap.cap_schema || '.' || cap.cap_name)
               else cap.cap_aliases
           end;
$$ language sql;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_apply(table, queue_name, options)
--
--      Generates and runs the capture DDL of a table (function, then triggers) and records it.
--      No check of the caller: cdc.attach checks it; the event trigger regenerates with the
--      options stored by an earlier attach. A table that takes the name of a dropped one
--      captured into the queue gets the marker event first, and the snapshot signal when it
--      may hold rows (cdc._cap_succeed).
-- ----------------------------------------------------------------------
create or replace function cdc._cap_apply(i_table regclass, i_queue_name text, i_opts jsonb)
returns text as $$
declare
    gen record;
begin
    select * into gen from cdc._cap_generate(i_table, i_queue_name, i_opts);
    if cdc._cap_succeed(i_table, i_queue_name) and cdc._cap_may_hold_rows(i_table) then
        perform cdc._cap_snapshot_signal(i_table, i_queue_name);
    end if;
    execute gen.func_ddl;
    execute gen.trigger_ddl;
    perform cdc._cap_record(i_table, i_queue_name, i_opts);
    return gen.func_ddl || gen.trigger_ddl;
end;
$$ language plpgsql;


-- ----------------------------------------------------------------------
-- Function: cdc.attach(table, queue_name, options)
--
--      Attaches capture to a table: generates the trigger function and triggers
--      (cdc._cap_generate) and runs them, replacing what an earlier attach of the same table
--      and queue created, and records the capture in cdc.capture. One transaction: on any
--      error nothing changes. The session's login role must be a member of the table's owner
--      role (QC025); option expressions are checked inside PostgreSQL whoever calls (QC026,
--      see cdc.capture_ddl.sql). A table without a primary key and without a pkey option is
--      keyed by its usable unique index, recorded as pkey (cdc._cap_key_options). Options
--      without a format are json's, in row and statement mode alike (the format of `cdc attach`
--      without --format); a null or unknown format is QC006 (cdc._cap_format_options). The
--      owner of the cdc schema must be allowed to create triggers on the table (own it, be a
--      superuser, or hold the TRIGGER privilege).
--
-- Returns:
--      The SQL that was run.
-- Tables: cdc.capture
-- ----------------------------------------------------------------------
create or replace function cdc.attach(i_table regclass, i_queue_name text, i_opts jsonb)
returns text as $$
begin
    perform cdc._require(i_table, 'table');
    perform cdc._cap_require_owner(i_table, 'capture');
    return cdc._cap_apply(i_table, i_queue_name, cdc._cap_key_options(i_table, i_opts));
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc.detach(table [, queue_name])
--
--      Removes capture from a table: its triggers and generated functions, for one queue or
--      for all. QC023 if the table is not captured (into that queue); QC025 unless the
--      session's login role is a member of the table's owner role.
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
    perform cdc._cap_require_owner(i_table, 'detach');
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
--      with the table (stale when columns were added, dropped, renamed or retyped, or the
--      table renamed or moved to another schema, since it was generated).
-- ----------------------------------------------------------------------
create or replace function cdc.get_capture_info(
    out table_name text, out queue_name text, out format text, out options jsonb,
    out current boolean, out created timestamptz)
returns setof record as $$
    select format('%I.%I', n.nspname, c.relname), cap.cap_queue, cap.cap_options ->> 'format',
           cap.cap_options,
           cap.cap_columns = cdc._cap_signature(cap.cap_table)
               and cap.cap_schema = n.nspname::text and cap.cap_name = c.relname::text,
           cap.cap_created
      from cdc.capture cap
      join pg_class c on c.oid = cap.cap_table
      join pg_namespace n on n.oid = c.relnamespace
     order by 1, 2;
$$ language sql stable security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc.get_capture_aliases()
--
--      Earlier names of captured tables: one row per (table, earlier name), where both names
--      are "schema.name" unquoted, as ev_extra1 carries them. Events queued before a rename
--      (or before the capture function was regenerated after it) carry an alias; a consumer
--      routes them to table_name, the table's name now. Includes the name the capture
--      function was generated for when the table has been renamed since (not regenerated
--      yet: without event triggers, until the table's next statement).
-- ----------------------------------------------------------------------
create or replace function cdc.get_capture_aliases(
    out table_oid oid, out table_name text, out alias text)
returns setof record as $$
    select distinct cap.cap_table, n.nspname || '.' || c.relname, a.alias
      from cdc.capture cap
      join pg_class c on c.oid = cap.cap_table
      join pg_namespace n on n.oid = c.relnamespace
     cross join lateral unnest(cap.cap_aliases || (cap.cap_schema || '.' || cap.cap_name)) as a(alias)
     where a.alias <> n.nspname || '.' || c.relname
     order by 2, 3;
$$ language sql stable security definer set search_path = pg_catalog, pg_temp;
