-- The trigger generator: from a table, a queue and options, the SQL of one trigger function
-- specialised to the table's columns, and of the triggers that call it. Runs inside
-- PostgreSQL so that an event trigger can regenerate a trigger in the transaction of the
-- ALTER TABLE that changed the table.
--
-- Options (jsonb, as written by cdc.capture in Python):
--   format      'json' | 'urlenc' | 'sql'
--   ignore      [column, ...]    columns left out of the events
--   pkey        [column, ...]    key columns, instead of the primary key
--   backup      bool             old row in ev_extra2 on UPDATE (json, urlenc)
--   when        expr             boolean; false skips the event
--   extra1..4   expr             ev_extra1..4 instead of the defaults
--   ev_type     expr             ev_type instead of the format's
--   skip        bool             BEFORE trigger: queue the event, skip the row change
--   deny        bool             BEFORE trigger: refuse the change
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
-- Function: cdc._cap_columns(table, ignore)
--
--      The table's live columns in attnum order, without the ignored ones.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_columns(
    i_table regclass, i_ignore text[],
    out attnum smallint, out attname text, out atttypid oid)
returns setof record as $$
    select a.attnum, a.attname::text, a.atttypid
      from pg_attribute a
     where a.attrelid = i_table and a.attnum > 0 and not a.attisdropped
       and a.attname <> all (coalesce(i_ignore, '{}'))
     order by a.attnum;
$$ language sql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_signature(table)
--
--      The column signature a trigger is generated for: name and type of every live column,
--      in order. A table whose signature changed has a stale trigger. PL/pgSQL with static
--      SQL, so that its plan is cached: the guard trigger (cdc._cap_guard) runs it before
--      every statement, and a SQL function called from a query is planned again each time
--      (about 100 µs).
-- ----------------------------------------------------------------------
create or replace function cdc._cap_signature(i_table regclass)
returns text as $$
begin
    return (select coalesce(string_agg(format('%s %s', quote_ident(a.attname), format_type(a.atttypid, null)),
                                       ', ' order by a.attnum), '')
              from pg_attribute a
             where a.attrelid = i_table and a.attnum > 0 and not a.attisdropped);
end;
$$ language plpgsql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_pkey(table, pkey)
--
--      The key columns: the given ones (each must exist), else the primary key in index
--      order. QC020 for a table without either.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_pkey(i_table regclass, i_pkey text[])
returns text[] as $$
declare
    cols    text[];
    missing text;
begin
    if i_pkey is not null and cardinality(i_pkey) > 0 then
        select string_agg(quote_ident(k), ', ') into missing
          from unnest(i_pkey) k
         where not exists (select 1 from cdc._cap_columns(i_table, null) c where c.attname = k);
        if missing is not null then
            raise exception using errcode = 'QC021',
                message = format('pkey names columns that %s does not have: %s', i_table, missing);
        end if;
        return i_pkey;
    end if;
    select array_agg(a.attname::text order by k.ord) into cols
      from pg_index i
      cross join lateral unnest(i.indkey) with ordinality as k(attnum, ord)
      join pg_attribute a on a.attrelid = i.indrelid and a.attnum = k.attnum
     where i.indrelid = i_table and i.indisprimary;
    if cols is null then
        raise exception using errcode = 'QC020',
            message = format('table %s has no primary key', i_table),
            hint = 'give the key columns with --pkey col1,col2 (cdc attach), or add a primary key';
    end if;
    return cols;
