-- How one column's value is written in each payload format: each function returns the SQL
-- expression text (over a row variable such as NEW or OLD) that the generated trigger uses,
-- so the per-type decisions are taken once, when the trigger is generated.
-- The format-specific ones are in formats/ (one file per capture format).


-- ----------------------------------------------------------------------
-- Function: cdc._cap_settings()
--
--      The SET clauses of every generated capture function: the settings that change how
--      values are written as text are pinned to PostgreSQL's defaults (the output PgQ gives
--      under default settings), so that the payload never depends on the writer's session
--      (a driver that sets extra_float_digits = 0 would otherwise send 0.3 for
--      0.30000000000000004). TimeZone is pinned to UTC: timestamptz values carry their
--      offset, "+00", so any zone would be lossless, but a fixed one makes the payload the
--      same whatever the session. Covers values nested in arrays, composites and ranges too,
--      which per-type formatting could not. PostgreSQL applies them on function entry and
--      restores the session's values on exit (see docs/benchmarks.md for the cost).
-- ----------------------------------------------------------------------
create or replace function cdc._cap_settings()
returns text as $$
    select ' set datestyle = ''ISO, MDY'' set intervalstyle = ''postgres'''
           ' set extra_float_digits = 1 set bytea_output = ''hex'' set timezone = ''UTC''';
$$ language sql immutable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_field(var, column)
--
--      A row variable's field, always double-quoted: NEW."by" works where NEW.by does not.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_field(i_var text, i_col text)
returns text as $$
    select i_var || '."' || replace(i_col, '"', '""') || '"';
$$ language sql immutable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_is_null(var, column, type)
--
--      Expression that is true when a column's value is NULL. For a composite type (or a
--      domain over one) "x is null" is also true for a value whose fields are all NULL, such
--      as '(,)'; "x is not distinct from null" tests the value itself.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_is_null(i_var text, i_col text, i_type oid)
returns text as $$
declare
    base oid := coalesce(nullif((select typbasetype from pg_type where oid = i_type), 0), i_type);
begin
    if (select typtype from pg_type where oid = base) = 'c' then
        return format('%s is not distinct from null', cdc._cap_field(i_var, i_col));
    end if;
    return format('%s is null', cdc._cap_field(i_var, i_col));
end;
$$ language plpgsql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_text_expr(var, column, type)
--
--      Expression for a value's text output (its type's output function), NULL for NULL.
--      A plain ::text cast is used where it gives the same text; types with their own cast
--      to text that differs from the output (bool 'true' vs 't', inet's /32, char(n)'s
--      padding) go through format('%s'), which calls the output function.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_text_expr(i_var text, i_col text, i_type oid)
returns text as $$
declare
    base oid := coalesce(nullif((select typbasetype from pg_type where oid = i_type), 0), i_type);
begin
    if base = 'text'::regtype or base = 'varchar'::regtype then
        return cdc._cap_field(i_var, i_col) || '::text';
    end if;
    if exists (select 1 from pg_cast
                where castsource = base and casttarget = 'text'::regtype and castmethod = 'f') then
        -- parenthesised: PL/pgSQL's IF reads its condition up to the first THEN
        return format('(case when not (%s) then format(''%%s'', %s) end)',
                      cdc._cap_is_null(i_var, i_col, i_type), cdc._cap_field(i_var, i_col));
    end if;
    return cdc._cap_field(i_var, i_col) || '::text';
end;
$$ language plpgsql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_changed(column, type)
--
--      Expression that is true when a column's value differs between OLD and NEW, decided as
--      PgQ decides it: with the type's default equality (and the column's collation) where the
--      type has one and is not an array; by comparing the text outputs otherwise (arrays,
--      json, ...). NULL to NULL is unchanged, NULL to a value changed.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_changed(
    i_col text, i_type oid, i_new text default 'NEW', i_old text default 'OLD')
returns text as $$
declare
    base oid := coalesce(nullif((select typbasetype from pg_type where oid = i_type), 0), i_type);
begin
    if (select typcategory <> 'A' from pg_type where oid = base)
       and exists (select 1 from pg_opclass c join pg_am m on m.oid = c.opcmethod
                    where c.opcintype = base and c.opcdefault and m.amname = 'btree') then
        return format('%s is distinct from %s', cdc._cap_field(i_new, i_col), cdc._cap_field(i_old, i_col));
    end if;
    return format('%s is distinct from %s', cdc._cap_text_expr(i_new, i_col, i_type),
                  cdc._cap_text_expr(i_old, i_col, i_type));
end;
$$ language plpgsql stable;


-- Upgrade: capture functions generated before their settings were pinned get the SET clauses
-- of cdc._cap_settings() now, without waiting for the next `cdc attach` or column change.
-- Functions that have them already are left alone, so a reinstall changes nothing.
do $$
declare
    f regprocedure;
begin
    for f in
        select p.oid::regprocedure
          from pg_catalog.pg_proc p
         where p.pronamespace = 'cdc'::regnamespace and p.proname ~ '^_cap_[0-9]+_[0-9]+$'
           and p.prorettype = 'pg_catalog.trigger'::pg_catalog.regtype
           and not coalesce(p.proconfig @> array['extra_float_digits=1', 'TimeZone=UTC'], false)
    loop
        execute format('alter function %s%s', f, cdc._cap_settings());
    end loop;
end;
$$;
