-- Keeping capture current with its tables, and checking option expressions.
--
-- Option expressions (when, extra1..4, ev_type) end up in the body of a generated function
-- that runs with the cdc owner's rights, and cdc.attach takes them from any caller that owns
-- the table, not only from the CLI (which parses them with sqlglot first). So they are checked
-- here too, in two steps, and never executed or planned while checked:
--   1. cdc._cap_expr_refusal: a scan of the text. One expression: no ';', no comment, no '$'
--      (dollar quotes, parameters), no backslash (so that a string means the same whatever
--      standard_conforming_strings), every quote closed, parentheses never closing what the
--      expression did not open, no comma outside parentheses, none of the keywords that start
--      a query or a clause (select, from, values, table, with, union, ...).
--   2. cdc._cap_check_expressions: PostgreSQL's own parser and analyser, by creating a view
--      over the table in a subtransaction that is always rolled back. Creating a view parses
--      and resolves names and types but neither plans nor runs anything (no constant folding).
--      The view's stored query tree (pg_rewrite.ev_action) then names every function,
--      operator and relation the expression uses (cdc._cap_tree_refusal): only the captured
--      table, and built-in functions (and operators over them) that are immutable or on a
--      short list of stable ones without side effects (cdc._cap_allowed_function) are
--      accepted; subqueries, parameters, aggregates, sequences and casts to a domain (whose
--      CHECK could call anything) are not. The view's column type is the expression's type.
--      (pg_depend cannot serve: it records no dependency on built-in objects.)
-- Refusals raise QC026; an expression that no longer fits the table (a column dropped) QC024.
-- At run time the expressions therefore only compute over the row with pure built-ins: their
-- author gains nothing from the owner's rights.


-- ----------------------------------------------------------------------
-- Function: cdc._cap_expr_refusal(expr)
--
--      Why an option expression is refused by the text scan (step 1 above), or NULL.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_expr_refusal(i_expr text)
returns text as $$
declare
    n     integer := length(i_expr);
    i     integer := 1;
    depth integer := 0;
    ch    text;
    quote text;
    word  text;
