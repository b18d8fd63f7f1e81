-- ----------------------------------------------------------------------
-- Function: cdc.quote_fqname(name)
--
--      Quotes a schema-qualified name for SQL, as PgQ does: the first dot separates the
--      schema from the rest (so 'a.b.c' is schema a, object "b.c"), a name without a dot is
--      in schema public, and each part goes through quote_ident. The result is safe to put
--      in SQL as an identifier, whatever the input holds.
--
-- Parameters:
--      name - schema.object, or object
--
-- Returns:
--      The quoted name; NULL for NULL.
-- ----------------------------------------------------------------------
create or replace function cdc.quote_fqname(i_name text)
returns text as $$
    select case when strpos(i_name, '.') > 0
                then quote_ident(substr(i_name, 1, strpos(i_name, '.') - 1)) || '.'
                     || quote_ident(substr(i_name, strpos(i_name, '.') + 1))
                else 'public.' || quote_ident(i_name)
           end;
$$ language sql immutable strict parallel safe set search_path = pg_catalog, pg_temp;
