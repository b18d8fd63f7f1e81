-- Capture: the trigger generator and the attach / detach functions.
\ir tables.sql
\ir functions/cdc.capture_values.sql
\ir functions/cdc.capture_generate.sql
\ir functions/cdc.capture_statement.sql
\ir functions/cdc.attach.sql
\ir functions/cdc.capture_ddl.sql
\ir event_triggers.sql
\ir regenerate.sql
