-- concat() and concat_ws() over any number of argument expressions: the payload of a table
-- of any width is one expression.


-- ----------------------------------------------------------------------
-- Function: cdc._cap_concat(args)
--
--      concat() over argument expressions, nested so that no call takes more than 100
--      arguments (PostgreSQL's limit): a table of any width gets a payload expression.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_concat(i_args text[])
returns text as $$
declare
    chunk constant integer := 100;
    n     integer := coalesce(cardinality(i_args), 0);
begin
    if n = 0 then
        return null;
    end if;
    if n <= chunk then
        return format('concat(%s)', array_to_string(i_args, ', '));
    end if;
    return cdc._cap_concat(array(
        select format('concat(%s)', array_to_string(i_args[g : least(g + chunk - 1, n)], ', '))
          from generate_series(1, n, chunk) g order by g));
end;
$$ language plpgsql immutable;


-- ----------------------------------------------------------------------
-- Function: cdc._cap_concat_ws(separator, args)
--
--      concat_ws(separator, ...) over argument expressions, nested like cdc._cap_concat. An
--      inner group whose arguments are all NULL gives NULL (not ''), so that it adds no
--      separator: the result is the same as one flat call.
-- ----------------------------------------------------------------------
create or replace function cdc._cap_concat_ws(i_separator text, i_args text[])
returns text as $$
declare
    chunk constant integer := 99;
    n     integer := coalesce(cardinality(i_args), 0);
begin
    if n <= chunk then
        return format('concat_ws(%L, %s)', i_separator, array_to_string(i_args, ', '));
    end if;
    return cdc._cap_concat_ws(i_separator, array(
        select format('nullif(concat_ws(%L, %s), %L)', i_separator,
                      array_to_string(i_args[g : least(g + chunk - 1, n)], ', '), '')
          from generate_series(1, n, chunk) g order by g));
end;
$$ language plpgsql immutable;
