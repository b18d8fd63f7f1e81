-- Internal helpers of the queue engine. Not granted to anyone: the public functions, which run
-- as the owner (SECURITY DEFINER), call them.
--
-- Errors raised by the engine carry SQLSTATEs of class QC (see triggers/queue/errors.md):
--   QC001 queue not found        QC006 invalid argument       QC011 ticker not allowed
--   QC002 consumer not found     QC007 per-tx limit exceeded  QC012 wrong isolation level
--   QC003 batch not found        QC008 insert disabled        QC013 position unavailable
--   QC004 tick not found         QC009 queue in use           QC014 not the consumer's role
--   QC005 invalid name           QC010 event not in batch


-- ----------------------------------------------------------------------
-- Function: cdc._check_name(kind, name)
--
--      Checks a queue or consumer name before it is stored: not NULL, 1 to 63 bytes (the
--      length of a PostgreSQL identifier), no control characters. Quotes, spaces and
--      non-ASCII letters are fine: names are data, never pasted into SQL.
--
-- Returns:
--      The name.
-- ----------------------------------------------------------------------
create or replace function cdc._check_name(i_kind text, i_name text)
returns text as $$
begin
    perform cdc._require(i_name, i_kind || ' name');
    if octet_length(i_name) = 0 or octet_length(i_name) > 63 then
        raise exception using errcode = 'QC005',
            message = format('%s name %L is %s bytes long; it must be 1 to 63 bytes',
                             i_kind, i_name, octet_length(i_name)),
            hint = 'choose a shorter name';
    end if;
    if i_name ~ '[[:cntrl:]]' then
        raise exception using errcode = 'QC005',
            message = format('%s name %L contains a control character', i_kind, i_name),
            hint = 'use printable characters only';
    end if;
    return i_name;
end;
$$ language plpgsql immutable;


-- ----------------------------------------------------------------------
-- Function: cdc._require(value, what)
--
--      Raises QC006 when a required argument is NULL.
-- ----------------------------------------------------------------------
create or replace function cdc._require(i_value anyelement, i_what text)
returns void as $$
begin
    if i_value is null then
        raise exception using errcode = 'QC006',
            message = format('%s must not be NULL', i_what);
    end if;
end;
$$ language plpgsql immutable;


-- ----------------------------------------------------------------------
-- Function: cdc._queue(queue_name, lock)
--
--      Looks a queue up by name, optionally locking its row. Every operation that changes the
--      queue's structure or ticks it (ticker, rotation, consumer registration, config) locks
--      the row, so they run one at a time; producers and batch readers never lock it.
--
-- Tables: cdc.queue
-- ----------------------------------------------------------------------
create or replace function cdc._queue(i_queue_name text, i_lock boolean default false)
returns cdc.queue as $$
declare
    q cdc.queue;
begin
    perform cdc._require(i_queue_name, 'queue name');
    if i_lock then
        select * into q from cdc.queue where queue_name = i_queue_name for update;
    else
        select * into q from cdc.queue where queue_name = i_queue_name;
    end if;
    if not found then
        raise exception using errcode = 'QC001',
            message = format('queue %L does not exist', i_queue_name),
            hint = 'create it with cdc.create_queue(), or check the name with cdc.get_queue_info()';
    end if;
    return q;
end;
$$ language plpgsql;


-- ----------------------------------------------------------------------
-- Function: cdc._subscription(queue_name, consumer_name, lock)
--
--      The subscription of a consumer on a queue, or QC001 / QC002.
--
-- Tables: cdc.subscription, cdc.consumer, cdc.queue
-- ----------------------------------------------------------------------
create or replace function cdc._subscription(
    i_queue_name text, i_consumer_name text, i_lock boolean default false)
returns cdc.subscription as $$
declare
    q cdc.queue;
    s cdc.subscription;
begin
    q := cdc._queue(i_queue_name);
    perform cdc._require(i_consumer_name, 'consumer name');
    if i_lock then
        select s1.* into s from cdc.subscription s1 join cdc.consumer c on c.co_id = s1.sub_consumer
         where s1.sub_queue = q.queue_id and c.co_name = i_consumer_name
           for update of s1;
    else
        select s1.* into s from cdc.subscription s1 join cdc.consumer c on c.co_id = s1.sub_consumer
         where s1.sub_queue = q.queue_id and c.co_name = i_consumer_name;
    end if;
    if not found then
        raise exception using errcode = 'QC002',
            message = format('consumer %L is not registered on queue %L', i_consumer_name, i_queue_name),
            hint = 'register it with cdc.register_consumer()';
    end if;
    return s;