begin
    if n > 4000 then
        return 'it is longer than 4000 characters';
    end if;
    while i <= n loop
        ch := substr(i_expr, i, 1);
        if ch in ('''', '"') then
            -- a string literal or a quoted identifier: a doubled quote stays inside
            quote := ch;
            i := i + 1;
            loop
                if i > n then
                    return format('it leaves a %s open',
                                  case quote when '''' then 'string' else 'quoted identifier' end);
                end if;
                ch := substr(i_expr, i, 1);
                if ch = '\' then
                    return 'it holds a backslash';
                elsif ch = quote then
                    exit when substr(i_expr, i + 1, 1) is distinct from quote;
                    i := i + 1;
                end if;
                i := i + 1;
            end loop;
        elsif ch = ';' then
            return 'it holds a semicolon';
        elsif ch = '$' then
            return 'it holds a $ (a dollar quote or a parameter)';
        elsif ch = '\' then
            return 'it holds a backslash';
        elsif substr(i_expr, i, 2) in ('--', '/*') then
            return 'it holds a comment';
        elsif ch = '(' then
            depth := depth + 1;
        elsif ch = ')' then
            depth := depth - 1;
            if depth < 0 then
                return 'it closes a parenthesis it did not open';
            end if;
        elsif ch = ',' and depth = 0 then
            return 'it is more than one expression (a comma outside parentheses)';
        elsif ch ~ '[[:alpha:]_]' then
            word := substring(substr(i_expr, i) from '^[[:alnum:]_]+');
            if lower(word) in ('select', 'from', 'where', 'with', 'values', 'table', 'into', 'union',
                               'intersect', 'except', 'returning', 'lateral', 'having', 'window',
                               'limit', 'offset', 'fetch') then
                return format('it holds the keyword %s (one expression, without subqueries)', upper(word));
            end if;
            i := i + length(word) - 1;
        end if;
        i := i + 1;
    end loop;
    if depth <> 0 then
        return 'it leaves a parenthesis open';
    end if;
    return null;
end;
$$ language plpgsql immutable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_allowed_function(function)
--
--      Whether an option expression may call a function (directly, or through an operator or
--      a cast): a built-in of pg_catalog, plain (no aggregate, window function or set),
--      immutable, or stable and on a list of those that only compute over their arguments
--      and the clock (formatting, JSON building, time zones). Stable functions outside the
--      list can read settings, other sessions' queries or run a query (query_to_xml), which
--      the owner's rights must not do for an expression's author.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_allowed_function(i_func oid)
returns boolean as $$
    select coalesce((
        select p.pronamespace = 'pg_catalog'::regnamespace and p.oid < 16384 and p.prokind = 'f'
               and not p.proretset and not p.prosecdef
               and (p.provolatile = 'i'
                    or (p.provolatile = 's'
                        and (p.proname in ('format', 'concat', 'concat_ws', 'to_char', 'to_date',
                                           'to_timestamp', 'to_number', 'to_json', 'to_jsonb',
                                           'row_to_json', 'array_to_json', 'array_to_string',
                                           'json_build_object', 'json_build_array',
                                           'jsonb_build_object', 'jsonb_build_array', 'now',
                                           'statement_timestamp', 'transaction_timestamp',
                                           'timezone', 'date_trunc', 'date_part', 'extract', 'age',
                                           'date_add', 'date_subtract', 'make_timestamptz', 'date',
                                           'time', 'timetz', 'timestamp', 'timestamptz', 'numeric',
                                           'money', 'length', 'convert_to', 'convert_from',
                                           'quote_literal', 'quote_nullable', 'textanycat',
                                           'anytextcat', 'txid_current', 'pg_current_xact_id',
                                           'interval_pl_timestamptz', 'timestamptz_pl_interval',
                                           'timestamptz_mi_interval', 'pg_typeof')
                             or p.proname ~ '^(date|timestamp|timestamptz)_(eq|ne|lt|le|gt|ge|cmp)_(date|timestamp|timestamptz)$')))
          from pg_proc p where p.oid = i_func), false);
$$ language sql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_tree_refusal(tree, table, view)
--
--      What a view's query tree (the text of pg_rewrite.ev_action) uses that an option
--      expression may not, or NULL. The text names each node as {NODE and each function,
--      operator and relation by oid (:funcid, :opno, :opnos, :relid); names inside it (aliases,
--      columns) are printed with their braces, spaces and parentheses escaped by a backslash,
--      so a hostile name can add a spurious match (a refusal), never hide a real node.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_tree_refusal(i_tree text, i_table regclass, i_view regclass)
returns text as $$
    select string_agg(what, ', ' order by what)
      from (select distinct what from (
            select lower(m[1]) as what
              from regexp_matches(i_tree, '[{]([A-Z_]+)', 'g') m
             where m[1] in ('SUBLINK', 'SUBPLAN', 'ALTERNATIVESUBPLAN', 'PARAM', 'COERCETODOMAIN',
                            'COERCETODOMAINVALUE', 'NEXTVALUEEXPR', 'AGGREF', 'WINDOWFUNC',
                            'GROUPINGFUNC', 'MERGESUPPORTFUNC', 'RANGETBLFUNCTION')
            union all
            select format('function %s', m[1]::oid::regprocedure)
              from regexp_matches(i_tree, ':funcid ([0-9]+)', 'g') m
             where not cdc._cap_allowed_function(m[1]::oid)
            union all
            select format('operator %s', o.oid::regoperator)
              from (select regexp_split_to_table(trim(m[1]), ' +')::oid as opno
                      from regexp_matches(i_tree, ':opnos? [(]?o? ?([0-9 ]+)', 'g') m) x
              join pg_operator o on o.oid = x.opno
             where x.opno <> 0 and not cdc._cap_allowed_function(o.oprcode)
            union all
            select format('relation %s', m[1]::oid::regclass)
              from regexp_matches(i_tree, ':relid ([0-9]+)', 'g') m
             where m[1]::oid not in (i_table, i_view)  -- PostgreSQL < 16: OLD / NEW of the view
           ) found) refused;
$$ language sql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_check_expressions(table, options)
--
--      Checks the option expressions against the table as it is now (see the top of this
--      file): QC026 for one that is refused, QC024 for one that no longer compiles against the
--      table (a column dropped) or a when that is not boolean, so that a generated trigger
--      never fails at run time. In statement mode only the row itself ("__cdc_row") is bound,
--      as NEW / OLD have no meaning there.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_check_expressions(i_table regclass, i_opts jsonb)
returns void as $$
declare
    key       text;
    expr      text;
    reason    text;
    typ       regtype;
    bad       text;
    failure   text;
    tree      text;
    view_name text := format('__cdc_expr_check_%s', pg_backend_pid());
    statement boolean := coalesce(i_opts ->> 'mode', 'row') = 'statement';
begin
    foreach key in array array['when', 'extra1', 'extra2', 'extra3', 'extra4', 'ev_type'] loop
        expr := i_opts ->> key;
        continue when expr is null;
        reason := coalesce(cdc._cap_expr_refusal(expr),
                           cdc._cap_expr_refusal(cdc._cap_rowexpr(expr, 'NEW')),
                           cdc._cap_expr_refusal(cdc._cap_stmtexpr(expr, 'n')));
        if reason is not null then
            raise exception using errcode = 'QC026',
                message = format('the %s expression of the capture of %s is refused: %s', key, i_table, reason),
                hint = 'write one expression over the table''s columns, without subqueries, statements or comments';
        end if;
        typ := null;
        bad := null;
        failure := null;
        begin
            begin
                -- parsed and analysed only: a view is not planned when it is created
                execute format('create view cdc.%I as select (%s) as v from %s as %I%s',
                               view_name, expr, i_table, '__cdc_row',
                               case when statement then ''
                                    else format(' cross join %s as new cross join %s as old', i_table, i_table) end);
                select a.atttypid into typ from pg_attribute a
                 where a.attrelid = format('cdc.%I', view_name)::regclass and a.attnum = 1;
                select ev_action::text into tree from pg_rewrite
                 where ev_class = format('cdc.%I', view_name)::regclass;
                bad := cdc._cap_tree_refusal(tree, i_table, format('cdc.%I', view_name)::regclass);
            exception when others then
                failure := sqlerrm;
            end;
            -- undo the view whatever happened (what was read above stays in the variables)
            raise exception using errcode = 'QCR00';  -- internal, caught just below: never escapes
        exception when sqlstate 'QCR00' then
            null;
        end;
        if failure is not null then
            raise exception using errcode = 'QC024',
                message = format('the %s expression of the capture of %s no longer fits the table: %s',
                                 key, i_table, failure),
                hint = 'after a column change, attach the table again with a new expression, in the same transaction; '
                       || 'in cdc.attach, a column of the row is written "__cdc_row"."col" (or NEW."col" / OLD."col" in row mode)';
        end if;
        if bad is not null then
            raise exception using errcode = 'QC026',
                message = format('the %s expression of the capture of %s is refused: it uses %s', key, i_table, bad),
                hint = 'expressions may use the table''s columns and built-in functions without side effects';
        end if;
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
--      renamed, retyped) or that was renamed or moved to another schema, and after an ALTER
--      SCHEMA that renamed the schema of captured tables, regenerates their capture triggers
--      in the same transaction, so that the application's next statement finds a trigger that
--      matches the table (and events carry the table's new name; the old one is kept in
--      cap_aliases). If the options no longer fit (a key or expression column was dropped),
--      the ALTER fails with a message saying so, rather than leaving a trigger that would fail
--      the application's DML later. No check of the caller: only who may ALTER the table
--      (its owner) gets here, and the options are those stored by cdc.attach.
-- ----------------------------------------------------------------------
create or replace function cdc._on_ddl_end()
returns event_trigger as $$
declare
    cap cdc.capture;
begin
    for cap in
        select c.* from cdc.capture c
          join pg_class r on r.oid = c.cap_table
          join pg_namespace n on n.oid = r.relnamespace
         where (c.cap_table in (select objid from pg_event_trigger_ddl_commands()
                                 where classid = 'pg_class'::regclass)
                or r.relnamespace in (select objid from pg_event_trigger_ddl_commands()
                                       where classid = 'pg_namespace'::regclass))
           and (c.cap_columns is distinct from cdc._cap_signature(c.cap_table)
                or c.cap_schema <> n.nspname::text or c.cap_name <> r.relname::text)
    loop
        perform cdc._cap_apply(cap.cap_table::regclass, cap.cap_queue, cap.cap_options);
    end loop;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc._on_sql_drop()  (event trigger, sql_drop)
--
--      Forgets the captures of dropped tables and drops their generated functions (the
--      triggers went with the tables), and remembers each in cdc.capture_dropped by queue and
--      name: a table captured later under that name is another table (cdc._cap_succeed).
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
        insert into cdc.capture_dropped (drop_queue, drop_schema, drop_name, drop_table)
        values (cap.cap_queue, cap.cap_schema, cap.cap_name, cap.cap_table)
        on conflict (drop_queue, drop_schema, drop_name) do update
           set drop_table = excluded.drop_table, drop_time = now();
    end loop;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_succeed(table, queue_name)
--
--      Called as a table's capture into a queue begins (cdc._cap_apply, before its triggers
--      exist). When a dropped table was captured into the queue under the name this table has
--      now, this one is another table, and the events of that name still queued belong to the
--      dropped one: a consumer must keep none of its rows. So a marker event goes into the
--      queue first: ev_type 'cdc.recreated', ev_data {"table": "s.t", "dropped": [oid, ...]},
--      ev_extra1 "s.t" (unquoted, as capture events write it). Every event of the dropped
--      table has a lower ev_id (the DROP waited for its writers) and every event of this one a
--      higher (its triggers come after), so the drain, which reads a batch in ev_id order,
--      empties the table's mirror targets at the marker, in whatever batch each side falls.
--      The dropped captures are those cdc._on_sql_drop remembered and, where no event trigger
--      ran at the drop (no superuser at install, a disabled trigger), a capture of the name
--      whose table is gone (its generated function is dropped here). Both are forgotten.
--
-- Returns:
--      Whether a marker was written.
-- Tables: cdc.capture_dropped, cdc.capture, cdc.event (insert)
-- ----------------------------------------------------------------------
create or replace function cdc._cap_succeed(i_table regclass, i_queue_name text)
returns boolean as $$
declare
    nsp  text;
    rel  text;
    gone oid[];
    cap  cdc.capture;
