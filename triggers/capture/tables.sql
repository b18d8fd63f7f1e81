-- Tables of the capture side: which tables are captured into which queue, with what options.

-- One row per captured (table, queue). cap_columns is the column signature the trigger
-- function was generated for; when the table's columns no longer match, the trigger is stale.
create table if not exists cdc.capture (
    cap_table     oid not null,
    cap_schema    text not null,
    cap_name      text not null,
    cap_queue     text not null references cdc.queue (queue_name) on update cascade,
    cap_options   jsonb not null,
    cap_columns   text not null,
    cap_function  text not null,
    cap_created   timestamptz not null default now(),
    primary key (cap_table, cap_queue)
);