end;
$$ language plpgsql;


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


-- ----------------------------------------------------------------------
-- Function: cdc._event_table(queue_id, n)
--
--      Name of the n-th event table of a queue (a partition of cdc.event), unqualified.
-- ----------------------------------------------------------------------
create or replace function cdc._event_table(i_queue_id integer, i_n integer)
returns text as $$
    select 'event_' || i_queue_id || '_' || i_n;
$$ language sql immutable;


-- ----------------------------------------------------------------------
-- Function: cdc._batch(batch_id)
--
--      Everything known about an open batch: its subscription, queue, and both ticks.
--      QC003 if no consumer has this batch open.
--
-- Tables: cdc.subscription, cdc.queue, cdc.consumer, cdc.tick
-- ----------------------------------------------------------------------
create or replace function cdc._batch(
    in  i_batch_id       bigint,
    out sub_id           integer,
    out queue_id         integer,
    out queue_name       text,
    out queue_ntables    integer,
    out consumer_name    text,
    out prev_tick_id     bigint,
    out prev_tick_time   timestamptz,
    out prev_event_seq   bigint,
    out prev_snapshot    txid_snapshot,
    out cur_tick_id      bigint,
    out cur_tick_time    timestamptz,
    out cur_event_seq    bigint,
    out cur_snapshot     txid_snapshot)
as $$
begin
    perform cdc._require(i_batch_id, 'batch id');
    select s.sub_id, q.queue_id, q.queue_name, q.queue_ntables, c.co_name,
           t1.tick_id, t1.tick_time, t1.tick_event_seq, t1.tick_snapshot,
           t2.tick_id, t2.tick_time, t2.tick_event_seq, t2.tick_snapshot
      into sub_id, queue_id, queue_name, queue_ntables, consumer_name,
           prev_tick_id, prev_tick_time, prev_event_seq, prev_snapshot,
           cur_tick_id, cur_tick_time, cur_event_seq, cur_snapshot
      from cdc.subscription s
      join cdc.queue q on q.queue_id = s.sub_queue
      join cdc.consumer c on c.co_id = s.sub_consumer
      join cdc.tick t1 on t1.tick_queue = s.sub_queue and t1.tick_id = s.sub_last_tick
      join cdc.tick t2 on t2.tick_queue = s.sub_queue and t2.tick_id = s.sub_next_tick
     where s.sub_batch = i_batch_id;
    if not found then
        raise exception using errcode = 'QC003',
            message = format('batch %s is not open: it was finished already, or never existed', i_batch_id),
            hint = 'take a new batch with cdc.next_batch()';
    end if;
end;
$$ language plpgsql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._batch_sql(batch_id, ev_ids)
--
--      The query that returns a batch's events, ordered by ev_id. An event belongs to the
--      batch when its transaction is visible in the batch's end snapshot and was not visible
--      in its start snapshot: its txid is in the start snapshot's xip list (it was running
--      then) or at or above the start snapshot's xmax. Both tests use the ev_txid index.
--      Only the consumer's own retried events are included (ev_owner).
--
--      All of the queue's event tables are read, not only the current one: a producer whose
--      snapshot predates a rotation (REPEATABLE READ) may still insert into an older table,
--      and each table costs one index probe when it holds nothing for the batch.
--
--      Every value in the text is generated here, never taken from a caller (the optional
--      arguments are numbers). ev_ids, when given, restricts the result to those events (used
--      by event_retry); ev_id_from / ev_id_to to ev_id_from <= ev_id < ev_id_to (a slice,
--      for parallel readers).
--
-- Returns:
--      SQL text of a SELECT with PgQ's get_batch_events columns.
-- ----------------------------------------------------------------------
create or replace function cdc._batch_sql(
    i_batch_id bigint, i_ev_ids bigint[] default null,
    i_ev_id_from bigint default null, i_ev_id_to bigint default null)
returns text as $$
declare
    b       record;
    xip     bigint[];
    txcond  text;
