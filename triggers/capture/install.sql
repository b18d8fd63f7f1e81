-- Capture: the trigger generator and the attach / detach functions. One group of functions
-- per file, named after what it holds; one file per capture format under formats/ (a new
-- format: its file, its line here, its name in functions/cdc.capture_formats.sql). The
-- order matters where an SQL-language function calls another: the callee comes first.
\ir tables.sql
\ir functions/cdc.capture_values.sql
\ir functions/cdc.capture_columns.sql
\ir functions/cdc.capture_concat.sql
\ir formats/json.sql
\ir formats/urlenc.sql
\ir formats/sql.sql
\ir functions/cdc.capture_formats.sql
\ir functions/cdc.capture_admit.sql
\ir functions/cdc.capture_event.sql
\ir functions/cdc.capture_triggers.sql
\ir functions/cdc.capture_generate.sql
\ir functions/cdc.capture_statement.sql
\ir functions/cdc.attach.sql
\ir functions/cdc.capture_ddl.sql
\ir functions/cdc.capture_rules.sql
\ir event_triggers.sql
\ir regenerate.sql
