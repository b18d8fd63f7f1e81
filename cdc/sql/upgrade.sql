-- Runs first on every install: drops internal functions whose signature changed, so that
-- `create or replace` below does not leave an old overload next to the new one. Only internal
-- (underscore) helpers are listed here; public functions keep their signatures.
drop function if exists cdc._cap_changed(text, oid);
drop function if exists cdc._cap_sql_value(text, text, oid);
drop function if exists cdc._cap_sql_payload(text, regclass, text[], text[]);
drop function if exists cdc._batch_sql(bigint, bigint[]);
-- Payload builders now one per format (capture/formats/), behind cdc._cap_payload.
drop function if exists cdc._cap_row_payload(text, text, regclass, text[]);
drop function if exists cdc._cap_sql_payload(text, regclass, text[], text[], text, text);
-- Capture generators that now return the function DDL and the trigger DDL apart (out
-- parameters instead of text).
do $$
begin
    drop function if exists cdc._cap_tree_refusal(text, regclass);
    if exists (select 1 from pg_proc where oid = to_regproc('cdc._cap_ddl') and prorettype = 'text'::regtype) then
        drop function cdc._cap_ddl(regclass, text, text, text, text, boolean);
    end if;
    if exists (select 1 from pg_proc where oid = to_regproc('cdc._cap_statement_sql') and prorettype = 'text'::regtype) then
        execute 'drop function cdc._cap_statement_sql(regclass, cdc.queue, jsonb, text[], text[], text, text)';
    end if;
end;
$$;