begin
    select * into b from cdc._batch(i_batch_id);
    xip := array(select txid_snapshot_xip(b.prev_snapshot));
    txcond := format('ev_txid >= %s', txid_snapshot_xmax(b.prev_snapshot));
    if cardinality(xip) > 0 then
        txcond := format('(ev_txid = any (%L::bigint[]) or %s)', xip, txcond);
    end if;
    return format(
        'select ev_id, ev_time, ev_txid, ev_retry, ev_type, ev_data,'
        ' ev_extra1, ev_extra2, ev_extra3, ev_extra4'
        ' from cdc.event'
        ' where ev_part >= %s and ev_part < %s'
        ' and %s and ev_txid < %s'
        ' and txid_visible_in_snapshot(ev_txid, %L::txid_snapshot)'
        ' and (ev_owner is null or ev_owner = %s)%s'
        ' order by ev_id',
        b.queue_id * 1000, b.queue_id * 1000 + b.queue_ntables,
        txcond, txid_snapshot_xmax(b.cur_snapshot), b.cur_snapshot, b.sub_id,
        case when i_ev_ids is null then ''
             else format(' and ev_id = any (%L::bigint[])', i_ev_ids) end
        || case when i_ev_id_from is null then '' else format(' and ev_id >= %s', i_ev_id_from) end
        || case when i_ev_id_to is null then '' else format(' and ev_id < %s', i_ev_id_to) end);
end;
$$ language plpgsql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._require_read_committed()
--
--      Ticks must see every transaction committed before them; a REPEATABLE READ or
--      SERIALIZABLE snapshot taken earlier would break the order of ticks.
-- ----------------------------------------------------------------------
create or replace function cdc._require_read_committed()
returns void as $$
begin
    if current_setting('transaction_isolation') <> 'read committed' then
        raise exception using errcode = 'QC012',
            message = format('ticks must be made in a READ COMMITTED transaction, not %s',
                             upper(current_setting('transaction_isolation'))),
            hint = 'call the ticker in its own transaction at the default isolation level';
    end if;
end;
$$ language plpgsql;


-- ----------------------------------------------------------------------
-- Function: cdc._event_seq(queue)
--
--      The queue's event sequence position: the last ev_id handed out, 0 before any.
-- ----------------------------------------------------------------------
create or replace function cdc._event_seq(q cdc.queue)
returns bigint as $$
    select coalesce(pg_sequence_last_value(q.queue_event_seq::regclass), 0);
$$ language sql;


-- ----------------------------------------------------------------------
-- Function: cdc._tick_due(queue)
--
--      Whether the ticker should tick this queue now: forced; or new events reached
--      ticker_max_count; or there are new events and ticker_max_lag has passed since the last
--      tick; or there are none and ticker_idle_period has passed.
-- ----------------------------------------------------------------------
create or replace function cdc._tick_due(q cdc.queue)
returns boolean as $$
declare
    last_time  timestamptz;
    last_seq   bigint;
    new_events bigint;
begin
    if q.queue_force_tick then
        return true;
    end if;
    select tick_time, tick_event_seq into last_time, last_seq
      from cdc.tick where tick_queue = q.queue_id
     order by tick_id desc limit 1;
    if not found then
        return true;
    end if;
    new_events := cdc._event_seq(q) - last_seq;
    if new_events > 0 then
        return new_events >= q.queue_ticker_max_count
            or now() - last_time >= q.queue_ticker_max_lag;
    end if;
    return now() - last_time >= q.queue_ticker_idle_period;
end;
$$ language plpgsql;


-- ----------------------------------------------------------------------
-- Function: cdc._insert_tick(queue)
--
--      Inserts a tick (the current snapshot and event sequence position), clears a forced
--      tick, and notifies channel 'cdc_tick' with payload {"queue": name, "tick_id": id}. The
--      caller holds the queue row lock, which makes ticks one at a time.
--
-- Returns:
--      The new tick id.
-- ----------------------------------------------------------------------
create or replace function cdc._insert_tick(q cdc.queue)
returns bigint as $$
declare
    new_tick bigint;
begin
    insert into cdc.tick (tick_queue, tick_id, tick_event_seq)
    values (q.queue_id, nextval(q.queue_tick_seq::regclass), cdc._event_seq(q))
    returning tick_id into new_tick;
    if q.queue_force_tick then
        update cdc.queue set queue_force_tick = false where queue_id = q.queue_id;
    end if;
    perform pg_notify('cdc_tick', json_build_object('queue', q.queue_name, 'tick_id', new_tick)::text);
    return new_tick;
