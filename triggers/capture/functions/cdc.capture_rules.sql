-- Capture rules: "capture every table whose name matches these globs into this queue, with
-- these options", for the tables there now (cdc.sync_captures) and for those created later
-- (the event trigger cdc._on_table_ddl, where the cdc owner is a superuser; otherwise the next
-- cdc.sync_captures, e.g. `cdc attach --sync` from cron).
--
-- Globs, not regular expressions: in a schema or table glob `*` is any run of characters (also
-- none), `?` exactly one character, every other character itself; case-sensitive, matched
-- against the catalog name. cdc._glob_regex turns a glob into an anchored regular expression
-- and is the only place that does. An exclude is "schema.table" split like a table name (a
-- part in double quotes taken as written, a doubled quote inside it being one quote), or a
-- table glob alone for any schema the rule matches.
--
-- Which tables: ordinary and partitioned tables (never a partition: the parent's triggers
-- cover it), not temporary, not a member of an extension, outside schemas pg_*,
-- information_schema and those of the queue (cdc; pgq, pgq_ext, pgq_node, londiste of PgQ):
-- the same as the pipeline file's patterns (cdc/pg/catalog.py). A table matched by several
-- rules of one queue is attached by the oldest.
--
-- Who: a rule acts on the authority of its owner, the login role (session_user) that added
-- it, never of whoever creates a table or runs the sync. A table is attached only while that
-- role may still run cdc.attach and is a member of the table's owner role, exactly what
-- cdc.attach asks of its caller; otherwise the table is skipped with the reason. Option
-- expressions are checked as cdc.attach checks them: their text when the rule is added, and
-- against each table by the generator before anything is created (never run or planned).
--
-- A table a rule attaches that may already hold rows gets, in the same transaction, a
-- snapshot signal event in the queue: ev_type 'cdc.snapshot', ev_data {"table": "s.t"},
-- ev_extra1 "s.t" (unquoted, as capture events write it), so that the drain copies the rows
-- that predate the triggers.


-- ----------------------------------------------------------------------
-- Function: cdc._glob_regex(glob)
--
--      The anchored regular expression of a glob: `*` -> `.*`, `?` -> `.`, every character
--      that means something in a regular expression escaped with a backslash (a backslash
--      before a character that is not a letter or digit means that character).
-- ----------------------------------------------------------------------
create or replace function cdc._glob_regex(i_glob text)
returns text as $$
    select '^' || coalesce(string_agg(case
               when c = '*' then '.*'
               when c = '?' then '.'
               when strpos(E'\\^$.|+()[]{}', c) > 0 then E'\\' || c
               else c
           end, '' order by n), '') || '$'
      from regexp_split_to_table(i_glob, '') with ordinality as x(c, n);
$$ language sql immutable;


-- ----------------------------------------------------------------------
-- Function: cdc._glob_check(glob, what)
--
--      Checks a schema or table glob: not NULL, not empty, no control characters (QC006).
-- ----------------------------------------------------------------------
create or replace function cdc._glob_check(i_glob text, i_what text)
returns text as $$
begin
    perform cdc._require(i_glob, i_what);
    if i_glob = '' or i_glob ~ '[[:cntrl:]]' then
        raise exception using errcode = 'QC006',
            message = format('%s %L is empty or holds a control character', i_what, i_glob),
            hint = 'a glob names tables: * is any run of characters, ? one character';
    end if;
    return i_glob;
end;
$$ language plpgsql immutable;


-- ----------------------------------------------------------------------
-- Function: cdc._glob_split(pattern)
--
--      An exclude pattern split like a table name: "schema.table" or "table" (schema_glob
--      NULL: any schema). A part in double quotes is taken as written (a doubled quote is one
--      quote, a dot is a dot); a bare part is not case-folded. QC006 for a pattern that is not
--      one or two non-empty parts.
-- ----------------------------------------------------------------------
create or replace function cdc._glob_split(i_pattern text, out schema_glob text, out table_glob text)
as $$
declare
    n     integer;
    i     integer := 1;
    ch    text;
    cur   text;
    parts text[] := '{}';
    bad   text;
