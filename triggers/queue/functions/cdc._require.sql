-- Internal helpers of the queue engine. Not granted to anyone: the public functions, which
-- run as the owner (SECURITY DEFINER), call them.
--
-- Checks of arguments: a required argument is not NULL (QC006), a queue or consumer name
-- fits in an identifier and has no control characters (QC005).


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