end;
$$ language plpgsql;


-- ----------------------------------------------------------------------
-- Function: cdc._count_tx_event(queue_id, limit)
--
--      Counts one more event of this queue in the current transaction and raises QC007 past
--      the queue's per-transaction limit. The count lives in a transaction-local setting, so
--      it resets at commit or rollback and at the rollback of a savepoint.
-- ----------------------------------------------------------------------
create or replace function cdc._count_tx_event(i_queue_id integer, i_limit integer)
returns void as $$
declare
    key text := 'cdc.tx_events_' || i_queue_id;
    n   integer;
begin
    n := coalesce(nullif(current_setting(key, true), ''), '0')::integer + 1;
    if n > i_limit then
        raise exception using errcode = 'QC007',
            message = format('transaction exceeds the limit of %s events for queue id %s', i_limit, i_queue_id),
            hint = 'split the change into smaller transactions, or raise the queue''s per_tx_limit';
    end if;
    perform set_config(key, n::text, true);
end;
$$ language plpgsql;


-- ----------------------------------------------------------------------
-- Function: cdc._event_not_in_batch(batch_id, ev_id)
--
--      Raises QC010.
-- ----------------------------------------------------------------------
create or replace function cdc._event_not_in_batch(i_batch_id bigint, i_ev_id bigint)
returns void as $$
begin
    raise exception using errcode = 'QC010',
        message = format('event %s is not in batch %s', i_ev_id, i_batch_id),
        hint = 'use an ev_id that the batch returned';
end;
$$ language plpgsql;


-- ----------------------------------------------------------------------
-- Function: cdc._retry_events(batch_id, ev_ids, retry_after, reason)
--
--      Moves events of an open batch (all of them when ev_ids is NULL) into the retry queue
--      of the batch's consumer. Events that already used up the queue's max_retries go to
--      cdc.dead_letter instead, with the reason.
--
-- Returns:
--      Number of events moved.
-- Tables: cdc.retry_queue, cdc.dead_letter
-- ----------------------------------------------------------------------
create or replace function cdc._retry_events(
    i_batch_id bigint, i_ev_ids bigint[], i_retry_after timestamptz, i_reason text)
returns integer as $$
declare
    b       record;
    q       cdc.queue;
    ev      record;
    moved   integer := 0;
begin
    select * into b from cdc._batch(i_batch_id);
    select * into q from cdc.queue where queue_id = b.queue_id;
    for ev in execute cdc._batch_sql(i_batch_id, i_ev_ids) loop
        if q.queue_max_retries is not null and coalesce(ev.ev_retry, 0) >= q.queue_max_retries then
            insert into cdc.dead_letter (dl_queue, dl_consumer, dl_reason, ev_id, ev_time, ev_txid,
                                         ev_retry, ev_type, ev_data, ev_extra1, ev_extra2,
                                         ev_extra3, ev_extra4)
            values (b.queue_id, b.consumer_name,
                    coalesce(i_reason || ': ', '') || format('retry limit of %s reached', q.queue_max_retries),
                    ev.ev_id, ev.ev_time, ev.ev_txid, ev.ev_retry, ev.ev_type, ev.ev_data,
                    ev.ev_extra1, ev.ev_extra2, ev.ev_extra3, ev.ev_extra4);
        else
            insert into cdc.retry_queue (ev_retry_after, ev_queue, ev_id, ev_time, ev_txid, ev_owner,
                                         ev_retry, ev_type, ev_data, ev_extra1, ev_extra2,
                                         ev_extra3, ev_extra4)
            values (i_retry_after, b.queue_id, ev.ev_id, ev.ev_time, ev.ev_txid, b.sub_id,
                    coalesce(ev.ev_retry, 0) + 1, ev.ev_type, ev.ev_data,
                    ev.ev_extra1, ev.ev_extra2, ev.ev_extra3, ev.ev_extra4)
            on conflict (ev_owner, ev_id) do update set ev_retry_after = excluded.ev_retry_after;
        end if;
        moved := moved + 1;
    end loop;
    return moved;
end;
$$ language plpgsql;
