-- Reading and raising a sequence by name, PgQ's seq_getval and seq_setval.
--
-- Both run with the caller's rights (no SECURITY DEFINER): reading a sequence needs SELECT
-- on it, moving it needs UPDATE, as with currval and setval. They are granted to cdc_admin
-- like PgQ's, and give nobody more than those privileges do. The name is quoted by
-- cdc.quote_fqname, so whatever it holds it names one sequence (or none).
--
-- A NULL argument gives NULL, as in PgQ, but they are not declared STRICT: the planner
-- folds a strict function called with a NULL constant to NULL before the EXECUTE privilege
-- is checked, and these are for cdc_admin only.


-- ----------------------------------------------------------------------
-- Function: cdc.seq_getval(seq_name)
--
--      The sequence's last_value, without moving it (1 for a fresh sequence, called or
--      not). The name is split as cdc.quote_fqname splits it: schema before the first
--      dot, public when there is none.
--
-- Returns:
--      last_value; NULL for a NULL name.
-- ----------------------------------------------------------------------
create or replace function cdc.seq_getval(i_seq_name text)
returns bigint as $$
declare
    res bigint;
begin
    if i_seq_name is null then
        return null;
    end if;
    execute format('select last_value from %s', cdc.quote_fqname(i_seq_name)) into res;
    return res;
end;
$$ language plpgsql set search_path = pg_catalog, pg_temp;


-- ----------------------------------------------------------------------
-- Function: cdc.seq_setval(seq_name, new_value)
--
--      Like setval(), but only forward: the sequence moves to new_value when its
--      last_value is lower, and is left alone otherwise.
--
-- Returns:
--      The sequence's last_value afterwards; NULL when an argument is NULL.
-- ----------------------------------------------------------------------
create or replace function cdc.seq_setval(i_seq_name text, i_new_value bigint)
returns bigint as $$
declare
    cur bigint;
begin
    if i_seq_name is null or i_new_value is null then
        return null;
    end if;
    cur := cdc.seq_getval(i_seq_name);
    if cur < i_new_value then
        perform setval(cdc.quote_fqname(i_seq_name)::regclass, i_new_value);
        return i_new_value;
    end if;
    return cur;
end;
$$ language plpgsql set search_path = pg_catalog, pg_temp;
