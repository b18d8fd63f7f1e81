-- Installs the cdc queue engine, or upgrades an install in place: every piece is written to
-- be run again (create ... if not exists, create or replace function). `cdc install` runs
-- this whole file in one transaction; `psql -1 -f install.sql` does the same.
--
-- The consumer loop, in the order a consumer calls the functions:
--   cdc.register_consumer(queue, consumer)      once
--   cdc.next_batch(queue, consumer)             -> batch_id, NULL when no batch yet
--   cdc.open_batch_cursor(batch_id, name)       then FETCH n FROM name until empty
--      (or cdc.get_batch_events(batch_id) for small batches)
--   cdc.event_retry / cdc.batch_retry / cdc.event_dead   for events it cannot process now
--   cdc.finish_batch(batch_id)                  commit; next_batch returns the same batch until then
-- Producers call cdc.insert_event(queue, type, data [, extra1..4]); a ticker calls
-- cdc.ticker() every second, cdc.maint_retry_events() and the cdc.maint_operations().
-- PgQ's low-level and utility functions are here too, with PgQ's signatures:
-- insert_event_raw, event_retry_raw, batch_event_tables, batch_event_sql, find_tick_helper,
-- the external ticker(queue, tick_id, time, event_seq), maint_tables_to_vacuum,
-- seq_getval, seq_setval, quote_fqname, tune_storage, grant_perms, upgrade_schema.

-- Errors carry SQLSTATEs of class QC, one Python class each in cdc/errors.py; the table in
-- docs/queue.md ("Errors") is generated from it (python -m cdc.errors).
--
-- One function, or one tight group, per file under functions/, named after it. The internal
-- helpers (cdc._*) come first: the public functions call them.

\ir tables.sql
\ir functions/cdc.upgrade_schema.sql
select cdc.upgrade_schema();  -- what an older install's tables lack
\ir functions/cdc._require.sql
\ir functions/cdc._queue.sql
\ir functions/cdc._consumer_access.sql
\ir functions/cdc._event_table.sql
\ir functions/cdc._batch.sql
\ir functions/cdc._tick.sql
\ir functions/cdc._count_tx_event.sql
\ir functions/cdc._retry_events.sql
\ir functions/cdc.quote_fqname.sql
\ir functions/cdc.seq_setval.sql
\ir functions/cdc.create_queue.sql
\ir functions/cdc.drop_queue.sql
\ir functions/cdc.set_queue_config.sql
\ir functions/cdc.insert_event.sql
\ir functions/cdc.insert_event_raw.sql
\ir functions/cdc.current_event_table.sql
\ir functions/cdc.register_consumer.sql
\ir functions/cdc.unregister_consumer.sql
\ir functions/cdc.set_consumer_owner.sql
\ir functions/cdc.next_batch.sql
\ir functions/cdc.get_batch_events.sql
\ir functions/cdc.batch_event_sql.sql
\ir functions/cdc.finish_batch.sql
\ir functions/cdc.event_retry.sql
\ir functions/cdc.event_retry_raw.sql
\ir functions/cdc.find_tick_helper.sql
\ir functions/cdc.ticker.sql
\ir functions/cdc.maint.sql
\ir functions/cdc.tune_storage.sql
\ir functions/cdc.grant_perms.sql
\ir functions/cdc.info.sql
\ir functions/cdc.reader_info.sql
\ir functions/cdc.status.sql
