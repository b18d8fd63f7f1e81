-- Tables of the cdc queue engine.
--
-- Every statement here is safe to run again: installing over an existing install keeps the
-- data and adds what a newer version needs (new columns go in as `add column if not exists`).
--
-- Column prefixes follow the table: queue_, co_, sub_, tick_, ev_, dl_.

create schema if not exists cdc;

-- One row per queue.
create table if not exists cdc.queue (
    queue_id                  serial primary key,
    queue_name                text not null unique,
    queue_ntables             integer not null default 3,
    queue_cur_table           integer not null default 0,
    queue_rotation_period     interval not null default '2 hours',
    -- Rotation bookkeeping: txid at step 1 and the snapshot xmax recorded by step 2. A batch
    -- whose start snapshot xmin is below step 2 (or while step 2 is pending) also reads the
    -- previous table.
    queue_switch_step1        bigint not null default txid_current(),
    queue_switch_step2        bigint default txid_current(),
    queue_switch_time         timestamptz not null default now(),
    queue_external_ticker     boolean not null default false,
    queue_disable_insert      boolean not null default false,
    queue_ticker_paused       boolean not null default false,
    queue_ticker_max_count    integer not null default 500,
    queue_ticker_max_lag      interval not null default '3 seconds',
    queue_ticker_idle_period  interval not null default '1 minute',
    queue_per_tx_limit        integer,
    queue_max_retries         integer,
    queue_force_tick          boolean not null default false,
    queue_data_pfx            text not null,
    queue_event_seq           text not null,
    queue_tick_seq            text not null,
    -- PgQ's extra maintenance: functions cdc.maint_operations() lists for the queue, each
    -- called with the queue name as its one argument. Set with UPDATE, as in PgQ.
    queue_extra_maint         text[],
    constraint queue_name_length check (octet_length(queue_name) between 1 and 63),
    constraint queue_ntables_range check (queue_ntables between 2 and 100)
);
-- An install over an older one adds the columns that it lacks: cdc.upgrade_schema(), which
-- install.sql runs right after this file, holds every such in-place change.

-- Consumer names, shared by all queues.
create table if not exists cdc.consumer (
    co_id    serial primary key,
    co_name  text not null unique,
    constraint consumer_name_length check (octet_length(co_name) between 1 and 63)
);

-- Ticks: snapshots that cut the stream of transactions into batches.
create table if not exists cdc.tick (
    tick_queue      integer not null references cdc.queue on delete cascade,
    tick_id         bigint not null,
    tick_time       timestamptz not null default now(),
    tick_snapshot   txid_snapshot not null default txid_current_snapshot(),
    tick_event_seq  bigint not null,
    primary key (tick_queue, tick_id)
);

-- A consumer's position on a queue, and its open batch if any.
create table if not exists cdc.subscription (
    sub_id        serial primary key,
    sub_queue     integer not null references cdc.queue on delete cascade,
    sub_consumer  integer not null references cdc.consumer,
    sub_last_tick bigint not null,
    sub_next_tick bigint,
    sub_batch     bigint unique,
    sub_active    timestamptz not null default now(),
    -- The role that registered the consumer on this queue: only sessions that may act as that
    -- role (and cdc_admin members) may take, read, retry, finish its batches or unregister it
    -- (cdc._check_consumer_access). NULL for subscriptions made before owners were recorded:
    -- cdc_admin members only, until cdc.set_consumer_owner() names a role.
    sub_owner     oid,
    unique (sub_queue, sub_consumer)
);

create sequence if not exists cdc.batch_id_seq;

-- Events. One partition per queue table (cdc.event_<queue_id>_<n>), chosen by ev_part =
-- queue_id * 1000 + n, so that insert_event is one static statement with a cached plan.
-- Partitions are insert-only and emptied by TRUNCATE on rotation: no dead tuples.
create table if not exists cdc.event (
    ev_id      bigint not null,
    ev_time    timestamptz not null default now(),
    ev_txid    bigint not null default txid_current(),
    ev_owner   integer,
    ev_retry   integer,
    ev_type    text,
    ev_data    text,
    ev_extra1  text,
    ev_extra2  text,
    ev_extra3  text,
    ev_extra4  text,
    ev_part    integer not null
) partition by list (ev_part);

-- Events waiting to be retried, per subscription.
create table if not exists cdc.retry_queue (
    ev_retry_after  timestamptz not null,
    ev_queue        integer not null references cdc.queue on delete cascade,
    ev_id           bigint not null,
    ev_time         timestamptz not null,
    ev_txid         bigint,
    ev_owner        integer not null references cdc.subscription on delete cascade,
    ev_retry        integer,
    ev_type         text,
    ev_data         text,
    ev_extra1       text,
    ev_extra2       text,
    ev_extra3       text,
    ev_extra4       text,
    primary key (ev_owner, ev_id)
);
-- ev_retry may be NULL, as in PgQ (cdc.event_retry_raw stores what it is given).
create index if not exists retry_queue_due_idx on cdc.retry_queue (ev_retry_after);

-- Events a consumer gave up on: over the queue's retry limit, or sent here on purpose.
create table if not exists cdc.dead_letter (
    dl_id        bigserial primary key,
    dl_queue     integer not null references cdc.queue on delete cascade,
    dl_consumer  text not null,
    dl_time      timestamptz not null default now(),
    dl_reason    text not null,
    ev_id        bigint not null,
    ev_time      timestamptz not null,
    ev_txid      bigint,
    ev_retry     integer,
    ev_type      text,
    ev_data      text,
    ev_extra1    text,
    ev_extra2    text,
    ev_extra3    text,
    ev_extra4    text
);
create index if not exists dead_letter_queue_idx on cdc.dead_letter (dl_queue, dl_consumer);

-- Row types of functions with several overloads, so that each lists its columns once.
do $$
begin
    if to_regtype('cdc.ret_queue_info') is null then
        create type cdc.ret_queue_info as (
            queue_name                text,
            queue_ntables             integer,
            queue_cur_table           integer,
            queue_rotation_period     interval,
            queue_switch_time         timestamptz,
            queue_external_ticker     boolean,
            queue_ticker_paused       boolean,
            queue_ticker_max_count    integer,
            queue_ticker_max_lag      interval,
            queue_ticker_idle_period  interval,
            ticker_lag                interval,
            ev_per_sec                float8,
            ev_new                    bigint,
            last_tick_id              bigint);
    end if;
    if to_regtype('cdc.ret_consumer_info') is null then
        create type cdc.ret_consumer_info as (
            queue_name      text,
            consumer_name   text,
            lag             interval,
            last_seen       interval,
            last_tick       bigint,
            current_batch   bigint,
            next_tick       bigint,
            pending_events  bigint);
    end if;
    if to_regtype('cdc.ret_batch_info') is null then
        create type cdc.ret_batch_info as (
            batch_id              bigint,
            cur_tick_id           bigint,
            prev_tick_id          bigint,
            cur_tick_time         timestamptz,
            prev_tick_time        timestamptz,
            cur_tick_event_seq    bigint,
            prev_tick_event_seq   bigint);
    end if;
end;
$$;

-- The installed version, written by install.sql's last step.
create table if not exists cdc.installed (
    inst_version  text not null,
    inst_time     timestamptz not null default now()
);
