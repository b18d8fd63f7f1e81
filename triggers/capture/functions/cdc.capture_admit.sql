-- The queue's disable_insert and per_tx_limit in the generated functions. A queue with
-- neither is free: its functions write events without a look at its row, as fast as a
-- function that knew of no setting. A restricted queue's functions ask cdc._cap_admit for
-- every event (row mode) or every statement's events (statement mode). A change between the
-- two, by cdc.set_queue_config or by an UPDATE of cdc.queue as PgQ's users make, regenerates
-- the queue's capture functions in its own transaction (cdc._cap_queue_changed).


-- ----------------------------------------------------------------------
-- Function: cdc._cap_restricted(queue)
--
--      Whether the queue limits what goes in: inserts disabled, or a per_tx_limit. What the
--      generator asks to choose the body it writes.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_restricted(q cdc.queue)
returns boolean as $$
    select q.queue_disable_insert or q.queue_per_tx_limit is not null;
$$ language sql immutable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_admit(queue_id, n)
--
--      What a generated function of a restricted queue calls before it writes n events (row
--      mode) or after (statement mode, the error undoing the statement): QC008 when inserts
--      are disabled, except in replica mode; QC007 past the per_tx_limit (cdc._admit_events).
-- ----------------------------------------------------------------------
create or replace function cdc._cap_admit(i_queue_id integer, i_n bigint)
returns void as $$
declare
    q cdc.queue;
begin
    select * into q from cdc.queue where queue_id = i_queue_id;
    if not found then
        raise exception using errcode = 'QC001',
            message = format('the queue (id %s) that this table''s capture trigger writes to no longer exists', i_queue_id),
            hint = 'detach the table (cdc detach), or attach it to an existing queue';
    end if;
    perform cdc._admit_events(q, i_n);
end;
$$ language plpgsql;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_queue_changed()
--
--      Trigger on cdc.queue: when a queue turns restricted or free, the capture functions of
--      its tables are generated again (only the functions: the triggers stay). A capture the
--      generator now refuses makes the change fail, naming the table: a trigger that ignored
--      the new setting would be worse.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_queue_changed()
returns trigger as $$
declare
    cap cdc.capture;
begin
    for cap in select * from cdc.capture where cap_queue = NEW.queue_name order by cap_table loop
        begin
            execute (select func_ddl from cdc._cap_generate(cap.cap_table::regclass, cap.cap_queue, cap.cap_options));
            perform cdc._cap_record(cap.cap_table::regclass, cap.cap_queue, cap.cap_options);
        exception when others then
            raise exception using errcode = 'QC024',
                message = format('the capture of %s into queue %L cannot follow the queue''s new settings: %s',
                                 cap.cap_table::regclass, cap.cap_queue, sqlerrm),
                hint = 'attach the table again (cdc attach) or detach it, then change the setting';
        end;
    end loop;
    return null;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;

drop trigger if exists cdc_queue_restricted on cdc.queue;
create trigger cdc_queue_restricted
    after update of queue_disable_insert, queue_per_tx_limit on cdc.queue
    for each row
    when ((OLD.queue_disable_insert or OLD.queue_per_tx_limit is not null)
          is distinct from (NEW.queue_disable_insert or NEW.queue_per_tx_limit is not null))
    execute function cdc._cap_queue_changed();
-- also when an UPDATE of cdc.queue runs in replica mode
alter table cdc.queue enable always trigger cdc_queue_restricted;
