-- Removes the cdc queue engine from this database: schema cdc with every queue, event,
-- tick and consumer. The cluster-wide roles are dropped by `cdc uninstall` when no other
-- database still uses them.
drop schema if exists cdc cascade;
