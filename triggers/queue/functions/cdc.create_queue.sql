-- ----------------------------------------------------------------------
-- Function: cdc.create_queue(queue_name)
--
--      Creates a queue: its row, its event and tick sequences, the pointer to its current
--      event table (sequence cdc.event_<id>_cur), its event tables (partitions
--      of cdc.event, with an index on ev_txid only) and a first tick, so that consumers can
--      register at once.
--
-- Parameters:
--      queue_name - 1 to 63 bytes, no control characters
--
-- Returns:
--      1 if the queue was created, 0 if it existed already.
-- Tables: cdc.queue, cdc.tick, cdc.event (partitions)
-- ----------------------------------------------------------------------
create or replace function cdc.create_queue(i_queue_name text)
returns integer as $$
declare
    q    cdc.queue;
    qid  integer;
    tbl  text;
begin
    perform cdc._check_name('queue', i_queue_name);
    if exists (select 1 from cdc.queue where queue_name = i_queue_name) then
        return 0;
    end if;
    qid := nextval(pg_get_serial_sequence('cdc.queue', 'queue_id'));
    insert into cdc.queue (queue_id, queue_name, queue_data_pfx, queue_event_seq, queue_tick_seq)
    values (qid, i_queue_name, 'cdc.event_' || qid,
            'cdc.event_' || qid || '_id_seq', 'cdc.event_' || qid || '_tick_seq')
    on conflict (queue_name) do nothing
    returning * into q;
    if not found then
        return 0;
    end if;
    execute format('create sequence cdc.%I', 'event_' || qid || '_id_seq');
    execute format('create sequence cdc.%I', 'event_' || qid || '_tick_seq');
    -- The current table, readable without a lookup of the queue row (capture triggers).
    execute format('create sequence cdc.%I minvalue 0 maxvalue 999 start 0', 'event_' || qid || '_cur');
    perform setval(format('cdc.%I', 'event_' || qid || '_cur'), 0, true);
    for n in 0 .. q.queue_ntables - 1 loop
        tbl := cdc._event_table(qid, n);
        execute format('create table cdc.%I partition of cdc.event for values in (%s)'
                       ' with (autovacuum_enabled = off, fillfactor = 100)', tbl, qid * 1000 + n);
        execute format('create index on cdc.%I (ev_txid)', tbl);
    end loop;
    perform cdc._insert_tick(q);
    return 1;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;
