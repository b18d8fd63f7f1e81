-- What the generator reads of a table: its live columns, their signature (a stale trigger is
-- one generated for another signature), its key columns, and its magic columns.


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
-- Function: cdc._cap_unique_key(table)
--
--      The columns of the table's usable unique index, in index order, or NULL: a valid,
--      unique, non-partial index on plain columns (no expression) that are all NOT NULL, so
--      that it identifies each row as a primary key would. Several: the one with the fewest
--      key columns, then the first by name, so that the choice is the same every time.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_unique_key(i_table regclass)
returns text[] as $$
    select array(select a.attname::text
                   from unnest((i.indkey::int2[])[0:i.indnkeyatts - 1]) with ordinality k(attnum, ord)
                   join pg_attribute a on a.attrelid = i.indrelid and a.attnum = k.attnum
                  order by k.ord)
      from pg_index i
      join pg_class ic on ic.oid = i.indexrelid
     where i.indrelid = i_table and i.indisunique and i.indisvalid and i.indisready
       and i.indpred is null and i.indexprs is null
       and not exists (select 1 from unnest((i.indkey::int2[])[0:i.indnkeyatts - 1]) k(attnum)
                        left join pg_attribute a on a.attrelid = i.indrelid and a.attnum = k.attnum
                       where k.attnum = 0 or a.attnotnull is not true)
     order by i.indnkeyatts, ic.relname
     limit 1;
$$ language sql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_key_options(table, options)
--
--      The options a capture of the table is generated and recorded with: as given, except
--      for a table without a primary key whose options name no pkey but that has a usable
--      unique index (cdc._cap_unique_key): then pkey = that index's columns. Recording the key
--      keeps it fixed when the trigger is regenerated later (another unique index added does
--      not change it), and tells the drain which columns it folds by.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_key_options(i_table regclass, i_opts jsonb)
returns jsonb as $$
    select case
        when jsonb_typeof(i_opts -> 'pkey') = 'array' and jsonb_array_length(i_opts -> 'pkey') > 0
             then i_opts
        when exists (select 1 from pg_index where indrelid = i_table and indisprimary)
             then i_opts
        when cdc._cap_unique_key(i_table) is not null
             then i_opts || jsonb_build_object('pkey', to_jsonb(cdc._cap_unique_key(i_table)))
        else i_opts
    end;
$$ language sql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_pkey(table, pkey)
--
--      The key columns: the given ones (each must exist), else the primary key in index
--      order. QC020 for a table without either (cdc.attach has given the columns of a usable
--      unique index as pkey by then, cdc._cap_key_options).
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
            message = format('table %s has no primary key and no usable unique index', i_table),
            hint = 'add a primary key (or a unique index on NOT NULL columns), or give the key columns with --pkey col1,col2 (cdc attach)';
    end if;
    return cols;
end;
$$ language plpgsql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_primary_key(table)
--
--      The table's PRIMARY KEY columns in index order, '{}' without one: what a TRUNCATE
--      event's json "pkey" lists whatever the pkey option says (as in PgQ, whose TRUNCATE
--      triggers take no pkey list).
-- ----------------------------------------------------------------------
create or replace function cdc._cap_primary_key(i_table regclass)
returns text[] as $$
    select coalesce(array_agg(a.attname::text order by k.ord), '{}')
      from pg_index i
     cross join lateral unnest(i.indkey) with ordinality as k(attnum, ord)
      join pg_attribute a on a.attrelid = i.indrelid and a.attnum = k.attnum
     where i.indrelid = i_table and i.indisprimary;
$$ language sql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_magic_columns(table)
--
--      The table's magic columns, as PgQ's triggers know them: a column named _pgq_ev_type,
--      _pgq_ev_data or _pgq_ev_extra1..4 (case-sensitive) gives that field of every row
--      event, NULL included, and is left out of the payload. QC027 for any other column
--      whose name starts with _pgq_ev_ (PgQ refuses those when its trigger fires; here the
--      attach, or the DDL that adds one, is refused).
--
-- Returns:
--      The magic columns' names, in attnum order ('{}' when none).
-- ----------------------------------------------------------------------
create or replace function cdc._cap_magic_columns(i_table regclass)
returns text[] as $$
declare
    magic text[];
    bad   text;
begin
    select coalesce(array_agg(attname order by attnum), '{}') into magic
      from cdc._cap_columns(i_table, null)
     where left(attname, 8) = '_pgq_ev_';
    select string_agg(quote_ident(m), ', ') into bad
      from unnest(magic) m
     where substr(m, 9) not in ('type', 'data', 'extra1', 'extra2', 'extra3', 'extra4');
    if bad is not null then
        raise exception using errcode = 'QC027',
            message = format('table %s has columns named like magic columns that are not: %s', i_table, bad),
            hint = 'a column whose name starts with _pgq_ev_ must be one of _pgq_ev_type, _pgq_ev_data, '
                   '_pgq_ev_extra1 .. _pgq_ev_extra4 (it gives that field of the event); rename the column';
    end if;
    return magic;
end;
$$ language plpgsql stable;