begin
    perform cdc._require(i_pattern, 'exclude pattern');
    n := length(i_pattern);
    loop
        cur := '';
        if substr(i_pattern, i, 1) = '"' then
            i := i + 1;
            loop
                if i > n then
                    bad := 'a quote is not closed';
                    exit;
                end if;
                ch := substr(i_pattern, i, 1);
                i := i + 1;
                if ch = '"' then
                    exit when substr(i_pattern, i, 1) is distinct from '"';
                    i := i + 1;
                end if;
                cur := cur || ch;
            end loop;
        else
            while i <= n and substr(i_pattern, i, 1) not in ('.', '"') loop
                cur := cur || substr(i_pattern, i, 1);
                i := i + 1;
            end loop;
        end if;
        exit when bad is not null;
        if cur = '' then
            bad := 'a part is empty';
            exit;
        end if;
        parts := parts || cur;
        exit when i > n;
        if substr(i_pattern, i, 1) <> '.' or i = n then
            bad := 'a part ends without a dot before the next, or the pattern ends with a dot';
            exit;
        end if;
        i := i + 1;
    end loop;
    if bad is null and cardinality(parts) > 2 then
        bad := 'it has more than two parts (quote a part holding a dot: "a.b")';
    end if;
    if bad is not null then
        raise exception using errcode = 'QC006',
            message = format('exclude pattern %L is not schema.table: %s', i_pattern, bad),
            hint = 'write SCHEMA.TABLE or TABLE, each a glob; a part in double quotes is taken as written';
    end if;
    if cardinality(parts) = 1 then
        table_glob := cdc._glob_check(parts[1], 'exclude pattern');
    else
        schema_glob := cdc._glob_check(parts[1], 'exclude pattern');
        table_glob := cdc._glob_check(parts[2], 'exclude pattern');
    end if;
end;
$$ language plpgsql immutable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_rule_matches(rule, schema, table)
--
--      Whether a rule's globs match a table's schema and name, and none of its excludes does.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_rule_matches(i_rule cdc.capture_rule, i_schema text, i_table text)
returns boolean as $$
    select i_schema ~ cdc._glob_regex(i_rule.rule_schema)
       and i_table ~ cdc._glob_regex(i_rule.rule_table)
       and not exists (select 1
                         from unnest(i_rule.rule_exclude) e
                        cross join lateral cdc._glob_split(e) g
                        where (g.schema_glob is null or i_schema ~ cdc._glob_regex(g.schema_glob))
                          and i_table ~ cdc._glob_regex(g.table_glob));
$$ language sql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_rule_candidates()
--
--      The tables a rule may capture (see the top of this file): oid, schema, name, owner.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_rule_candidates(
    out relid oid, out nspname text, out relname text, out relowner oid)
returns setof record as $$
    select c.oid, n.nspname::text, c.relname::text, c.relowner
      from pg_class c
      join pg_namespace n on n.oid = c.relnamespace
     where c.relkind in ('r', 'p') and not c.relispartition and c.relpersistence <> 't'
       and n.nspname !~ '^pg_'
       and n.nspname not in ('information_schema', 'cdc', 'pgq', 'pgq_ext', 'pgq_node', 'londiste')
       and not exists (select 1 from pg_depend d
                        where d.classid = 'pg_class'::regclass and d.objid = c.oid
                          and d.deptype = 'e');
$$ language sql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_rule_options_check(options)
--
--      Checks a rule's options before it is stored, as far as they can be without a table:
--      known keys only, each of its type, a known format and mode, skip and deny apart and
--      only in row mode, and each expression through the text scan of cdc.attach
--      (cdc._cap_expr_refusal, QC026). Each table is checked against the full rules by the
--      generator when the rule attaches it. QC006 otherwise.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_rule_options_check(i_opts jsonb)
returns void as $$
declare
    key    text;
    reason text;
    expr   text;
