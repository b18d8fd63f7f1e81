-- ----------------------------------------------------------------------
-- Function: cdc.grant_perms(queue_name)
--
--      Puts the privileges of the queue's event tables and sequences back to what the
--      install gives them: nothing for PUBLIC, so only the owner of schema cdc reads them.
--      (PgQ's makes its event tables readable by pgq_reader. Here no role needs privileges
--      on the engine's tables: every public function runs as the owner and checks the
--      caller, see docs/queue.md, "Who may act for a consumer".) Useful after default
--      privileges (ALTER DEFAULT PRIVILEGES) gave a new queue's tables to PUBLIC.
--      QC001 for an unknown queue.
--
-- Returns:
--      1
-- Tables: the queue's event tables and sequences
-- ----------------------------------------------------------------------
create or replace function cdc.grant_perms(x_queue_name text)
returns integer as $$
declare
    q    cdc.queue;
    rel  text;
begin
    q := cdc._queue(x_queue_name);  -- QC001, QC006
    for n in 0 .. q.queue_ntables - 1 loop
        execute format('revoke all on table cdc.%I from public', cdc._event_table(q.queue_id, n));
    end loop;
    foreach rel in array array['_id_seq', '_tick_seq', '_cur'] loop
        if to_regclass(format('cdc.%I', 'event_' || q.queue_id || rel)) is not null then
            execute format('revoke all on sequence cdc.%I from public', 'event_' || q.queue_id || rel);
        end if;
    end loop;
    return 1;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;
