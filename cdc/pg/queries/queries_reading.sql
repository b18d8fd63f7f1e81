-- Queries of the sessions that read source tables' rows (cdc.pg.reading). Every name is
-- qualified: these sessions run with search_path = pg_catalog, pg_temp.

-- name: row_security
-- A table's kind, whether its row-level security applies to the session's role (as
-- PostgreSQL decides it: not to a superuser or a BYPASSRLS role, not to its owner unless
-- forced), whether it is forced, the session's role is its owner, and its policies' names;
-- no row when there is no such table.
select c.relkind::text,
       pg_catalog.row_security_active(c.oid),
       c.relforcerowsecurity,
       pg_catalog.pg_has_role(c.relowner, 'usage'),
       array(select p.polname::text from pg_catalog.pg_policy p
              where p.polrelid = c.oid order by 1)
  from pg_catalog.pg_class c
  join pg_catalog.pg_namespace n on n.oid = c.relnamespace
 where n.nspname = %(schema)s and c.relname = %(table)s;

-- name: row_security_of_role
-- For a role about to read tables: per table (schema, name) that has row-level security
-- enabled, its quoted name, whether it is forced, whether the role is a superuser or has
-- BYPASSRLS, whether the role is its owner (or a member of its owner), and its policies.
with t as (select * from unnest(%(schemas)s::text[], %(tables)s::text[]) as t(s, n))
select pg_catalog.format('%%I.%%I', n.nspname, c.relname),
       c.relforcerowsecurity,
       r.rolsuper or r.rolbypassrls,
       pg_catalog.pg_has_role(r.oid, c.relowner, 'usage'),
       array(select p.polname::text from pg_catalog.pg_policy p
              where p.polrelid = c.oid order by 1)
  from t
  join pg_catalog.pg_namespace n on n.nspname = t.s
  join pg_catalog.pg_class c on c.relnamespace = n.oid and c.relname = t.n
  cross join pg_catalog.pg_roles r
 where r.rolname = %(role)s and c.relrowsecurity
 order by 1;

-- name: text_by_output
-- The columns of a table whose type (or a domain's base type, an array's element type, at
-- any depth) has a cast to text or text[] made by a function created in this database,
-- not built into PostgreSQL: a user's code, which the readers never call. They read such a
-- column's text with its type's output function (format('%s')), as the capture triggers do.
with recursive types(attname, typid) as (
    select a.attname::text, a.atttypid
      from pg_catalog.pg_attribute a
      join pg_catalog.pg_class c on c.oid = a.attrelid
      join pg_catalog.pg_namespace n on n.oid = c.relnamespace
     where n.nspname = %(schema)s and c.relname = %(table)s
       and a.attnum > 0 and not a.attisdropped
    union
    select types.attname, x.typid
      from types
      join pg_catalog.pg_type t on t.oid = types.typid
      cross join lateral (values (t.typbasetype), (t.typelem)) as x(typid)
     where x.typid <> 0
)
select distinct types.attname
  from types
  join pg_catalog.pg_cast k on k.castsource = types.typid
  join pg_catalog.pg_type st on st.oid = k.castsource
 where k.castmethod = 'f'
   and st.typtype <> 'd'  -- a cast from a domain is never applied (its base type's is)
   and k.castfunc >= 16384  -- FirstNormalObjectId: below it, built into PostgreSQL
   and k.casttarget in ('pg_catalog.text'::pg_catalog.regtype,
                        'pg_catalog._text'::pg_catalog.regtype);
