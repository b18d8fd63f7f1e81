-- The DDL around a generated body: the names of the function and triggers, the header
-- comment and the TG_RELID check of the body, the CREATE FUNCTION (body as a literal, EXECUTE
-- revoked from PUBLIC), the triggers, and the guard where no event trigger runs.


-- ----------------------------------------------------------------------
-- Function: cdc._cap_names(table, queue)
--
--      Names of the generated function (schema cdc) and of the row and truncate triggers.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_names(
    i_table regclass, q cdc.queue,
    out func text, out row_trigger text, out truncate_trigger text)
as $$
    select format('_cap_%s_%s', i_table::oid, q.queue_id),
           format('cdc_capture_%s', q.queue_id),
           format('cdc_capture_%s_truncate', q.queue_id);
$$ language sql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_drop_triggers(table, trigger)
--
--      DROP TRIGGER IF EXISTS for every trigger name either mode may have created, so that
--      attaching again (also in the other mode) replaces them all.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_drop_triggers(i_table regclass, i_trigger text)
returns text as $$
    select string_agg(format(E'drop trigger if exists %I on %s;\n', i_trigger || sfx, i_table), '' order by ord)
      from unnest(array['', '_truncate', '_ins', '_upd', '_del', '_guard']) with ordinality as s(sfx, ord);
$$ language sql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_guard_sql(table, trigger)
--
--      Where no event trigger keeps capture current after ALTER TABLE (the installing role was
--      not a superuser), a BEFORE statement trigger on the table: cdc._cap_guard regenerates a
--      stale capture function before the statement's rows reach it. Empty otherwise.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_guard_sql(i_table regclass, i_trigger text)
returns text as $$
    select case when exists (select 1 from pg_event_trigger
                              where evtname = 'cdc_capture_ddl' and evtenabled <> 'D')
                then ''
                else format(E'create trigger %I before insert or update or delete on %s\n'
                            || E'    for each statement execute function cdc._cap_guard();\n',
                            i_trigger || '_guard', i_table)
           end;
$$ language sql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_comment(table, queue, options)
--
--      What the header comment of a generated function says: table and queue as JSON strings
--      and the options as JSON, so that no character of a name (a newline) ends the comment.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_comment(i_table regclass, i_queue_name text, i_opts jsonb)
returns text as $$
    select format('%s into queue %s, options %s',
                  to_json(i_table::text), to_json(i_queue_name), i_opts);
$$ language sql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_relid_check(table)
--
--      The first statement of a generated function: it refuses to run as the trigger of any
--      other table (insufficient_privilege), so that it cannot write events "from" its table
--      for rows of another.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_relid_check(i_table regclass)
returns text as $$
    select format(E'    if TG_RELID <> %s::oid then\n'
                  || E'        raise exception using errcode = ''insufficient_privilege'',\n'
                  || E'            message = format(''%%s is the capture function of %%s, not of %%s'', TG_NAME, %L, TG_RELID::regclass);\n'
                  || E'    end if;\n',
                  i_table::oid, i_table::text);
$$ language sql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_function_ddl(func, body, extra settings)
--
--      CREATE FUNCTION of a generated capture function, with the body as a quoted literal
--      (never a dollar quote: a name inside it may hold any tag), followed by the REVOKE of
--      PUBLIC's default EXECUTE.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_function_ddl(i_func text, i_body text, i_settings text default '')
returns text as $$
    select format(
        E'create or replace function cdc.%I() returns trigger\n'
        || 'language plpgsql security definer set search_path = pg_catalog, pg_temp'
        || i_settings || cdc._cap_settings()
        || E'\nas %L;\n'
        || E'revoke all on function cdc.%I() from public;\n',
        i_func, i_body, i_func);
$$ language sql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_ddl(table, names, body, before)
--
--      The function DDL and the trigger DDL around a generated body.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_ddl(
    i_table regclass, i_func text, i_row_trigger text, i_truncate_trigger text,
    i_body text, i_before boolean, out func_ddl text, out trigger_ddl text)
as $$
    select cdc._cap_function_ddl(i_func, i_body),
           format(
        '%s'
        || E'create trigger %I %s insert or update or delete on %s\n'
        || E'    for each row execute function cdc.%I();\n'
        || E'create trigger %I %s truncate on %s\n'
        || E'    for each statement execute function cdc.%I();\n'
        || '%s',
        cdc._cap_drop_triggers(i_table, i_row_trigger),
        i_row_trigger, case when i_before then 'before' else 'after' end, i_table, i_func,
        i_truncate_trigger, case when i_before then 'before' else 'after' end, i_table, i_func,
        cdc._cap_guard_sql(i_table, i_row_trigger));
$$ language sql stable;
