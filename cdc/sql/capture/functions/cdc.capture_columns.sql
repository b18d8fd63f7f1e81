-- What the generator reads of a table: its live columns, their signature (a stale trigger is
-- one generated for another signature), and its key columns.


-- ----------------------------------------------------------------------
-- Function: cdc._cap_columns(table, ignore)
--
--      The table's live columns in attnum order, without the ignored ones.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_columns(
    i_table regclass, i_ignore text[],
    out attnum smallint, out attname text, out atttypid oid)
returns setof record as $$
    select a.attnum, a.attname::text, a.atttypid
      from pg_attribute a
     where a.attrelid = i_table and a.attnum > 0 and not a.attisdropped
       and a.attname <> all (coalesce(i_ignore, '{}'))
     order by a.attnum;
$$ language sql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_signature(table)
--
--      The column signature a trigger is generated for: name and type of every live column,
--      in order. A table whose signature changed has a stale trigger. PL/pgSQL with static
--      SQL, so that its plan is cached: the guard trigger (cdc._cap_guard) runs it before
--      every statement, and a SQL function called from a query is planned again each time
--      (about 100 µs).
-- ----------------------------------------------------------------------
create or replace function cdc._cap_signature(i_table regclass)
returns text as $$
begin
    return (select coalesce(string_agg(format('%s %s', quote_ident(a.attname), format_type(a.atttypid, null)),
                                       ', ' order by a.attnum), '')
              from pg_attribute a
             where a.attrelid = i_table and a.attnum > 0 and not a.attisdropped);
end;
$$ language plpgsql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_pkey(table, pkey)
--
--      The key columns: the given ones (each must exist), else the primary key in index
--      order. QC020 for a table without either.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_pkey(i_table regclass, i_pkey text[])
returns text[] as $$
declare
    cols    text[];
    missing text;
begin
    if i_pkey is not null and cardinality(i_pkey) > 0 then
        select string_agg(quote_ident(k), ', ') into missing
          from unnest(i_pkey) k
         where not exists (select 1 from cdc._cap_columns(i_table, null) c where c.attname = k);
        if missing is not null then
            raise exception using errcode = 'QC021',
                message = format('pkey names columns that %s does not have: %s', i_table, missing);
        end if;
        return i_pkey;
    end if;
    select array_agg(a.attname::text order by k.ord) into cols
      from pg_index i
      cross join lateral unnest(i.indkey) with ordinality as k(attnum, ord)
      join pg_attribute a on a.attrelid = i.indrelid and a.attnum = k.attnum
     where i.indrelid = i_table and i.indisprimary;
    if cols is null then
        raise exception using errcode = 'QC020',
            message = format('table %s has no primary key', i_table),
            hint = 'give the key columns with --pkey col1,col2 (cdc attach), or add a primary key';
    end if;
    return cols;
end;
$$ language plpgsql stable;