begin
    select n.nspname, c.relname into nsp, rel
      from pg_class c join pg_namespace n on n.oid = c.relnamespace
     where c.oid = i_table;
    with forgotten as (
        delete from cdc.capture_dropped
         where drop_queue = i_queue_name and drop_schema = nsp and drop_name = rel
        returning drop_table)
    select array_agg(drop_table) into gone from forgotten;
    for cap in
        select * from cdc.capture c
         where c.cap_queue = i_queue_name and c.cap_schema = nsp and c.cap_name = rel
           and not exists (select 1 from pg_class r where r.oid = c.cap_table)
           for update
    loop
        execute format('drop function if exists cdc.%I()', cap.cap_function);
        delete from cdc.capture where cap_table = cap.cap_table and cap_queue = cap.cap_queue;
        gone := coalesce(gone, '{}') || cap.cap_table;
    end loop;
    if gone is null then
        return false;
    end if;
    perform cdc.insert_event(i_queue_name, 'cdc.recreated',
                             jsonb_build_object('table', nsp || '.' || rel, 'dropped', to_jsonb(gone::bigint[]))::text,
                             nsp || '.' || rel, null, null, null);
    return true;
end;
$$ language plpgsql;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_guard()  (BEFORE statement trigger, without event triggers)
--
--      Without an event trigger, an ALTER TABLE leaves the capture function as it was, and a
--      function naming a dropped or renamed column would fail the application's next
--      statement. This trigger runs before each INSERT / UPDATE / DELETE statement on a
--      captured table (one index probe and one look at the table's columns) and, when the
--      columns or the table's name changed, regenerates the capture function in the
--      application's transaction, before any row reaches it. Only the function is replaced
--      (the function part of cdc._cap_generate): the triggers stay as they are. Concurrent
--      first statements after the change queue on an advisory lock.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_guard()
returns trigger as $$
declare
    cap cdc.capture;
    sig text := cdc._cap_signature(TG_RELID);
begin
    if not exists (select 1 from cdc.capture
                    where cap_table = TG_RELID
                      and (cap_columns is distinct from sig
                           or cap_schema <> TG_TABLE_SCHEMA or cap_name <> TG_TABLE_NAME)) then
        return null;
    end if;
    perform pg_advisory_xact_lock('cdc.capture'::regclass::oid::integer, TG_RELID::integer);
    -- a concurrent first statement may have regenerated it meanwhile (READ COMMITTED: this
    -- query sees its commit)
    for cap in select * from cdc.capture
                where cap_table = TG_RELID
                  and (cap_columns is distinct from sig
                       or cap_schema <> TG_TABLE_SCHEMA or cap_name <> TG_TABLE_NAME)
                  for update
    loop
        execute (select func_ddl from cdc._cap_generate(TG_RELID, cap.cap_queue, cap.cap_options));
        perform cdc._cap_record(TG_RELID, cap.cap_queue, cap.cap_options);
    end loop;
    return null;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;
