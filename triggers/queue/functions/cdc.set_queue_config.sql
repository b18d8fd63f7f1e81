-- ----------------------------------------------------------------------
-- Function: cdc.set_queue_config(queue_name, param_name, param_value)
--
--      Sets one setting of a queue. Parameter names as in PgQ, with or without the
--      "queue_" prefix: ticker_max_count, ticker_max_lag, ticker_idle_period, ticker_paused,
--      rotation_period, external_ticker, disable_insert, per_tx_limit, and max_retries (the
--      retry limit before an event goes to cdc.dead_letter). NULL as the value of
--      per_tx_limit or max_retries means no limit. Zero is accepted as in PgQ: intervals of
--      zero tick or rotate as soon as allowed, a ticker_max_count of 0 ticks on any new
--      event, a per_tx_limit of 0 refuses every event. Negative values are refused (PgQ
--      stores them; they mean nothing).
--
-- Returns:
--      1
-- Tables: cdc.queue
-- ----------------------------------------------------------------------
create or replace function cdc.set_queue_config(
    x_queue_name text, x_param_name text, x_param_value text)
returns integer as $$
declare
    q      cdc.queue;
    param  text;
    nvalue bigint;
    ivalue interval;
    bvalue boolean;
begin
    perform cdc._require(x_param_name, 'parameter name');
    q := cdc._queue(x_queue_name, true);
    param := regexp_replace(lower(x_param_name), '^queue_', '');
    if param not in ('ticker_max_count', 'per_tx_limit', 'max_retries', 'ticker_max_lag',
                     'ticker_idle_period', 'rotation_period', 'ticker_paused',
                     'external_ticker', 'disable_insert') then
        raise exception using errcode = 'QC006',
            message = format('unknown queue parameter %L', x_param_name),
            hint = 'known parameters: ticker_max_count, ticker_max_lag, ticker_idle_period, '
                   'ticker_paused, rotation_period, external_ticker, disable_insert, '
                   'per_tx_limit, max_retries';
    end if;
    begin
        if param in ('ticker_max_count', 'per_tx_limit', 'max_retries') then
            nvalue := x_param_value::bigint;
            if nvalue is null and param = 'ticker_max_count' then
                raise exception 'NULL is not allowed';
            elsif nvalue < 0 or nvalue > 2147483647 then
                raise exception 'must be a whole number from 0 to 2147483647';
            end if;
        elsif param in ('ticker_max_lag', 'ticker_idle_period', 'rotation_period') then
            ivalue := x_param_value::interval;
            if ivalue is null or ivalue < interval '0' or not isfinite(ivalue) then
                raise exception 'must be a finite interval of zero or more';
            end if;
        else
            bvalue := x_param_value::boolean;
            if bvalue is null then
                raise exception 'must be true or false';
            end if;
        end if;
    exception
        when raise_exception or data_exception then
            raise exception using errcode = 'QC006',
                message = format('invalid value %L for queue parameter %L: %s',
                                 x_param_value, param, sqlerrm);
    end;
    update cdc.queue set
        queue_ticker_max_count   = case when param = 'ticker_max_count' then nvalue::integer else queue_ticker_max_count end,
        queue_per_tx_limit       = case when param = 'per_tx_limit' then nvalue::integer else queue_per_tx_limit end,
        queue_max_retries        = case when param = 'max_retries' then nvalue::integer else queue_max_retries end,
        queue_ticker_max_lag     = case when param = 'ticker_max_lag' then ivalue else queue_ticker_max_lag end,
        queue_ticker_idle_period = case when param = 'ticker_idle_period' then ivalue else queue_ticker_idle_period end,
        queue_rotation_period    = case when param = 'rotation_period' then ivalue else queue_rotation_period end,
        queue_ticker_paused      = case when param = 'ticker_paused' then bvalue else queue_ticker_paused end,
        queue_external_ticker    = case when param = 'external_ticker' then bvalue else queue_external_ticker end,
        queue_disable_insert     = case when param = 'disable_insert' then bvalue else queue_disable_insert end
     where queue_id = q.queue_id;
    return 1;
end;
$$ language plpgsql security definer set search_path = pg_catalog, pg_temp;
