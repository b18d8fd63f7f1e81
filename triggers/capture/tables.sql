-- Tables of the capture side: which tables are captured into which queue, with what options.

-- One row per captured (table, queue). cap_columns is the column signature the trigger
-- function was generated for, cap_schema / cap_name the table's name then (baked into
-- ev_extra1 and the json ev_type); when either no longer matches, the trigger is stale.
-- cap_aliases: every earlier "schema.name" of the table (the ev_extra1 form), so that events
-- queued under an old name still find their table (cdc.get_capture_aliases).
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
alter table cdc.capture add column if not exists cap_aliases text[] not null default '{}';

-- Capture rules: globs over schema and table names (cdc.capture_rules.sql). A table created
-- later that a rule matches is captured by the event trigger (or the next cdc.sync_captures)
-- with the rule's options, into its queue, on the authority of the rule's owner: the login
-- role that added it, which must still be a member of the table's owner role then. One rule
-- per (schema glob, table glob, queue); removing the queue removes its rules.
create table if not exists cdc.capture_rule (
    rule_id       bigint generated always as identity primary key,
    rule_schema   text not null,
    rule_table    text not null,
    rule_exclude  text[] not null default '{}',
    rule_queue    text not null references cdc.queue (queue_name) on update cascade on delete cascade,
    rule_options  jsonb not null,
    rule_owner    oid not null,
    rule_created  timestamptz not null default now(),
    unique (rule_schema, rule_table, rule_queue)
);

-- Captures of tables that were dropped (cdc._on_sql_drop), by queue and the name the table had:
-- the next table captured into that queue under that name is another table, whose capture
-- begins with a marker event (cdc._cap_succeed), so that a consumer keeps none of the dropped
-- table's rows. drop_table is the dropped table's OID, for the record. Removing the queue
-- removes its rows.
create table if not exists cdc.capture_dropped (
    drop_queue    text not null references cdc.queue (queue_name) on update cascade on delete cascade,
    drop_schema   text not null,
    drop_name     text not null,
    drop_table    oid not null,
    drop_time     timestamptz not null default now(),
    primary key (drop_queue, drop_schema, drop_name)
);