begin
    perform cdc._require(i_opts, 'options');
    if jsonb_typeof(i_opts) <> 'object' then
        raise exception using errcode = 'QC006', message = 'options must be a JSON object';
    end if;
    for key in select jsonb_object_keys(i_opts) loop
        reason := case
            when key not in ('format', 'mode', 'ignore', 'pkey', 'backup', 'skip', 'deny', 'when',
                             'extra1', 'extra2', 'extra3', 'extra4', 'ev_type')
                then 'is not a capture option'
            when key in ('format', 'mode', 'when', 'extra1', 'extra2', 'extra3', 'extra4', 'ev_type')
                 and jsonb_typeof(i_opts -> key) <> 'string'
                then 'must be a string'
            when key in ('backup', 'skip', 'deny') and jsonb_typeof(i_opts -> key) <> 'boolean'
                then 'must be true or false'
            when key in ('ignore', 'pkey')
                 and (jsonb_typeof(i_opts -> key) <> 'array'
                      or exists (select 1 from jsonb_array_elements(i_opts -> key) v
                                  where jsonb_typeof(v) <> 'string'))
                then 'must be an array of column names'
        end;
        if reason is not null then
            raise exception using errcode = 'QC006',
                message = format('capture rule option %L %s', key, reason),
                hint = 'options: format, mode, ignore, pkey, backup, skip, deny, when, extra1..4, ev_type';
        end if;
    end loop;
    perform cdc._cap_check_format(coalesce(i_opts ->> 'format', 'json'));
    if coalesce(i_opts ->> 'mode', 'row') not in ('row', 'statement') then
        raise exception using errcode = 'QC006',
            message = format('capture mode must be row or statement, not %L', i_opts ->> 'mode');
    end if;
    if coalesce((i_opts ->> 'skip')::boolean, false) and coalesce((i_opts ->> 'deny')::boolean, false) then
        raise exception using errcode = 'QC006', message = 'skip and deny exclude each other: choose one';
    end if;
    if i_opts ->> 'mode' = 'statement'
       and (coalesce((i_opts ->> 'skip')::boolean, false) or coalesce((i_opts ->> 'deny')::boolean, false)) then
        raise exception using errcode = 'QC006',
            message = 'skip and deny act on each row: use them with mode row, not statement';
    end if;
    foreach key in array array['when', 'extra1', 'extra2', 'extra3', 'extra4', 'ev_type'] loop
        expr := i_opts ->> key;
        continue when expr is null;
        reason := coalesce(cdc._cap_expr_refusal(expr),
                           cdc._cap_expr_refusal(cdc._cap_rowexpr(expr, 'NEW')),
                           cdc._cap_expr_refusal(cdc._cap_stmtexpr(expr, 'n')));
        if reason is not null then
            raise exception using errcode = 'QC026',
                message = format('the %s expression of the capture rule is refused: %s', key, reason),
                hint = 'write one expression over the table''s columns, without subqueries, statements or comments';
        end if;
    end loop;
end;
$$ language plpgsql;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_rule_refusal(rule, table)
--
--      Why a rule may not attach a table, or NULL: its owner is gone, may no longer run
--      cdc.attach, or is not a member of the table's owner role; or the table has no key (no
--      primary key, no usable unique index, no pkey option).
-- ----------------------------------------------------------------------
create or replace function cdc._cap_rule_refusal(i_rule cdc.capture_rule, i_table regclass)
returns text as $$
declare
    owner_name text := (select rolname from pg_roles where oid = i_rule.rule_owner);
    tab_owner  oid := (select relowner from pg_class where oid = i_table);
begin
    if owner_name is null then
        return format('the owner of capture rule %s no longer exists: remove the rule (cdc detach --rule %s) and add it again',
                      i_rule.rule_id, i_rule.rule_id);
    end if;
    if not has_function_privilege(i_rule.rule_owner, 'cdc.attach(regclass, text, jsonb)', 'execute') then
        return format('%s, the owner of capture rule %s, may no longer run cdc.attach (grant it cdc_admin)',
                      owner_name, i_rule.rule_id);
    end if;
    if not pg_has_role(i_rule.rule_owner, tab_owner, 'MEMBER') then
        return format('%s, the owner of capture rule %s, is not a member of %s, the table''s owner: attach it as its owner',
                      owner_name, i_rule.rule_id, tab_owner::regrole);
    end if;
    if cdc._cap_key_options(i_table, i_rule.rule_options) -> 'pkey' is null
       and not exists (select 1 from pg_index where indrelid = i_table and indisprimary) then
        return 'no primary key and no usable unique index: add one, or attach it with pkey=...';
    end if;
    return null;
