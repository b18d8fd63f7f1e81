-- The json capture format (PgQ's jsontriga): ev_data is the row as a JSON object, ev_type a
-- JSON object with the operation, the table and its key.
--
-- Each file of formats/ is one capture format, and defines the same two functions named
-- after it, that cdc.capture_formats.sql dispatches to (a new format: a file here, its \ir
-- in capture/install.sql, and its name in cdc.capture_formats.sql):
--   cdc._cap_<format>_payload(op, new, old, table, ignore, pkey)
--       the SQL expression text of ev_data for op INSERT, UPDATE, DELETE or TRUNCATE, and of
--       the old row kept in ev_extra2 for op BACKUP (the backup option); new and old name the
--       row variables (NEW / OLD in row mode, transition table aliases in statement mode)
--   cdc._cap_<format>_ev_type(op, schema, name, pkey)
--       the constant ev_type of an operation
-- The value helpers below them say how one column is written; the generic ones (text
-- output, NULL test, change test) are in cdc.capture_values.sql.


-- ----------------------------------------------------------------------
-- Function: cdc._cap_json_value(var, column, type)
--
--      JSON value of a column, as jsontriga writes it: int2/int4/int8 as bare numbers, bool
--      as true/false, timestamp / timestamptz / date in ISO form as JSON strings (timestamptz
--      in the session TimeZone), NULL as null, and every other type as a JSON string of its
--      text output.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_json_value(i_var text, i_col text, i_type oid)
returns text as $$
begin
    if i_type in ('int2'::regtype, 'int4'::regtype, 'int8'::regtype) then
        return format('coalesce(%s::text, ''null'')', cdc._cap_field(i_var, i_col));
    elsif i_type = 'bool'::regtype then
        return format('coalesce(%s::text, ''null'')', cdc._cap_field(i_var, i_col));
    elsif i_type in ('timestamp'::regtype, 'timestamptz'::regtype, 'date'::regtype) then
        return format('coalesce(to_json(%s)::text, ''null'')', cdc._cap_field(i_var, i_col));
    end if;
    return format('coalesce(to_json(%s)::text, ''null'')', cdc._cap_text_expr(i_var, i_col, i_type));
end;
$$ language plpgsql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_json_row(var, table, ignore)
--
--      A whole row as a JSON object, as jsontriga writes it: one concat() builds the payload in
--      one go (a chain of || copies it at each step); cdc._cap_concat nests it for tables wider
--      than one call's 100 arguments.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_json_row(i_var text, i_table regclass, i_ignore text[])
returns text as $$
declare
    parts text[];
begin
    select array_agg(v.arg order by cols.attnum, v.half)
      into parts
      from (select c.*, row_number() over (order by c.attnum) as n
              from cdc._cap_columns(i_table, i_ignore) c) cols
     cross join lateral (values
           (1, quote_literal(case when cols.n = 1 then '{' else ',' end
                             || to_json(cols.attname)::text || ':')),
           (2, cdc._cap_json_value(i_var, cols.attname, cols.atttypid))) v(half, arg);
    if parts is null then
        return quote_literal('{}');
    end if;
    return cdc._cap_concat(parts || quote_literal('}'));
end;
$$ language plpgsql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_json_payload(op, new, old, table, ignore, pkey)
--
--      ev_data: the new row for INSERT and UPDATE, the old row for DELETE (and the backup), {}
--      for TRUNCATE.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_json_payload(
    i_op text, i_new text, i_old text, i_table regclass, i_ignore text[], i_pkey text[])
returns text as $$
begin
    case i_op
        when 'INSERT', 'UPDATE' then return cdc._cap_json_row(i_new, i_table, i_ignore);
        when 'DELETE', 'BACKUP' then return cdc._cap_json_row(i_old, i_table, i_ignore);
        when 'TRUNCATE' then return quote_literal('{}');
    end case;
end;
$$ language plpgsql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_json_ev_type(op, schema, name, pkey)
--
--      {"op": op, "table": [schema, name], "pkey": [key columns]}.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_json_ev_type(i_op text, i_schema text, i_name text, i_pkey text[])
returns text as $$
    select format('{"op":%s,"table":[%s,%s],"pkey":%s}',
                  to_json(i_op), to_json(i_schema), to_json(i_name),
                  coalesce(array_to_json(i_pkey)::text, '[]'));
$$ language sql immutable;
