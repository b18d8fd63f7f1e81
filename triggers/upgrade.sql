-- Runs first on every install: drops internal functions whose signature changed, so that
-- `create or replace` below does not leave an old overload next to the new one. Only internal
-- (underscore) helpers are listed here; public functions keep their signatures.
drop function if exists cdc._cap_changed(text, oid);
drop function if exists cdc._cap_sql_value(text, text, oid);
drop function if exists cdc._cap_sql_payload(text, regclass, text[], text[]);
drop function if exists cdc._batch_sql(bigint, bigint[]);