end;
$$ language plpgsql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_may_hold_rows(table)
--
--      Whether the table may hold rows: it has pages, or it is partitioned and one of its
--      partitions has.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_may_hold_rows(i_table regclass)
returns boolean as $$
    select case (select relkind from pg_class where oid = i_table)
        when 'r' then pg_relation_size(i_table) > 0
        when 'p' then exists (select 1 from pg_partition_tree(i_table) t
                                join pg_class c on c.oid = t.relid
                               where c.relkind = 'r' and pg_relation_size(t.relid) > 0)
        else false
    end;
$$ language sql volatile;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_snapshot_signal(table, queue_name)
--
--      Inserts the snapshot signal of a table into the queue (see the top of this file).
-- ----------------------------------------------------------------------
create or replace function cdc._cap_snapshot_signal(i_table regclass, i_queue_name text)
returns void as $$
declare
    qualified text := (select n.nspname || '.' || c.relname
                         from pg_class c join pg_namespace n on n.oid = c.relnamespace
                        where c.oid = i_table);
begin
    perform cdc.insert_event(i_queue_name, 'cdc.snapshot',
                             jsonb_build_object('table', qualified)::text, qualified,
                             null, null, null);
end;
$$ language plpgsql;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_rule_attach(rule, table)
--
--      Attaches a table by a rule, checked by the caller (cdc._cap_rule_refusal): with the
--      rule's options (and the table's unique key), into the rule's queue, after the marker
--      of a table that takes a dropped one's name (cdc._cap_succeed), then the snapshot
--      signal when the table may hold rows. Waits for any concurrent attach of the table (the
--      lock of the guard trigger); false when the table is captured into the queue by then.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_rule_attach(i_rule cdc.capture_rule, i_table regclass)
returns boolean as $$
begin
    perform pg_advisory_xact_lock('cdc.capture'::regclass::oid::integer, i_table::oid::integer);
    if exists (select 1 from cdc.capture where cap_table = i_table and cap_queue = i_rule.rule_queue) then
        return false;
    end if;
    -- here, so that cdc._cap_apply finds no dropped table left and adds no second signal
    perform cdc._cap_succeed(i_table, i_rule.rule_queue);
    perform cdc._cap_apply(i_table, i_rule.rule_queue, cdc._cap_key_options(i_table, i_rule.rule_options));
    if cdc._cap_may_hold_rows(i_table) then
        perform cdc._cap_snapshot_signal(i_table, i_rule.rule_queue);
    end if;
    return true;
end;
$$ language plpgsql;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_sync(queue_name, rule_id, dry_run)
--
--      Applies the rules (of one queue, or one rule, or all) to every table they match, one
--      row per (table, queue): 'captured' (it is already), 'attached', 'would attach' (dry
--      run), or 'skipped' with the reason. Each table in its own subtransaction: one that
--      fails is skipped with the error's text and the others go on. A dry run changes
--      nothing, and checks each table's options against the generator all the same.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_sync(i_queue_name text, i_rule_id bigint, i_dry_run boolean,
    out table_name text, out queue_name text, out action text, out reason text)
returns setof record as $$
declare
    m record;
begin
    for m in
        select * from (
            select distinct on (t.relid, r.rule_queue)
                   r as rule, t.relid::regclass as tbl, format('%I.%I', t.nspname, t.relname) as qname,
                   exists (select 1 from cdc.capture cap
                            where cap.cap_table = t.relid and cap.cap_queue = r.rule_queue) as captured
              from cdc.capture_rule r
             cross join cdc._cap_rule_candidates() t
             where (i_queue_name is null or r.rule_queue = i_queue_name)
               and (i_rule_id is null or r.rule_id = i_rule_id)
               and cdc._cap_rule_matches(r, t.nspname, t.relname)
             order by t.relid, r.rule_queue, r.rule_id) found
         order by qname, (rule).rule_queue
    loop
        table_name := m.qname;
        queue_name := (m.rule).rule_queue;
        reason := null;
        if m.captured then
            action := 'captured';
        else
            reason := cdc._cap_rule_refusal(m.rule, m.tbl);
            if reason is not null then
                action := 'skipped';
            elsif i_dry_run then
                begin
                    perform cdc._cap_generate(m.tbl, (m.rule).rule_queue,
                                              cdc._cap_key_options(m.tbl, (m.rule).rule_options));
                    action := 'would attach';
                exception when others then
                    action := 'skipped';
                    reason := sqlerrm;
                end;
            else
                begin
                    action := case when cdc._cap_rule_attach(m.rule, m.tbl) then 'attached' else 'captured' end;
                exception when others then
                    action := 'skipped';
                    reason := sqlerrm;
                end;
            end if;
        end if;
        return next;
    end loop;
