-- ----------------------------------------------------------------------
-- Function: cdc.get_batch_events(batch_id)
--
--      All events of an open batch, ordered by ev_id. For large batches use
--      cdc.open_batch_cursor(), which hands them out in chunks.
--
-- Tables: cdc.event partitions of the batch's queue
-- ----------------------------------------------------------------------
create or replace function cdc.get_batch_events(
    in  x_batch_id  bigint,
    out ev_id       bigint,
    out ev_time     timestamptz,
    out ev_txid     bigint,
    out ev_retry    integer,
    out ev_type     text,
    out ev_data     text,
    out ev_extra1   text,
    out ev_extra2   text,
    out ev_extra3   text,
    out ev_extra4   text)
returns setof record as $$
begin
    perform cdc._batch_subscription(x_batch_id);  -- QC003, QC014
    return query execute cdc._batch_sql(x_batch_id);
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc.get_batch_events(batch_id, ev_id_from, ev_id_to)
--
--      The batch's events with ev_id_from <= ev_id < ev_id_to (NULL: no bound), ordered by
--      ev_id: one slice of a large batch, so that several readers (Spark's JDBC partitions)
--      read it in parallel, each with one index range scan.
--
-- Tables: cdc.event partitions of the batch's queue
-- ----------------------------------------------------------------------
create or replace function cdc.get_batch_events(
    in  i_batch_id   bigint,
    in  i_ev_id_from bigint,
    in  i_ev_id_to   bigint,
    out ev_id        bigint,
    out ev_time      timestamptz,
    out ev_txid      bigint,
    out ev_retry     integer,
    out ev_type      text,
    out ev_data      text,
    out ev_extra1    text,
    out ev_extra2    text,
    out ev_extra3    text,
    out ev_extra4    text)
returns setof record as $$
begin
    perform cdc._batch_subscription(i_batch_id);  -- QC003, QC014
    return query execute cdc._batch_sql(i_batch_id, null, i_ev_id_from, i_ev_id_to);
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc.open_batch_cursor(batch_id, cursor_name)
--
--      Opens a cursor over an open batch's events (columns and order of
--      cdc.get_batch_events), for reading in bounded chunks:
--
--          begin;
--          select cdc.open_batch_cursor(42, 'batch_42');
--          fetch 5000 from batch_42;   -- until it returns no rows
--          close batch_42;
--          commit;
--
--      The query is built here; callers pass no SQL text. The cursor lives until the end
--      of the transaction. It is opened with the owner's rights, so readers need no
--      privileges on the event tables.
--
-- Returns:
--      The cursor name.
-- ----------------------------------------------------------------------
create or replace function cdc.open_batch_cursor(i_batch_id bigint, i_cursor_name text)
returns refcursor as $$
declare
    cur refcursor;
begin
    perform cdc._require(i_cursor_name, 'cursor name');
    perform cdc._batch_subscription(i_batch_id);  -- QC003, QC014
    cur := i_cursor_name;
    open cur no scroll for execute cdc._batch_sql(i_batch_id);
    return cur;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;
