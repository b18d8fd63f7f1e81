-- One event of a generated function: its fields (ev_type and ev_extra1..4 from the options
-- or the format's defaults) and the INSERT into the queue's current event table.


-- ----------------------------------------------------------------------
-- Function: cdc._cap_rowexpr(expr, var)
--
--      A checked option expression with "the row" bound to NEW or OLD.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_rowexpr(i_expr text, i_var text)
returns text as $$
    select replace(i_expr, '"__cdc_row".', i_var || '.');
$$ language sql immutable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_event_fields(op, var, table, options, pkey, data, backup)
--
--      The select list "ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4" of one
--      event. Each field, first that applies: the option's expression (ev_type, extra1..4);
--      the row's magic column (_pgq_ev_type, _pgq_ev_data, _pgq_ev_extra1..4: its text, NULL
--      included, as in PgQ); the format's default (ev_data the payload, ev_extra1 the table,
--      ev_extra2 the old row with backup). var names the row (NEW / OLD in row mode, a
--      transition table alias in statement mode). A TRUNCATE has no row: no magic columns,
--      and its json "pkey" is the table's primary key, read when it fires.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_event_fields(
    i_op text, i_var text, i_table regclass, i_opts jsonb, i_pkey text[],
    i_data text, i_backup text)
returns text as $$
declare
    nsp    text;
    rel    text;
    fmt    text := coalesce(i_opts ->> 'format', 'json');  -- set by cdc._cap_generate
    extra  text[] := array[null, null, null, null];
    magic  jsonb := '{}';
    m      text;
    ev_type text;
begin
    select n.nspname, c.relname into nsp, rel
      from pg_class c join pg_namespace n on n.oid = c.relnamespace where c.oid = i_table;
    if i_op <> 'TRUNCATE' then
        foreach m in array cdc._cap_magic_columns(i_table) loop
            magic := magic || jsonb_build_object(substr(m, 9), format('%s::text', cdc._cap_field(i_var, m)));
        end loop;
    end if;
    for k in 1 .. 4 loop
        if i_opts ? ('extra' || k) then
            extra[k] := cdc._cap_rowexpr(i_opts ->> ('extra' || k), i_var);
        end if;
        extra[k] := coalesce(extra[k], magic ->> ('extra' || k));
    end loop;
    if i_op = 'TRUNCATE' then
        ev_type := format('cdc._cap_ev_type(%L, %L, %L, %L, cdc._cap_primary_key(TG_RELID))',
                          fmt, i_op, nsp, rel);
    else
        ev_type := quote_literal(cdc._cap_ev_type(fmt, i_op, nsp, rel, i_pkey));
    end if;
    return format('%s, %s, %s, %s, %s, %s',
        coalesce(cdc._cap_rowexpr(i_opts ->> 'ev_type', i_var), magic ->> 'type', ev_type),
        coalesce(magic ->> 'data', i_data),
        coalesce(extra[1], quote_literal(nsp || '.' || rel)),
        coalesce(extra[2], i_backup, 'null'),
        coalesce(extra[3], 'null'),
        coalesce(extra[4], 'null'));
end;
$$ language plpgsql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_insert(queue, op, var, table, options, pkey, data, backup)
--
--      One event's INSERT statement in a row-mode function; the queue's current table is read
--      from its pointer sequence (no lookup of the queue row). For a restricted queue
--      (cdc._cap_restricted) cdc._cap_admit is asked first.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_insert(
    q cdc.queue, i_op text, i_var text, i_table regclass, i_opts jsonb, i_pkey text[],
    i_data text, i_backup text)
returns text as $$
    select case when cdc._cap_restricted(q)
                then format(E'perform cdc._cap_admit(%s, 1);  -- the queue is restricted\n%s',
                            q.queue_id, repeat(' ', 12))
                else '' end
        || format(
        'insert into cdc.event (ev_id, ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4, ev_part)'
        || E'\n            values (nextval(%L::regclass), %s,'
        || E'\n                    %s + pg_sequence_last_value(%L::regclass));',
        q.queue_event_seq,
        cdc._cap_event_fields(i_op, i_var, i_table, i_opts, i_pkey, i_data, i_backup),
        q.queue_id * 1000,
        format('cdc.%I', 'event_' || q.queue_id || '_cur'));
$$ language sql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_row_insert(queue, op, var, table, options, pkey, data, backup, indent)
--
--      One event in a row-mode function: the payload (and the old row with backup) assigned
--      to a variable first, then the INSERT. PL/pgSQL evaluates such an assignment as a
--      simple expression whose state is built once per transaction, where an expression
--      inside the INSERT is set up again by the executor for every row: for a wide table,
--      most of the trigger's cost.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_row_insert(
    q cdc.queue, i_op text, i_var text, i_table regclass, i_opts jsonb, i_pkey text[],
    i_data text, i_backup text, i_indent text)
returns text as $$
    select format(E'v_data := %s;\n', i_data)
           || case when i_backup is null then ''
                   else format(E'%sv_backup := %s;\n', i_indent, i_backup) end
           || i_indent
           || cdc._cap_insert(q, i_op, i_var, i_table, i_opts, i_pkey, 'v_data',
                              case when i_backup is not null then 'v_backup' end);
$$ language sql stable;
