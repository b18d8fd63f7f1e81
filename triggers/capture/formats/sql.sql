-- The sql capture format (PgQ's sqltriga): ev_data is the part of an SQL statement after the
-- table name, ev_type the operation's letter.
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
-- Function: cdc._cap_sql_value(var, column, type, null_word)
--
--      A value as sqltriga writes it: a quoted literal of its text output (E'' with doubled
--      backslashes when it holds a backslash, as quote_literal does). NULL is written as
--      null_word: sqltriga writes null in INSERT values and NULL in UPDATE assignments.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_sql_value(
    i_var text, i_col text, i_type oid, i_null_word text default 'null')
returns text as $$
begin
    return format('coalesce(quote_literal(%s), %L)', cdc._cap_text_expr(i_var, i_col, i_type), i_null_word);
end;
$$ language plpgsql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_sql_ident(name)
--
--      An identifier as sqltriga writes it: bare when it is a plain lower-case name that is not
--      a keyword, double-quoted otherwise (quote_ident's rule).
-- ----------------------------------------------------------------------
create or replace function cdc._cap_sql_ident(i_name text)
returns text as $$
    select quote_ident(i_name);
$$ language sql immutable set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_sql_payload(op, new, old, table, ignore, pkey)
--
--      sqltriga's ev_data: INSERT "(cols) values (vals)", UPDATE "col=val,... where key=val and
--      ...", DELETE "key=val and ..."; key values come from the old row for UPDATE and DELETE.
--      '' for TRUNCATE; the backup is the old row urlencoded (as PgQ writes it).
-- ----------------------------------------------------------------------
create or replace function cdc._cap_sql_payload(
    i_op text, i_new text, i_old text, i_table regclass, i_ignore text[], i_pkey text[])
returns text as $$
declare
    cols   text;
    vals   text;
    sets   text;
    keys   text;
    noop   text;
begin
    if i_op = 'BACKUP' then
        -- the old row urlencoded, as PgQ writes it
        return cdc._cap_urlenc_row(i_old, i_table, i_ignore);
    end if;
    if i_op = 'TRUNCATE' then
        return quote_literal('');
    end if;
    -- Key conditions follow the table's column order (not the key's), with OLD values.
    select array_to_string(array_agg(format('%L || %s', cdc._cap_sql_ident(attname) || '=',
                                            cdc._cap_sql_value(i_old, attname, atttypid))
                                     order by attnum), ' || '' and '' || '),
           (array_agg(format('%L || %s', cdc._cap_sql_ident(attname) || '=',
                             cdc._cap_sql_value(i_old, attname, atttypid, 'NULL'))
                      order by attnum))[1]
      into keys, noop
      from cdc._cap_columns(i_table, null)
     where attname = any (i_pkey);
    if i_op = 'DELETE' then
        return keys;
    end if;
    if i_op = 'INSERT' then
        select string_agg(cdc._cap_sql_ident(attname), ',' order by attnum),
               array_to_string(array_agg(cdc._cap_sql_value(i_new, attname, atttypid) order by attnum),
                               ' || '','' || ')
          into cols, vals
          from cdc._cap_columns(i_table, i_ignore);
        return format('%L || %s || '')''', '(' || cols || ') values (', vals);
    end if;
    if i_op <> 'UPDATE' then
        raise exception 'cdc._cap_sql_payload: unknown op %', i_op;
    end if;
    select cdc._cap_concat_ws(',', array_agg(
               format('case when %s then %L || %s end', cdc._cap_changed(attname, atttypid, i_new, i_old),
                      cdc._cap_sql_ident(attname) || '=',
                      cdc._cap_sql_value(i_new, attname, atttypid, 'NULL')) order by attnum))
      into sets
      from cdc._cap_columns(i_table, i_ignore);
    -- An UPDATE that changed nothing still says which row: its first key column set to itself.
    return format('coalesce(nullif(%s, ''''), %s) || '' where '' || %s', sets, noop, keys);
end;
$$ language plpgsql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_sql_ev_type(op, schema, name, pkey)
--
--      I, U, D, and R for TRUNCATE.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_sql_ev_type(i_op text, i_schema text, i_name text, i_pkey text[])
returns text as $$
    select case when i_op = 'TRUNCATE' then 'R' else left(i_op, 1) end;
$$ language sql immutable;