end;
$$ language plpgsql;


-- ----------------------------------------------------------------------
-- Function: cdc.add_capture_rule(schema_glob, table_glob, queue_name, options [, exclude])
--
--      Records a capture rule owned by the session's login role; attaches nothing (run
--      cdc.sync_captures, or cdc.sync_capture_rule, for the tables there now). The queue must
--      exist (QC001); globs and excludes must be well formed and the options valid (QC006,
--      QC026: see cdc._cap_rule_options_check). Adding a rule with the same globs and queue
--      again replaces its excludes and options when the caller owns it, QC025 otherwise.
--      EXECUTE is what cdc.attach asks of its caller (cdc_admin); each table is attached
--      only while the owner is a member of the table's owner role.
--
-- Returns:
--      The rule's id.
-- Tables: cdc.capture_rule
-- ----------------------------------------------------------------------
create or replace function cdc.add_capture_rule(i_schema text, i_table text, i_queue_name text,
                                                i_opts jsonb, i_exclude text[] default '{}')
returns bigint as $$
declare
    caller oid := (select oid from pg_roles where rolname = session_user);
    prev   cdc.capture_rule;
    id     bigint;
begin
    perform cdc._glob_check(i_schema, 'schema glob');
    perform cdc._glob_check(i_table, 'table glob');
    perform cdc._queue(i_queue_name);
    perform cdc._cap_rule_options_check(i_opts);
    perform cdc._require(i_exclude, 'exclude');
    perform cdc._glob_split(e) from unnest(i_exclude) e;
    select * into prev from cdc.capture_rule
     where rule_schema = i_schema and rule_table = i_table and rule_queue = i_queue_name
       for update;
    if found then
        if prev.rule_owner <> caller then
            raise exception using errcode = 'QC025',
                message = format('%s may not replace capture rule %s: it belongs to %s', session_user,
                                 prev.rule_id, coalesce((select rolname from pg_roles where oid = prev.rule_owner)::text, '?')),
                hint = 'its owner (or a superuser) may remove it with cdc.remove_capture_rule';
        end if;
        update cdc.capture_rule
           set rule_exclude = i_exclude, rule_options = i_opts, rule_created = now()
         where rule_id = prev.rule_id;
        return prev.rule_id;
    end if;
    insert into cdc.capture_rule (rule_schema, rule_table, rule_exclude, rule_queue, rule_options, rule_owner)
    values (i_schema, i_table, i_exclude, i_queue_name, i_opts, caller)
    returning rule_id into id;
    return id;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc.remove_capture_rule(rule_id)
--
--      Removes a capture rule; the tables it attached stay captured (cdc.detach them). Only
--      its owner or a superuser may (QC025); QC023 for an unknown rule.
-- Tables: cdc.capture_rule
-- ----------------------------------------------------------------------
create or replace function cdc.remove_capture_rule(i_rule_id bigint)
returns void as $$
declare
    r cdc.capture_rule;
begin
    perform cdc._require(i_rule_id, 'rule id');
    select * into r from cdc.capture_rule where rule_id = i_rule_id for update;
    if not found then
        raise exception using errcode = 'QC023',
            message = format('capture rule %s does not exist', i_rule_id),
            hint = 'cdc rules lists the capture rules';
    end if;
    if r.rule_owner <> (select oid from pg_roles where rolname = session_user)
       and not (select rolsuper from pg_roles where rolname = session_user) then
        raise exception using errcode = 'QC025',
            message = format('%s may not remove capture rule %s: it belongs to %s', session_user, i_rule_id,
                             coalesce((select rolname from pg_roles where oid = r.rule_owner)::text, '?')),
            hint = 'run it as the rule''s owner or as a superuser';
    end if;
    delete from cdc.capture_rule where rule_id = i_rule_id;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc.get_capture_rules()