end;
$$ language plpgsql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_concat(args)
--
--      concat() over argument expressions, nested so that no call takes more than 100
--      arguments (PostgreSQL's limit): a table of any width gets a payload expression.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_concat(i_args text[])
returns text as $$
declare
    chunk constant integer := 100;
    n     integer := coalesce(cardinality(i_args), 0);
begin
    if n = 0 then
        return null;
    end if;
    if n <= chunk then
        return format('concat(%s)', array_to_string(i_args, ', '));
    end if;
    return cdc._cap_concat(array(
        select format('concat(%s)', array_to_string(i_args[g : least(g + chunk - 1, n)], ', '))
          from generate_series(1, n, chunk) g order by g));
end;
$$ language plpgsql immutable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_concat_ws(separator, args)
--
--      concat_ws(separator, ...) over argument expressions, nested like cdc._cap_concat. An
--      inner group whose arguments are all NULL gives NULL (not ''), so that it adds no
--      separator: the result is the same as one flat call.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_concat_ws(i_separator text, i_args text[])
returns text as $$
declare
    chunk constant integer := 99;
    n     integer := coalesce(cardinality(i_args), 0);
begin
    if n <= chunk then
        return format('concat_ws(%L, %s)', i_separator, array_to_string(i_args, ', '));
    end if;
    return cdc._cap_concat_ws(i_separator, array(
        select format('nullif(concat_ws(%L, %s), %L)', i_separator,
                      array_to_string(i_args[g : least(g + chunk - 1, n)], ', '), '')
          from generate_series(1, n, chunk) g order by g));
end;
$$ language plpgsql immutable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_row_payload(format, var, table, ignore)
--
--      Expression for a whole row in json or urlenc form (ev_data, or the backup).
-- ----------------------------------------------------------------------
create or replace function cdc._cap_row_payload(
    i_format text, i_var text, i_table regclass, i_ignore text[])
returns text as $$
declare
    parts text[];
begin
    -- One concat() builds the payload in one go (a chain of || copies it at each step);
    -- cdc._cap_concat nests it for tables wider than one call's 100 arguments.
    if i_format = 'json' then
        select array_agg(v.arg order by cols.attnum, v.half)
          into parts
          from (select c.*, row_number() over (order by c.attnum) as n
                  from cdc._cap_columns(i_table, i_ignore) c) cols
         cross join lateral (values
               (1, quote_literal(case when cols.n = 1 then '{' else ',' end
                                 || to_json(cols.attname)::text || ':')),
               (2, cdc._cap_json_value(i_var, cols.attname, cols.atttypid))) v(half, arg);
        if parts is null then
            return quote_literal('{}');
        end if;
        return cdc._cap_concat(parts || quote_literal('}'));
    end if;
    select array_agg(v.arg order by cols.attnum, v.half)
      into parts
      from (select c.*, row_number() over (order by c.attnum) as n
              from cdc._cap_columns(i_table, i_ignore) c) cols
     cross join lateral (values (1, case when cols.n > 1 then quote_literal('&') end),
                                (2, cdc._cap_urlenc_pair(i_var, cols.attname, cols.atttypid))) v(half, arg)
     where v.arg is not null;
    return coalesce(cdc._cap_concat(parts), quote_literal(''));
end;
$$ language plpgsql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_sql_payload(op, table, ignore, pkey)
--
--      sqltriga's ev_data: I "(cols) values (vals)", U "col=val,... where key=val and ...",
--      D "key=val and ...". Key values come from OLD for U and D.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_sql_payload(
    i_op text, i_table regclass, i_ignore text[], i_pkey text[],
    i_new text default 'NEW', i_old text default 'OLD')
returns text as $$
declare
    cols   text;
    vals   text;
    sets   text;
    keys   text;
    noop   text;
begin
    -- Key conditions follow the table's column order (not the key's), with OLD values.
    select array_to_string(array_agg(format('%L || %s', cdc._cap_sql_ident(attname) || '=',
                                            cdc._cap_sql_value(i_old, attname, atttypid))
                                     order by attnum), ' || '' and '' || '),
           (array_agg(format('%L || %s', cdc._cap_sql_ident(attname) || '=',
                             cdc._cap_sql_value(i_old, attname, atttypid, 'NULL'))
                      order by attnum))[1]
      into keys, noop
      from cdc._cap_columns(i_table, null)
     where attname = any (i_pkey);
    if i_op = 'D' then
        return keys;
    end if;
    if i_op = 'I' then
        select string_agg(cdc._cap_sql_ident(attname), ',' order by attnum),
               array_to_string(array_agg(cdc._cap_sql_value(i_new, attname, atttypid) order by attnum),
                               ' || '','' || ')
          into cols, vals
          from cdc._cap_columns(i_table, i_ignore);
        return format('%L || %s || '')''', '(' || cols || ') values (', vals);
    end if;
    select cdc._cap_concat_ws(',', array_agg(
               format('case when %s then %L || %s end', cdc._cap_changed(attname, atttypid, i_new, i_old),
                      cdc._cap_sql_ident(attname) || '=',
                      cdc._cap_sql_value(i_new, attname, atttypid, 'NULL')) order by attnum))
      into sets
      from cdc._cap_columns(i_table, i_ignore);
    -- An UPDATE that changed nothing still says which row: its first key column set to itself.
    return format('coalesce(nullif(%s, ''''), %s) || '' where '' || %s', sets, noop, keys);
end;
$$ language plpgsql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_ev_type(format, op, table, pkey)
--
--      The constant ev_type of a format for an operation (INSERT, UPDATE, DELETE, TRUNCATE).
-- ----------------------------------------------------------------------
create or replace function cdc._cap_ev_type(
    i_format text, i_op text, i_schema text, i_name text, i_pkey text[])
returns text as $$
    select case i_format
        when 'json' then format('{"op":%s,"table":[%s,%s],"pkey":%s}',
                                to_json(i_op), to_json(i_schema), to_json(i_name),
                                coalesce(array_to_json(i_pkey)::text, '[]'))
        when 'urlenc' then case when i_op = 'TRUNCATE' then 'R'
                                else left(i_op, 1) || ':' || array_to_string(i_pkey, ',') end
        else case when i_op = 'TRUNCATE' then 'R' else left(i_op, 1) end
    end;
$$ language sql immutable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_rowexpr(expr, var)
--
--      A checked option expression with "the row" bound to NEW or OLD.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_rowexpr(i_expr text, i_var text)
returns text as $$
    select replace(i_expr, '"__cdc_row".', i_var || '.');
$$ language sql immutable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_event_fields(op, var, table, options, pkey, data, backup)
--
--      The select list "ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4" of one
--      event: ev_type and ev_extra1..4 from the options or the format's defaults. var names the
--      row (NEW / OLD in row mode, a transition table alias in statement mode).
-- ----------------------------------------------------------------------
create or replace function cdc._cap_event_fields(
    i_op text, i_var text, i_table regclass, i_opts jsonb, i_pkey text[],
    i_data text, i_backup text)
returns text as $$
declare
    nsp   text;
    rel   text;
    extra text[] := array[null, null, null, null];
begin
    select n.nspname, c.relname into nsp, rel
      from pg_class c join pg_namespace n on n.oid = c.relnamespace where c.oid = i_table;
    for k in 1 .. 4 loop
        if i_opts ? ('extra' || k) then
            extra[k] := cdc._cap_rowexpr(i_opts ->> ('extra' || k), i_var);
        end if;
    end loop;
    return format('%s, %s, %s, %s, %s, %s',
        coalesce(cdc._cap_rowexpr(i_opts ->> 'ev_type', i_var),
                 quote_literal(cdc._cap_ev_type(i_opts ->> 'format', i_op, nsp, rel, i_pkey))),
        i_data,
        coalesce(extra[1], quote_literal(nsp || '.' || rel)),
        coalesce(extra[2], i_backup, 'null'),
        coalesce(extra[3], 'null'),
        coalesce(extra[4], 'null'));
end;
$$ language plpgsql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_insert(queue, op, var, table, options, pkey, data, backup)
--
--      One event's INSERT statement in a row-mode function; the queue's current table is read
--      from its pointer sequence (no lookup of the queue row).
-- ----------------------------------------------------------------------
create or replace function cdc._cap_insert(
    q cdc.queue, i_op text, i_var text, i_table regclass, i_opts jsonb, i_pkey text[],
    i_data text, i_backup text)
returns text as $$
    select format(
        'insert into cdc.event (ev_id, ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4, ev_part)'
        || E'\n            values (nextval(%L::regclass), %s,'
        || E'\n                    %s + pg_sequence_last_value(%L::regclass));',
        q.queue_event_seq,
        cdc._cap_event_fields(i_op, i_var, i_table, i_opts, i_pkey, i_data, i_backup),
        q.queue_id * 1000,
        format('cdc.%I', 'event_' || q.queue_id || '_cur'));
$$ language sql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_row_insert(queue, op, var, table, options, pkey, data, backup, indent)
--
--      One event in a row-mode function: the payload (and the old row with backup) assigned
--      to a variable first, then the INSERT. PL/pgSQL evaluates such an assignment as a
--      simple expression whose state is built once per transaction, where an expression
--      inside the INSERT is set up again by the executor for every row: for a wide table,
--      most of the trigger's cost.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_row_insert(
    q cdc.queue, i_op text, i_var text, i_table regclass, i_opts jsonb, i_pkey text[],
    i_data text, i_backup text, i_indent text)
returns text as $$
    select format(E'v_data := %s;\n', i_data)
           || case when i_backup is null then ''
                   else format(E'%sv_backup := %s;\n', i_indent, i_backup) end
           || i_indent
           || cdc._cap_insert(q, i_op, i_var, i_table, i_opts, i_pkey, 'v_data',
                              case when i_backup is not null then 'v_backup' end);
$$ language sql stable;


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
    fmt      text := coalesce(i_opts ->> 'format', 'json');
    ignore   text[] := array(select jsonb_array_elements_text(coalesce(i_opts -> 'ignore', '[]')));
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
    if fmt not in ('json', 'urlenc', 'sql') then
        raise exception using errcode = 'QC006',
            message = format('unknown format %L: use json, urlenc or sql', fmt);
    end if;
    select n.nspname, c.relname into nsp, rel
      from pg_class c join pg_namespace n on n.oid = c.relnamespace where c.oid = i_table;
    pkey := cdc._cap_pkey(i_table, array(select jsonb_array_elements_text(i_opts -> 'pkey')));
    perform cdc._cap_check_expressions(i_table, i_opts);
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
    if cardinality(ignore) > 0 then
        select coalesce(string_agg(cdc._cap_changed(attname, atttypid), ' or ')
                            filter (where attname <> all (ignore)), 'false'),
               string_agg(cdc._cap_changed(attname, atttypid), ' or ')
                   filter (where attname = any (ignore))
          into kept_changed, ignored_changed
          from cdc._cap_columns(i_table, null);
    end if;

    if fmt = 'sql' then
        payload := cdc._cap_sql_payload('I', i_table, ignore, pkey);
        upd_data := cdc._cap_sql_payload('U', i_table, ignore, pkey);
        del_data := cdc._cap_sql_payload('D', i_table, ignore, pkey);
    else
        payload := cdc._cap_row_payload(fmt, 'NEW', i_table, ignore);
        upd_data := payload;
        del_data := cdc._cap_row_payload(fmt, 'OLD', i_table, ignore);
    end if;
    if coalesce((i_opts ->> 'backup')::boolean, false) then
        -- the old row: JSON for json, urlencoded for urlenc and sql (as PgQ writes it)
        backup := cdc._cap_row_payload(case when fmt = 'json' then 'json' else 'urlenc' end,
                                       'OLD', i_table, ignore);
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
                                                 case when fmt = 'json' then quote_literal('{}') else quote_literal('') end, null) || E'\n'
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
    return (select func_ddl || trigger_ddl from cdc._cap_generate(i_table, i_queue_name, i_opts));
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;


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
