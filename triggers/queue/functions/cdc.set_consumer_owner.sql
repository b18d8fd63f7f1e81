-- ----------------------------------------------------------------------
-- Function: cdc.set_consumer_owner(queue_name, consumer_name, role_name)
--
--      Gives a consumer to another role (an exact role name, as in pg_roles; NULL: cdc_admin
--      members only). For an administrator: after an upgrade, subscriptions made before
--      consumers had owners may be used by cdc_admin members only until they get one; or
--      when the drain moves to another login role.
--
-- Returns:
--      1
-- Tables: cdc.subscription
-- ----------------------------------------------------------------------
create or replace function cdc.set_consumer_owner(
    i_queue_name text, i_consumer_name text, i_role_name text)
returns integer as $$
declare
    s    cdc.subscription;
    role oid;
begin
    s := cdc._subscription(i_queue_name, i_consumer_name, true);
    if i_role_name is not null then
        select oid into role from pg_catalog.pg_roles where rolname = i_role_name;
        if role is null then
            raise exception using errcode = 'QC006',
                message = format('role %L does not exist', i_role_name),
                hint = 'give a role name exactly as pg_roles.rolname spells it';
        end if;
    end if;
    update cdc.subscription set sub_owner = role where sub_id = s.sub_id;
    return 1;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;
