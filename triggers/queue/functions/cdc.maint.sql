-- ----------------------------------------------------------------------
-- Function: cdc.maint_retry_events()
--
--      Re-inserts retry events that are due into their queue's current table, with their
--      original ev_id and time, owned by the consumer that asked for the retry: they come
--      back to that consumer only, in a later batch. Moves at most 10,000 at a time; call
--      it until it returns 0.
--
-- Returns:
--      Number of events re-inserted.
-- Tables: cdc.retry_queue, cdc.event
-- ----------------------------------------------------------------------
create or replace function cdc.maint_retry_events()
returns integer as $$
declare
    moved integer;
begin
    with due as (
        delete from cdc.retry_queue r
         using (select ev_owner, ev_id from cdc.retry_queue
                 where ev_retry_after <= now()
                 order by ev_retry_after
                 limit 10000
                   for update skip locked) d
         where r.ev_owner = d.ev_owner and r.ev_id = d.ev_id
        returning r.*
    )
    insert into cdc.event (ev_id, ev_time, ev_owner, ev_retry, ev_type, ev_data,
                           ev_extra1, ev_extra2, ev_extra3, ev_extra4, ev_part)
    select due.ev_id, due.ev_time, due.ev_owner, due.ev_retry, due.ev_type, due.ev_data,
           due.ev_extra1, due.ev_extra2, due.ev_extra3, due.ev_extra4,
           q.queue_id * 1000 + q.queue_cur_table
      from due join cdc.queue q on q.queue_id = due.ev_queue;
    get diagnostics moved = row_count;
    return moved;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc.maint_rotate_tables_step1(queue_name)
--
--      Removes ticks that no consumer needs, then, when the rotation period has passed and
--      the previous rotation's step 2 is done, empties the oldest event table with TRUNCATE
--      and makes it the current one. That is what keeps the queue free of dead tuples.
--
--      The table is truncated only when nothing in it is still needed, checked on the data:
--      the table is locked (waiting at most 2 s for writers still inserting into it, else
--      no rotation this time), and its newest transaction must be older than every
--      consumer's position. With no consumer, a fresh tick is made after the truncation, so
--      that a consumer registered later starts after the removed events.
--
-- Returns:
--      1 if the queue rotated, 0 if not.
-- Tables: cdc.tick, cdc.queue, the oldest event table
-- ----------------------------------------------------------------------
create or replace function cdc.maint_rotate_tables_step1(i_queue_name text)
returns integer as $$
declare
    q            cdc.queue;
    oldest_pos   bigint;
    nxt          integer;
    tbl          text;
    newest_txid  bigint;
    new_tick     bigint;
begin
    perform cdc._require_read_committed();
    q := cdc._queue(i_queue_name, true);
    select min(sub_last_tick) into oldest_pos from cdc.subscription where sub_queue = q.queue_id;
    delete from cdc.tick
     where tick_queue = q.queue_id
       and tick_id < coalesce(oldest_pos, (select max(tick_id) from cdc.tick where tick_queue = q.queue_id));

    if q.queue_switch_step2 is null or now() - q.queue_switch_time < q.queue_rotation_period then
        return 0;
    end if;
    nxt := (q.queue_cur_table + 1) % q.queue_ntables;
    tbl := cdc._event_table(q.queue_id, nxt);
    begin
        perform set_config('lock_timeout', '2s', true);
        execute format('lock table cdc.%I in access exclusive mode', tbl);
    exception when lock_not_available then
        return 0;
    end;
    execute format('select max(ev_txid) from cdc.%I', tbl) into newest_txid;
    if newest_txid is not null and exists (
        select 1 from cdc.subscription s
          join cdc.tick t on t.tick_queue = s.sub_queue and t.tick_id = s.sub_last_tick
         where s.sub_queue = q.queue_id and txid_snapshot_xmin(t.tick_snapshot) <= newest_txid)
    then
        return 0;
    end if;
    execute format('truncate cdc.%I', tbl);
    update cdc.queue
       set queue_cur_table = nxt, queue_switch_step1 = txid_current(),
           queue_switch_step2 = null, queue_switch_time = now()
     where queue_id = q.queue_id;
    -- Capture triggers read the current table from this sequence, without a lookup. A
    -- sequence is not transactional: if this transaction rolls back, writers keep using the
    -- table it points to. That is safe: readers read every table of the queue, and a table is
    -- truncated only after the checks above.
    perform setval(format('cdc.%I', 'event_' || q.queue_id || '_cur'), nxt, true);
    if oldest_pos is null then
        new_tick := cdc._insert_tick(q);
        delete from cdc.tick where tick_queue = q.queue_id and tick_id < new_tick;
    end if;
    return 1;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc.maint_rotate_tables_step2()
