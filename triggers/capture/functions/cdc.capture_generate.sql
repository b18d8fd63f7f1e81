-- The trigger generator: from a table, a queue and options, the SQL of one trigger function
-- specialised to the table's columns, and of the triggers that call it. Runs inside
-- PostgreSQL so that an event trigger can regenerate a trigger in the transaction of the
-- ALTER TABLE that changed the table. Its parts: the table's columns and key
-- (cdc.capture_columns.sql), each format's payload and ev_type (formats/, dispatched by
-- cdc.capture_formats.sql), one event's INSERT (cdc.capture_event.sql), the DDL around the
-- body (cdc.capture_triggers.sql), and statement mode (cdc.capture_statement.sql).
--
-- Options (jsonb, as written by cdc.capture in Python):
--   format      'json' | 'urlenc' | 'sql'; json when left out (cdc._cap_format_options)
--   ignore      [column, ...]    columns left out of the events
--   pkey        [column, ...]    key columns, instead of the primary key
--   backup      bool             old row in ev_extra2 on UPDATE (json, urlenc)
--   when        expr             boolean; false skips the event
--   extra1..4   expr             ev_extra1..4 instead of the defaults
--   ev_type     expr             ev_type instead of the format's
--   skip        bool             BEFORE trigger: queue the event, skip the row change
--   deny        bool             BEFORE trigger: refuse the change
-- Magic columns (_pgq_ev_type, _pgq_ev_data, _pgq_ev_extra1..4) give their event field and
-- stay out of the payload (cdc._cap_magic_columns, cdc._cap_event_fields), as in PgQ; an
-- UPDATE that changed only them writes no event in the sql format, or in any format when
-- some columns are ignored (PgQ then counts them as ignored).
-- Every event passes the queue's disable_insert and per_tx_limit (cdc._cap_insert).
-- Expressions come checked and rewritten: a column of "the row" is "__cdc_row"."col" (NEW,
-- or OLD on DELETE), and NEW."col" / OLD."col" as written.
--
-- Security (the generated functions run with the cdc owner's rights):
--   * No user text is ever inside a dollar-quoted body: the CREATE FUNCTION is built with the
--     body as a literal (format %L, cdc._cap_function_ddl), so a name holding "$cdc$" or any
--     quote stays a name. Identifiers go through %I / quote_ident (cdc._cap_field doubles
--     double quotes), literals through %L; the header comment quotes names as JSON, so a
--     newline in a name cannot end the comment.
--   * The generator returns the function DDL and the trigger DDL separately
--     (cdc._cap_generate), so the guard trigger runs the first without slicing text.
--   * Each generated function has EXECUTE revoked from PUBLIC when it is created (a trigger
--     fires whatever the privileges; only CREATE TRIGGER needs EXECUTE) and refuses to run for
--     any table but its own (TG_RELID, cdc._cap_relid_check): nobody can hang it on a table of
--     their own to forge events.
--   * Option expressions reach the body only after cdc._cap_check_expressions accepted them:
--     one expression over the row, built-in functions without side effects only, never
--     executed or planned while checked (see cdc.capture_ddl.sql). Only a member of the
--     table's owner role may give them (cdc.attach).


-- ----------------------------------------------------------------------
-- Function: cdc._cap_generate(table, queue, options)
--
--      The SQL that attaches capture to a table, in two parts: func_ddl creates the trigger
--      function (and revokes EXECUTE from PUBLIC), trigger_ddl replaces the row trigger
--      (AFTER, or BEFORE with skip or deny), the statement-level TRUNCATE trigger and, without
--      event triggers, the guard. Runs nothing; checks the options (expressions included) but
--      not the caller's right to the table (cdc.attach / cdc.capture_sql do).
-- ----------------------------------------------------------------------
create or replace function cdc._cap_generate(
    i_table regclass, i_queue_name text, i_opts jsonb, out func_ddl text, out trigger_ddl text)
as $$
declare
    q        cdc.queue;
    fmt      text;
    ignore   text[] := array(select jsonb_array_elements_text(coalesce(i_opts -> 'ignore', '[]')));
    magic    text[];
    unsent   text[];  -- left out of the payload: ignored and magic columns
    unseen   text[];  -- an UPDATE that changed only these writes no event
    pkey     text[];
    names    record;
    nsp      text;
    rel      text;
    body     text;
    whenexpr text;
    keychg   text;
    payload  text;
    del_data text;
    upd_data text;
    backup   text;
    kept_changed    text;
    ignored_changed text;
    before   boolean := coalesce((i_opts ->> 'skip')::boolean, false)
                        or coalesce((i_opts ->> 'deny')::boolean, false);
begin
    perform cdc._require(i_table, 'table');
    q := cdc._queue(i_queue_name);
    perform cdc._require(i_opts, 'options');
    -- every part below (payload, ev_type, statement mode) reads the format from the options
    i_opts := cdc._cap_format_options(i_opts);
    fmt := i_opts ->> 'format';
    select n.nspname, c.relname into nsp, rel
      from pg_class c join pg_namespace n on n.oid = c.relnamespace where c.oid = i_table;
    pkey := cdc._cap_pkey(i_table, array(select jsonb_array_elements_text(i_opts -> 'pkey')));
    perform cdc._cap_check_expressions(i_table, i_opts);
    magic := cdc._cap_magic_columns(i_table);  -- QC027
    unsent := ignore || magic;
    unseen := ignore || case when fmt = 'sql' or cardinality(ignore) > 0 then magic else '{}' end;
    select * into names from cdc._cap_names(i_table, q);
    if coalesce(i_opts ->> 'mode', 'row') = 'statement' then
        select * into func_ddl, trigger_ddl
          from cdc._cap_statement_sql(i_table, q, i_opts, pkey, ignore, names.func, names.row_trigger);
        return;
    end if;

    select string_agg(cdc._cap_changed(k, c.atttypid), ' or ')
      into keychg
      from unnest(pkey) k join cdc._cap_columns(i_table, null) c on c.attname = k;
    -- With ignored columns, an UPDATE that changed only ignored columns writes no event.
    if cardinality(unseen) > 0 then
        select coalesce(string_agg(cdc._cap_changed(attname, atttypid), ' or ')
                            filter (where attname <> all (unseen)), 'false'),
               string_agg(cdc._cap_changed(attname, atttypid), ' or ')
                   filter (where attname = any (unseen))
          into kept_changed, ignored_changed
          from cdc._cap_columns(i_table, null);
    end if;

    payload := cdc._cap_payload(fmt, 'INSERT', 'NEW', 'OLD', i_table, unsent, pkey);
    upd_data := cdc._cap_payload(fmt, 'UPDATE', 'NEW', 'OLD', i_table, unsent, pkey);
    del_data := cdc._cap_payload(fmt, 'DELETE', 'NEW', 'OLD', i_table, unsent, pkey);
    if coalesce((i_opts ->> 'backup')::boolean, false) then
        backup := cdc._cap_payload(fmt, 'BACKUP', 'NEW', 'OLD', i_table, unsent, pkey);
    end if;

    body := format(E'-- Generated by cdc.attach: %s.\n'
                   || E'-- Do not edit: `cdc attach` regenerates it.\n'
                   || E'declare\n'
                   || E'    v_data   text;\n'
                   || E'    v_backup text;\n'
                   || E'begin\n'
                   || '%s'
                   || E'    if current_setting(''session_replication_role'') = ''local'' then\n'
                   || E'        return %s;\n'
                   || E'    end if;\n',
                   cdc._cap_comment(i_table, i_queue_name, i_opts), cdc._cap_relid_check(i_table),
                   case when before then 'coalesce(NEW, OLD)' else 'null' end);
    if coalesce((i_opts ->> 'deny')::boolean, false) then
        body := body || format(
            E'    raise exception using errcode = ''QC022'',\n'
            || E'        message = format(''%%s on %%s is denied: the table is captured with deny'', TG_OP, %L);\n'
            || E'end;\n', nsp || '.' || rel);
        select * into func_ddl, trigger_ddl
          from cdc._cap_ddl(i_table, names.func, names.row_trigger, names.truncate_trigger, body, true);
        return;
    end if;
    whenexpr := i_opts ->> 'when';
    body := body || E'    if TG_OP = ''INSERT'' then\n';
    if whenexpr is not null then
        body := body || format(E'        if not coalesce(%s, false) then return %s; end if;\n',
                               cdc._cap_rowexpr(whenexpr, 'NEW'), case when before then 'NEW' else 'null' end);
    end if;
    body := body || '        ' || cdc._cap_row_insert(q, 'INSERT', 'NEW', i_table, i_opts, pkey, payload, null, '        ') || E'\n'
                 || E'    elsif TG_OP = ''UPDATE'' then\n';
    if whenexpr is not null then
        body := body || format(E'        if not coalesce(%s, false) then return %s; end if;\n',
                               cdc._cap_rowexpr(whenexpr, 'NEW'), case when before then 'NEW' else 'null' end);
    end if;
    if ignored_changed is not null then
        body := body || format(E'        if not (%s) and (%s) then\n            return %s;\n        end if;\n',
                               kept_changed, ignored_changed, case when before then 'NEW' else 'null' end);
    end if;
    body := body || format(E'        if %s then\n', keychg)
                 || E'            -- the key changed: a delete of the old key, then an insert of the new row\n'
                 || '            ' || cdc._cap_row_insert(q, 'DELETE', 'OLD', i_table, i_opts, pkey, del_data, null, '            ') || E'\n'
                 || '            ' || cdc._cap_row_insert(q, 'INSERT', 'NEW', i_table, i_opts, pkey, payload, null, '            ') || E'\n'
                 || E'        else\n'
                 || '            ' || cdc._cap_row_insert(q, 'UPDATE', 'NEW', i_table, i_opts, pkey, upd_data, backup, '            ') || E'\n'
                 || E'        end if;\n'
                 || E'    elsif TG_OP = ''DELETE'' then\n';
    if whenexpr is not null then
        body := body || format(E'        if not coalesce(%s, false) then return %s; end if;\n',
                               cdc._cap_rowexpr(whenexpr, 'OLD'), case when before then 'OLD' else 'null' end);
    end if;
    body := body || '        ' || cdc._cap_row_insert(q, 'DELETE', 'OLD', i_table, i_opts, pkey, del_data, null, '        ') || E'\n'
                 || E'    elsif TG_OP = ''TRUNCATE'' then\n'
                 || '        ' || cdc._cap_insert(q, 'TRUNCATE', 'NEW', i_table, i_opts - 'extra1' - 'extra2' - 'extra3' - 'extra4' - 'ev_type', pkey,
                                                 cdc._cap_payload(fmt, 'TRUNCATE', 'NEW', 'OLD', i_table, ignore, pkey), null) || E'\n'
                 || E'    end if;\n'
                 || E'    return null;  -- AFTER: ignored; BEFORE with skip: the row change is skipped\n'
                 || E'end;\n';
    select * into func_ddl, trigger_ddl
      from cdc._cap_ddl(i_table, names.func, names.row_trigger, names.truncate_trigger, body, before);
end;
$$ language plpgsql;


-- ----------------------------------------------------------------------
-- Function: cdc.capture_sql(table, queue, options)
--
--      The SQL that attaches capture to a table: the trigger function, then the triggers
--      (cdc._cap_generate). Runs nothing; cdc.attach() runs it. QC025 unless the session's
--      login role is a member of the table's owner role.
--
-- Returns:
--      SQL text.
-- ----------------------------------------------------------------------
create or replace function cdc.capture_sql(i_table regclass, i_queue_name text, i_opts jsonb)
returns text as $$
begin
    perform cdc._cap_require_owner(i_table, 'capture');
    return (select func_ddl || trigger_ddl
              from cdc._cap_generate(i_table, i_queue_name, cdc._cap_key_options(i_table, i_opts)));
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;
