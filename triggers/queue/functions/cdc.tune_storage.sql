-- ----------------------------------------------------------------------
-- Function: cdc.tune_storage(queue_name)
--
--      Sets the storage options of the queue's event tables to what cdc.create_queue
--      gives them: fillfactor 100 and autovacuum off, for the table and its TOAST table
--      (they are insert-only and emptied by TRUNCATE). The queue name is only looked up,
--      never put into SQL.
--
-- Returns:
--      1; 0 for an unknown queue (as PgQ); NULL for NULL.
-- Tables: the queue's event tables
-- ----------------------------------------------------------------------
create or replace function cdc.tune_storage(i_queue_name text)
returns integer as $$
declare
    q cdc.queue;
begin
    -- NULL gives NULL as in PgQ; not declared STRICT, which would skip the EXECUTE check
    -- for a NULL constant argument (the planner folds the call away).
    if i_queue_name is null then
        return null;
    end if;
    select * into q from cdc.queue where queue_name = i_queue_name;
    if not found then
        return 0;
    end if;
    for n in 0 .. q.queue_ntables - 1 loop
        execute format('alter table cdc.%I set (fillfactor = 100, autovacuum_enabled = off,'
                       ' toast.autovacuum_enabled = off)', cdc._event_table(q.queue_id, n));
    end loop;
    return 1;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;
