-- Runtime queries of the Python side, one per "-- name:" header, with psycopg placeholders.

-- name: installed_version
select to_regclass('cdc.installed');

-- name: role_outside_members
select m.rolname
  from pg_auth_members a
  join pg_roles r on r.oid = a.roleid
  join pg_roles m on m.oid = a.member
 where r.rolname = %(role)s and m.rolname not in ('cdc_admin', 'cdc_reader', 'cdc_writer')
 order by 1;

-- name: create_queue
select cdc.create_queue(%(queue)s);

-- name: drop_queue
select cdc.drop_queue(%(queue)s, %(force)s);

-- name: set_queue_config
select cdc.set_queue_config(%(queue)s, %(param)s, %(value)s);

-- name: insert_event
select cdc.insert_event(%(queue)s, %(ev_type)s, %(ev_data)s,
                        %(extra1)s, %(extra2)s, %(extra3)s, %(extra4)s);

-- name: register_consumer
select cdc.register_consumer(%(queue)s, %(consumer)s);

-- name: register_consumer_at
select cdc.register_consumer_at(%(queue)s, %(consumer)s, %(tick_id)s);

-- name: unregister_consumer
select cdc.unregister_consumer(%(queue)s, %(consumer)s);

-- name: next_batch_custom
select * from cdc.next_batch_custom(%(queue)s, %(consumer)s,
                                    %(min_lag)s, %(min_count)s, %(min_interval)s);

-- name: open_batch_cursor
select cdc.open_batch_cursor(%(batch_id)s, %(cursor)s);

-- name: event_retry
select cdc.event_retry(%(batch_id)s, %(ev_id)s, %(seconds)s::integer);

-- name: batch_retry
select cdc.batch_retry(%(batch_id)s, %(seconds)s::integer);

-- name: event_dead
select cdc.event_dead(%(batch_id)s, %(ev_id)s, %(reason)s);

-- name: finish_batch
select cdc.finish_batch(%(batch_id)s);

-- name: set_consumer_owner
select cdc.set_consumer_owner(%(queue)s, %(consumer)s, %(role)s);

-- name: ticker_all
select cdc.ticker();

-- name: ticker_queue
select cdc.ticker(%(queue)s);

-- name: force_tick
select cdc.force_tick(%(queue)s);

-- name: maint_retry_events
select cdc.maint_retry_events();

-- name: maint_operations
select func_name, func_arg from cdc.maint_operations();

-- name: maint_function
-- The function a maintenance operation names (as PgQ calls it: with the queue name as its
-- one text argument, or with none), looked up as SQL would resolve the name: schema and
-- name for sql.Identifier, no row when there is no such function.
select n.nspname::text, p.proname::text
  from pg_proc p
  join pg_namespace n on n.oid = p.pronamespace
 where p.oid = to_regprocedure(%(name)s || case when %(with_arg)s then '(text)' else '()' end);

-- name: maint_table
-- The table a 'vacuum' maintenance operation names: schema and name, no row when missing.
select n.nspname::text, c.relname::text
  from pg_class c
  join pg_namespace n on n.oid = c.relnamespace
 where c.oid = to_regclass(%(name)s) and c.relkind in ('r', 'm', 't');

-- name: queue_info
select * from cdc.get_queue_info(%(queue)s);

-- name: all_queue_info
select * from cdc.get_queue_info();

-- name: consumer_info
select * from cdc.get_consumer_info(%(queue)s);

-- name: describe_table
select c.oid::bigint,
       array(select a.attname::text from pg_attribute a
              where a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
              order by a.attnum)
  from pg_class c join pg_namespace n on n.oid = c.relnamespace
 where n.nspname = %(schema)s and c.relname = %(name)s and c.relkind in ('r', 'p');

-- name: attach
select cdc.attach(%(table)s::oid::regclass, %(queue)s, %(options)s::jsonb);

-- name: capture_sql
select cdc.capture_sql(%(table)s::oid::regclass, %(queue)s, %(options)s::jsonb);

-- name: detach
select cdc.detach(%(table)s::oid::regclass, %(queue)s);

-- name: capture_info
select * from cdc.get_capture_info();

-- name: capture_key_check
-- Whether columns can serve as a table's key: those of them that may be null, and whether a
-- valid, non-partial unique index on plain columns lies within them.
with t as (select c.oid from pg_class c join pg_namespace n on n.oid = c.relnamespace
            where n.nspname = %(schema)s and c.relname = %(table)s)
select (select array_agg(a.attname::text order by a.attnum)
          from pg_attribute a, t
         where a.attrelid = t.oid and a.attname = any (%(key)s::text[]) and not a.attnotnull),
       exists (select 1 from pg_index i, t
                where i.indrelid = t.oid and i.indisunique and i.indisvalid
                  and i.indpred is null and i.indexprs is null
                  and not exists (
                      select 1 from unnest((i.indkey::int2[])[0:i.indnkeyatts - 1]) k
                        join pg_attribute a on a.attrelid = t.oid and a.attnum = k
                       where a.attname <> all (%(key)s::text[])));

