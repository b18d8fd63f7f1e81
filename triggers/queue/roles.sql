-- Roles: cdc_reader consumes, cdc_writer produces, cdc_admin does both and administers
-- queues. Roles belong to the whole cluster: they are created only when missing, and only
-- when the installing role may create roles (on managed PostgreSQL, the database owner
-- usually may). Otherwise a notice says what an administrator should run, and the install
-- goes on: grants to missing roles are skipped (see grants.sql).
--
-- A second database's install by another owner finds the roles made by the first one. It
-- grants them EXECUTE on this database's functions all the same (it owns them), but from
-- PostgreSQL 16 it may not make other roles members of them (that takes the ADMIN OPTION,
-- which their creator holds): a notice says so, and `cdc grant ROLE --as ...` then grants a
-- role the same functions directly. Nothing here fails the install.
do $$
declare
    r  text;
    can_create boolean;
begin
    select rolsuper or rolcreaterole into can_create from pg_roles where rolname = current_user;
    foreach r in array array['cdc_reader', 'cdc_writer', 'cdc_admin'] loop
        if not exists (select 1 from pg_roles where rolname = r) then
            if can_create then
                execute format('create role %I nologin', r);
            else
                raise notice 'role % does not exist and % may not create roles; ask an administrator to run: create role % nologin',
                    r, current_user, r;
            end if;
        end if;
    end loop;
    foreach r in array array['cdc_reader', 'cdc_writer'] loop
        if exists (select 1 from pg_roles where rolname = r)
           and exists (select 1 from pg_roles where rolname = 'cdc_admin')
           and not pg_has_role('cdc_admin', r, 'member')
        then
            begin
                execute format('grant %I to cdc_admin', r);
            exception when insufficient_privilege then
                raise notice 'could not make cdc_admin a member of %; ask an administrator to run: grant % to cdc_admin', r, r;
            end;
        end if;
    end loop;
    foreach r in array array['cdc_reader', 'cdc_writer', 'cdc_admin'] loop
        if exists (select 1 from pg_roles where rolname = r)
           and not exists (select 1 from pg_roles where rolname = current_user and rolsuper)
           and not pg_has_role(r, 'MEMBER WITH ADMIN OPTION')
           and not (current_setting('server_version_num')::int < 160000
                    and exists (select 1 from pg_roles where rolname = current_user and rolcreaterole))
        then
            raise notice 'role % belongs to the whole cluster and % may not grant it: `cdc grant ROLE --as ...` grants its functions in this database directly (or have its creator run: grant % to % with admin option)',
                r, current_user, r, quote_ident(current_user);
        end if;
    end loop;
end;
$$;
