-- Installs everything cdc runs inside PostgreSQL, or upgrades it in place: the queue engine,
-- then capture, then roles and privileges (last, so that they cover every function).
\ir upgrade.sql
\ir queue/install.sql
\ir capture/install.sql
\ir queue/roles.sql
\ir queue/grants.sql
