-- Internal helpers of the queue engine. Not granted to anyone: the public functions, which
-- run as the owner (SECURITY DEFINER), call them.
--
-- The names of a queue's event tables.


-- ----------------------------------------------------------------------
-- Function: cdc._event_table(queue_id, n)
--
--      Name of the n-th event table of a queue (a partition of cdc.event), unqualified.
-- ----------------------------------------------------------------------
create or replace function cdc._event_table(i_queue_id integer, i_n integer)
returns text as $$
    select 'event_' || i_queue_id || '_' || i_n;
$$ language sql immutable;
