-- Internal helpers of the queue engine. Not granted to anyone: the public functions, which
-- run as the owner (SECURITY DEFINER), call them.
--
-- Who may act for a consumer: the role a consumer is registered to, the membership test,
-- and the checks that raise QC014 (see docs/queue.md, "Who may act for a consumer").


-- ----------------------------------------------------------------------
-- Function: cdc._session_role()
--
--      The role a consumer registered now belongs to: the session's role, that is the role
--      chosen with SET ROLE, or the login role (session_user) when none was. Not current_user:
--      inside these SECURITY DEFINER functions that is always the cdc owner. Both come from
--      the session, which cannot name a role it may not become: SET ROLE checks membership
--      of session_user, and only a superuser can change session_user.
-- ----------------------------------------------------------------------
create or replace function cdc._session_role()
returns oid as $$
    select coalesce(
        (select r.oid from pg_catalog.pg_roles r
          where current_setting('role') <> 'none' and r.rolname = current_setting('role')),
        (select r.oid from pg_catalog.pg_roles r where r.rolname = session_user));
$$ language sql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._may_act_for(owner)
--
--      Whether this session may act for a consumer registered by role owner: its login role
--      (session_user, which SET ROLE does not change and only a superuser can) is a member of
--      owner, of cdc_admin, or of the role that owns schema cdc; superusers are members of
--      every role. Membership rather than "is the same role" because a member may SET ROLE
--      to owner anyway (or, holding only ADMIN OPTION, grant it to itself). A NULL owner (a
--      subscription older than owners) or a dropped role: cdc_admin members only.
-- ----------------------------------------------------------------------
create or replace function cdc._may_act_for(i_owner oid)
returns boolean as $$
    select case when i_owner is not null
                     and exists (select 1 from pg_catalog.pg_roles r where r.oid = i_owner)
                     and pg_catalog.pg_has_role(session_user, i_owner, 'MEMBER')
                then true
                when exists (select 1 from pg_catalog.pg_roles r where r.rolname = 'cdc_admin')
                     and pg_catalog.pg_has_role(session_user, 'cdc_admin', 'MEMBER')
                then true
                else pg_catalog.pg_has_role(
                         session_user,
                         (select n.nspowner from pg_catalog.pg_namespace n where n.nspname = 'cdc'),
                         'MEMBER')
           end;
$$ language sql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._check_consumer_access(subscription)
--
--      Raises QC014 unless this session may act for the subscription's consumer (see
--      cdc._may_act_for). Every function that acts for a consumer calls it: registering it
--      again or moving it, taking, reading, retrying and finishing its batches,
--      unregistering it. Batch ids are a sequence, so a batch id proves nothing.
-- ----------------------------------------------------------------------
create or replace function cdc._check_consumer_access(s cdc.subscription)
returns void as $$
declare
    qname text;
    cname text;
    owner text;
begin
    if cdc._may_act_for(s.sub_owner) then
        return;
    end if;
    select queue_name into qname from cdc.queue where queue_id = s.sub_queue;
    select co_name into cname from cdc.consumer where co_id = s.sub_consumer;
    select quote_ident(rolname) into owner from pg_catalog.pg_roles where oid = s.sub_owner;
    raise exception using errcode = 'QC014',
        message = format('role %s may not act for consumer %L on queue %L: %s',
                         quote_ident(session_user), cname, qname,
                         case when s.sub_owner is null
                              then 'it was registered before consumers had owners, so only cdc_admin members may'
                              when owner is null
                              then 'the role that registered it no longer exists, so only cdc_admin members may'
                              else format('it belongs to role %s, so only its members and cdc_admin members may', owner)
                         end),
        hint = format('connect as a member of the consumer''s role, or have a cdc_admin member run '
                      'select cdc.set_consumer_owner(%L, %L, <role>)', qname, cname);
end;
$$ language plpgsql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._batch_subscription(batch_id)
--
--      The subscription that has batch_id open, after checking that this session may act for
--      its consumer: QC003 if no consumer has it open, QC014 if it is another role's.
--
-- Tables: cdc.subscription
-- ----------------------------------------------------------------------
create or replace function cdc._batch_subscription(i_batch_id bigint)
returns cdc.subscription as $$
declare
    s cdc.subscription;
begin
    perform cdc._require(i_batch_id, 'batch id');
    select * into s from cdc.subscription where sub_batch = i_batch_id;
    if not found then
        raise exception using errcode = 'QC003',
            message = format('batch %s is not open: it was finished already, or never existed', i_batch_id),
            hint = 'take a new batch with cdc.next_batch()';
    end if;
    perform cdc._check_consumer_access(s);
    return s;
end;
$$ language plpgsql stable;
