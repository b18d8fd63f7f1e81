-- The urlenc capture format (PgQ's logutriga): ev_data is the row urlencoded, ev_type the
-- operation's letter and the key columns.
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
-- Function: cdc._urlenc_slow(text)
--
--      The encoding of a value that holds characters to escape: each distinct such character
--      is replaced once, everywhere: '%' first (the escapes written later contain it), then
--      the others, then space by '+' (after '+' itself became %2b).
-- ----------------------------------------------------------------------
create or replace function cdc._urlenc_slow(i_value text)
returns text as $$
declare
    result text := replace(i_value, '%', '%25');
    ch     text;
begin
    for ch in select distinct m[1] from regexp_matches(i_value, '([^A-Za-z0-9_. %-])', 'g') m loop
        result := replace(result, ch,
                          regexp_replace(encode(convert_to(ch, pg_catalog.getdatabaseencoding()), 'hex'),
                                         '(..)', '%\1', 'g'));
    end loop;
    return replace(result, ' ', '+');
end;
$$ language plpgsql immutable parallel safe;


-- ----------------------------------------------------------------------
-- Function: cdc._urlenc(text)
--
--      URL encoding as logutriga writes it: A-Z a-z 0-9 _ . - stay, space becomes +, every
--      other byte (in the database encoding) becomes %xx with lowercase hex. NULL stays NULL.
--      A plain SQL expression, so that the planner inlines it into the generated trigger's
--      payload expression (no function call per value); hence no SET clause and every
--      operator and function schema-qualified. A value with only safe characters costs one
--      regular expression test, one that also has spaces, ':' or '+' (text, timestamps)
--      two tests and three replace() calls; others go to _urlenc_slow.
-- ----------------------------------------------------------------------
create or replace function cdc._urlenc(i_value text)
returns text as $$
    select case
        when i_value operator(pg_catalog.~) '^[A-Za-z0-9_.-]*$' then i_value
        -- words, timestamps and times: only space, ':' and '+' to escape
        when i_value operator(pg_catalog.~) '^[A-Za-z0-9_. :+-]*$'
            then pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(
                     i_value, '+', '%2b'), ':', '%3a'), ' ', '+')
        else cdc._urlenc_slow(i_value)
    end;
$$ language sql immutable parallel safe;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_urlenc_pair(var, column, type)
--
--      "col=value" as logutriga writes it: the encoded name, and the encoded text output;
--      bool as t/f; NULL as the bare name (no '='); '' as "col="; a composite whose fields
--      are all NULL as its text, "cp=%28%2c%29".
-- ----------------------------------------------------------------------
create or replace function cdc._cap_urlenc_pair(i_var text, i_col text, i_type oid)
returns text as $$
declare
    key  text := cdc._urlenc(i_col);
    base oid := coalesce(nullif((select typbasetype from pg_type where oid = i_type), 0), i_type);
    val  text := cdc._cap_text_expr(i_var, i_col, i_type);
begin
    -- These types' text output only has characters that need no escaping (digits, letters,
    -- '-', '.'): the value is written as it is, without a call per row.
    if base not in ('int2'::regtype, 'int4'::regtype, 'int8'::regtype, 'numeric'::regtype,
                    'bool'::regtype, 'uuid'::regtype, 'oid'::regtype) then
        val := format('cdc._urlenc(%s)', val);
    end if;
    return format('case when %s then %L else %L || %s end',
                  cdc._cap_is_null(i_var, i_col, i_type), key, key || '=', val);
end;
$$ language plpgsql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_urlenc_row(var, table, ignore)
--
--      A whole row urlencoded, as logutriga writes it: col=value pairs joined by '&', in one
--      concat() (cdc._cap_concat nests it for wide tables). Also the backup of the sql format.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_urlenc_row(i_var text, i_table regclass, i_ignore text[])
returns text as $$
declare
    parts text[];
begin
    select array_agg(v.arg order by cols.attnum, v.half)
      into parts
      from (select c.*, row_number() over (order by c.attnum) as n
              from cdc._cap_columns(i_table, i_ignore) c) cols
     cross join lateral (values (1, case when cols.n > 1 then quote_literal('&') end),
                                (2, cdc._cap_urlenc_pair(i_var, cols.attname, cols.atttypid))) v(half, arg)
     where v.arg is not null;
    return coalesce(cdc._cap_concat(parts), quote_literal(''));
end;
$$ language plpgsql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_urlenc_payload(op, new, old, table, ignore, pkey)
--
--      ev_data: the new row for INSERT and UPDATE, the old row for DELETE (and the backup), ''
--      for TRUNCATE.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_urlenc_payload(
    i_op text, i_new text, i_old text, i_table regclass, i_ignore text[], i_pkey text[])
returns text as $$
begin
    case i_op
        when 'INSERT', 'UPDATE' then return cdc._cap_urlenc_row(i_new, i_table, i_ignore);
        when 'DELETE', 'BACKUP' then return cdc._cap_urlenc_row(i_old, i_table, i_ignore);
        when 'TRUNCATE' then return quote_literal('');
    end case;
end;
$$ language plpgsql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_urlenc_ev_type(op, schema, name, pkey)
--
--      I:key1,key2 (U:, D: likewise), R for TRUNCATE.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_urlenc_ev_type(i_op text, i_schema text, i_name text, i_pkey text[])
returns text as $$
    select case when i_op = 'TRUNCATE' then 'R'
                else left(i_op, 1) || ':' || array_to_string(i_pkey, ',') end;
$$ language sql immutable;