-- name: capture_access
-- How this role may read the capture registry: the table itself, or cdc.get_capture_info().
select coalesce(has_table_privilege(to_regclass('cdc.capture'), 'select'), false),
       coalesce(has_function_privilege(to_regprocedure('cdc.get_capture_info()'), 'execute'),
                false);

-- name: capture_options_table
-- The options a table is captured with into a queue (no row when it is not).
select cap_options from cdc.capture
 where cap_table = to_regclass(format('%%I.%%I', %(schema)s::text, %(table)s::text))
   and cap_queue = %(queue)s;

-- name: capture_options_info
-- The same through cdc.get_capture_info(), for a role that may execute it.
select options from cdc.get_capture_info()
 where table_name = format('%%I.%%I', %(schema)s::text, %(table)s::text)
   and queue_name = %(queue)s;

-- name: column_fill
-- Per live column of a table: the value rows added before the column hold without any event
-- (PostgreSQL's "missing value" of ADD COLUMN ... DEFAULT <not volatile>, as array text), and
-- whether those rows hold values of their own that only the table knows (a volatile default,
-- an identity or a generated column: the ADD COLUMN rewrote the table).
select a.attname::text,
       case when a.atthasmissing then a.attmissingval::text end,
       a.attidentity <> '' or a.attgenerated <> '' or exists (
           select 1
             from pg_attrdef d,
                  regexp_matches(d.adbin::text, ':(?:op)?funcid (\d+)', 'g') m,
                  pg_proc p
            where d.adrelid = a.attrelid and d.adnum = a.attnum
              and p.oid = m[1]::oid and p.provolatile = 'v')
  from pg_attribute a
 where a.attrelid = to_regclass(format('%%I.%%I', %(schema)s::text, %(table)s::text))
   and a.attnum > 0 and not a.attisdropped
 order by a.attnum;

-- name: add_capture_rule
select cdc.add_capture_rule(%(schema)s, %(table)s, %(queue)s, %(options)s::jsonb, %(exclude)s::text[]);

-- name: sync_capture_rule
select table_name, queue_name, action, reason from cdc.sync_capture_rule(%(rule)s, %(dry_run)s);

-- name: sync_captures
select table_name, queue_name, action, reason from cdc.sync_captures(%(queue)s, %(dry_run)s);

-- name: remove_capture_rule
select cdc.remove_capture_rule(%(rule)s);

-- name: capture_rules
select * from cdc.get_capture_rules();

-- name: next_batch_ticks
-- What the drain reads besides its batches, through functions a cdc_reader member may call
-- (queue/functions/cdc.reader_info.sql); queries_pgq.sql reads PgQ's tables instead.
select cdc.next_batch_ticks(%(queue)s, %(consumer)s, %(max_events)s);

-- name: queue_has_new_events
select cdc.queue_has_new_events(%(queue)s);

-- name: tick_snapshot
select cdc.get_tick_snapshot(%(queue)s, %(tick_id)s);

-- name: consumer_position
select last_tick from cdc.get_consumer_info()
 where queue_name = %(queue)s and consumer_name = %(consumer)s;

-- name: consumer_position_time
-- The consumer's last finished tick and that tick's time (now() - lag is its tick_time).
select last_tick, now() - lag from cdc.get_consumer_info()
 where queue_name = %(queue)s and consumer_name = %(consumer)s;

-- name: tick_at_snapshot
select cdc.tick_at_snapshot(%(queue)s);

-- name: table_readable
-- Whether the session's role may read a table (USAGE on its schema, SELECT on it), and its
-- quoted name; no row when there is no such table.
select has_schema_privilege(c.relnamespace, 'usage') and has_table_privilege(c.oid, 'select'),
       format('%%I.%%I', n.nspname, c.relname)
  from pg_class c join pg_namespace n on n.oid = c.relnamespace
 where n.nspname = %s and c.relname = %s;

-- name: may_grant_role
-- Whether the session's role may grant membership of a group role: a superuser, a holder
-- of its ADMIN OPTION (its creator, from PostgreSQL 16), or before 16 any CREATEROLE role.
select r.rolsuper
       or case when to_regrole(%(group)s) is null then false
               else pg_has_role(to_regrole(%(group)s), 'MEMBER WITH ADMIN OPTION') end
       or (r.rolcreaterole and current_setting('server_version_num')::int < 160000)
  from pg_roles r where r.rolname = current_user;

-- name: group_functions
-- The cdc functions a group role may execute here (or, when it does not exist, those
-- named), but for those PUBLIC may: what `cdc grant` grants directly in its place.
select p.oid::regprocedure::text
  from pg_proc p
 where p.pronamespace = 'cdc'::regnamespace and p.proname !~ '^_'
   and (p.proname = any (%(names)s::text[])
        or case when to_regrole(%(group)s) is null then false
                else has_function_privilege(to_regrole(%(group)s), p.oid, 'execute') end)
   and not has_function_privilege('public', p.oid, 'execute')
 order by 1;

-- name: consumer_owner
select owner, allowed from cdc.consumer_owner(%(queue)s, %(consumer)s);
