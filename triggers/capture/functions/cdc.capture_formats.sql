-- The capture formats, and the one place that dispatches on the format: each format is a file
-- of capture/formats/ (see formats/json.sql for the two functions a format defines). A new
-- format: its file there, its \ir in capture/install.sql (before this file), and its name in
-- cdc._cap_formats and in the two CASEs below.


-- ----------------------------------------------------------------------
-- Function: cdc._cap_formats()
--
--      The names of the capture formats, in the order the error message lists them.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_formats()
returns text[] as $$
    select array['json', 'urlenc', 'sql'];
$$ language sql immutable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_check_format(format)
--
--      Raises QC006 for a format that is null or not one of cdc._cap_formats().
-- ----------------------------------------------------------------------
create or replace function cdc._cap_check_format(i_format text)
returns void as $$
declare
    names text[] := cdc._cap_formats();
    n     integer := cardinality(names);
begin
    if i_format is null or i_format <> all (names) then
        raise exception using errcode = 'QC006',
            message = format('%s: use %s or %s',
                             case when i_format is null then 'format is null'
                                  else format('unknown format %L', i_format) end,
                             array_to_string(names[1 : n - 1], ', '), names[n]),
            hint = 'leave the format out for json, the format of cdc attach without --format';
    end if;
end;
$$ language plpgsql immutable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_format_options(options)
--
--      The capture options with their format: json when they name none (as `cdc attach`
--      without --format, and a capture rule), so that every part of the generated function
--      (payload and ev_type, row and statement mode) writes the one format. QC006 for options
--      that are not a JSON object, and for a format that is null or unknown.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_format_options(i_opts jsonb)
returns jsonb as $$
begin
    if jsonb_typeof(i_opts) is distinct from 'object' then
        raise exception using errcode = 'QC006', message = 'options must be a JSON object';
    end if;
    if not i_opts ? 'format' then
        return i_opts || jsonb_build_object('format', 'json');
    end if;
    perform cdc._cap_check_format(i_opts ->> 'format');
    return i_opts;
end;
$$ language plpgsql immutable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_payload(format, op, new, old, table, ignore, pkey)
--
--      The format's ev_data expression for op INSERT, UPDATE, DELETE or TRUNCATE, or its
--      old-row expression for op BACKUP (cdc._cap_<format>_payload).
-- ----------------------------------------------------------------------
create or replace function cdc._cap_payload(
    i_format text, i_op text, i_new text, i_old text, i_table regclass, i_ignore text[],
    i_pkey text[])
returns text as $$
begin
    case i_format
        when 'json' then return cdc._cap_json_payload(i_op, i_new, i_old, i_table, i_ignore, i_pkey);
        when 'urlenc' then return cdc._cap_urlenc_payload(i_op, i_new, i_old, i_table, i_ignore, i_pkey);
        when 'sql' then return cdc._cap_sql_payload(i_op, i_new, i_old, i_table, i_ignore, i_pkey);
    end case;
end;
$$ language plpgsql stable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_ev_type(format, op, schema, name, pkey)
--
--      The constant ev_type of a format for an operation (INSERT, UPDATE, DELETE, TRUNCATE)
--      (cdc._cap_<format>_ev_type).
-- ----------------------------------------------------------------------
create or replace function cdc._cap_ev_type(
    i_format text, i_op text, i_schema text, i_name text, i_pkey text[])
returns text as $$
begin
    case i_format
        when 'json' then return cdc._cap_json_ev_type(i_op, i_schema, i_name, i_pkey);
        when 'urlenc' then return cdc._cap_urlenc_ev_type(i_op, i_schema, i_name, i_pkey);
        when 'sql' then return cdc._cap_sql_ev_type(i_op, i_schema, i_name, i_pkey);
    end case;
end;
$$ language plpgsql immutable;
