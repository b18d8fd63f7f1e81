-- ----------------------------------------------------------------------
-- Function: cdc.upgrade_schema()
--
--      Brings the tables of an older install up to this version in place: adds the queue
--      settings columns that are missing (among them queue_extra_maint),
--      subscription.sub_owner, makes retry_queue.ev_retry nullable, and gives queues made
--      before it their current-table sequence. The one place of these changes: `cdc
--      install` runs it right after tables.sql (and goes on with new functions, grants).
--      Safe to run at any time.
--
-- Returns:
--      0, whether or not it changed something (as PgQ).
-- Tables: cdc.queue, cdc.subscription, cdc.retry_queue
-- ----------------------------------------------------------------------
create or replace function cdc.upgrade_schema()
returns integer as $$
declare
    c  record;
    q  record;
begin
    for c in
        select * from (values
            ('queue_external_ticker',    'boolean not null default false'),
            ('queue_disable_insert',     'boolean not null default false'),
            ('queue_ticker_paused',      'boolean not null default false'),
            ('queue_ticker_max_count',   'integer not null default 500'),
            ('queue_ticker_max_lag',     'interval not null default ''3 seconds'''),
            ('queue_ticker_idle_period', 'interval not null default ''1 minute'''),
            ('queue_per_tx_limit',       'integer'),
            ('queue_max_retries',        'integer'),
            ('queue_force_tick',         'boolean not null default false'),
            ('queue_extra_maint',        'text[]')
        ) v (name, def)
    loop
        if not exists (select 1 from pg_attribute
                        where attrelid = 'cdc.queue'::regclass and attname = c.name
                          and not attisdropped) then
            execute format('alter table cdc.queue add column %I %s', c.name, c.def);
        end if;
    end loop;
    if not exists (select 1 from pg_attribute
                    where attrelid = 'cdc.subscription'::regclass and attname = 'sub_owner'
                      and not attisdropped) then
        alter table cdc.subscription add column sub_owner oid;
    end if;
    if exists (select 1 from pg_attribute
                where attrelid = 'cdc.retry_queue'::regclass and attname = 'ev_retry'
                  and attnotnull and not attisdropped) then
        alter table cdc.retry_queue alter column ev_retry drop not null;
    end if;
    for q in select queue_id, queue_cur_table from cdc.queue
              where to_regclass(format('cdc.%I', 'event_' || queue_id || '_cur')) is null loop
        execute format('create sequence cdc.%I minvalue 0 maxvalue 999 start 0', 'event_' || q.queue_id || '_cur');
        perform setval(format('cdc.%I', 'event_' || q.queue_id || '_cur'), q.queue_cur_table, true);
    end loop;
    return 0;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;