--
--      Every capture rule, oldest first. owner is NULL when its role was dropped.
-- ----------------------------------------------------------------------
create or replace function cdc.get_capture_rules(
    out rule_id bigint, out schema_glob text, out table_glob text, out exclude text[],
    out queue_name text, out options jsonb, out owner name, out created timestamptz)
returns setof record as $$
    select r.rule_id, r.rule_schema, r.rule_table, r.rule_exclude, r.rule_queue, r.rule_options,
           (select rolname from pg_roles where oid = r.rule_owner), r.rule_created
      from cdc.capture_rule r
     order by r.rule_id;
$$ language sql stable security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc.sync_captures([queue_name [, dry_run]])
--
--      Applies the capture rules (of one queue, or all) to the tables there now: attaches
--      each matching table not yet captured into the rule's queue, or says why not (see
--      cdc._cap_sync). For databases without the event trigger, run it regularly (`cdc attach
--      --sync` from cron). A NULL queue means every queue. QC001 for an unknown queue.
-- ----------------------------------------------------------------------
create or replace function cdc.sync_captures(i_queue_name text default null, i_dry_run boolean default false)
returns table(table_name text, queue_name text, action text, reason text) as $$
begin
    perform cdc._require(i_dry_run, 'dry run');
    if i_queue_name is not null then
        perform cdc._queue(i_queue_name);
    end if;
    return query select * from cdc._cap_sync(i_queue_name, null, i_dry_run);
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc.sync_capture_rule(rule_id [, dry_run])
--
--      cdc.sync_captures for one rule: the rows of the tables it matches (none: it matches no
--      table now). QC023 for an unknown rule.
-- ----------------------------------------------------------------------
create or replace function cdc.sync_capture_rule(i_rule_id bigint, i_dry_run boolean default false)
returns table(table_name text, queue_name text, action text, reason text) as $$
begin
    perform cdc._require(i_rule_id, 'rule id');
    perform cdc._require(i_dry_run, 'dry run');
    if not exists (select 1 from cdc.capture_rule where rule_id = i_rule_id) then
        raise exception using errcode = 'QC023',
            message = format('capture rule %s does not exist', i_rule_id),
            hint = 'cdc rules lists the capture rules';
    end if;
    return query select * from cdc._cap_sync(null, i_rule_id, i_dry_run);
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc._on_table_ddl()  (event trigger, ddl_command_end)
--
--      After CREATE TABLE, CREATE TABLE AS, SELECT INTO and ALTER TABLE (a table renamed or
--      moved into a matching name, a partition detached, a key added), applies the capture
--      rules to each table the command touched that a rule matches and that is not captured
--      into the rule's queue yet, in the same transaction. It never fails the command: a
--      table that cannot be attached gets a WARNING naming it, the reason and what to do,
--      and nothing of its attach is left behind.
-- ----------------------------------------------------------------------
create or replace function cdc._on_table_ddl()
returns event_trigger as $$
declare
    m   record;
    why text;
begin
    if not exists (select 1 from cdc.capture_rule) then
        return;
    end if;
    for m in
        select distinct on (t.relid, r.rule_queue)
               r as rule, t.relid::regclass as tbl
          from (select distinct objid from pg_event_trigger_ddl_commands()
                 where classid = 'pg_class'::regclass and not in_extension) cmd
          join cdc._cap_rule_candidates() t on t.relid = cmd.objid
          join cdc.capture_rule r on cdc._cap_rule_matches(r, t.nspname, t.relname)
         where not exists (select 1 from cdc.capture cap
                            where cap.cap_table = t.relid and cap.cap_queue = r.rule_queue)
         order by t.relid, r.rule_queue, r.rule_id
    loop
        begin
            why := cdc._cap_rule_refusal(m.rule, m.tbl);
            if why is null then
                perform cdc._cap_rule_attach(m.rule, m.tbl);
            end if;
        exception when others then
            why := sqlerrm;
        end;
        if why is not null then
            raise warning 'cdc: table % matches capture rule % (queue %) but is not captured: %',
                m.tbl, (m.rule).rule_id, quote_literal((m.rule).rule_queue), why
                using hint = 'fix that, then run cdc attach --sync (or cdc attach the table)';
        end if;
    end loop;
exception when others then
    raise warning 'cdc: capture rules were not applied after %: %', tg_tag, sqlerrm
        using hint = 'run cdc attach --sync once the cause is fixed';
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;