--
--      Completes rotations whose step 1 has committed: records the snapshot xmax after which
--      only the new table receives inserts from read-committed writers (shown as
--      queue_switch_step2), and allows the next rotation. Must run in a later transaction
--      than step 1; in the same one it does nothing.
--
-- Returns:
--      Number of queues updated.
-- Tables: cdc.queue
-- ----------------------------------------------------------------------
create or replace function cdc.maint_rotate_tables_step2()
returns integer as $$
declare
    done integer;
begin
    update cdc.queue
       set queue_switch_step2 = txid_snapshot_xmax(txid_current_snapshot())
     where queue_switch_step2 is null
       and queue_switch_step1 is distinct from txid_current_if_assigned()
       and txid_visible_in_snapshot(queue_switch_step1, txid_current_snapshot());
    get diagnostics done = row_count;
    return done;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc.maint_tables_to_vacuum()
--
--      The engine's tables that take updates and deletes, and so need vacuuming, when
--      autovacuum is off (cdc.maint_operations lists them as 'vacuum' rows); nothing while
--      autovacuum is on. Event tables are never listed: they are emptied by TRUNCATE.
--
-- Returns:
--      Schema-qualified table names, quoted where needed.
-- ----------------------------------------------------------------------
create or replace function cdc.maint_tables_to_vacuum()
returns setof text as $$
begin
    if current_setting('autovacuum') = 'on' then
        return;
    end if;
    return query
        select format('%I.%I', n.nspname, c.relname)
          from unnest(array['subscription', 'consumer', 'queue', 'tick', 'retry_queue'])
               with ordinality t (name, pos)
          join pg_class c on c.relname = t.name
          join pg_namespace n on n.oid = c.relnamespace and n.nspname = 'cdc'
         order by t.pos;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc.maint_operations()
--
--      The maintenance calls a ticker daemon should make, each in its own transaction, in
--      this order: rotation step 1 for every queue (step 1 also removes ticks no consumer
--      needs), then step 2; then, queue by queue in name order, each function of the
--      queue's queue_extra_maint in array order, with the queue name as argument; then
--      ('vacuum', table) for each table of cdc.maint_tables_to_vacuum(). Function names
--      are returned as stored: the caller resolves them (cdc/pg/ticker.py looks each one
--      up in the catalog and skips an unknown one). An empty queue_extra_maint gives no
--      row; a NULL element gives a row with a NULL func_name.
--
-- Returns:
--      (func_name, func_arg) rows; func_arg NULL means a call without argument.
-- ----------------------------------------------------------------------
create or replace function cdc.maint_operations(out func_name text, out func_arg text)
returns setof record as $$
begin
    return query
        select 'cdc.maint_rotate_tables_step1'::text, queue_name from cdc.queue;
    return query
        select 'cdc.maint_rotate_tables_step2'::text, null::text;
    return query
        select e.fn, q.queue_name
          from cdc.queue q
         cross join lateral unnest(q.queue_extra_maint) with ordinality e (fn, pos)
         order by q.queue_name, e.pos;
    return query
        select 'vacuum'::text, t from cdc.maint_tables_to_vacuum() t;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;
