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

-- Errors carry SQLSTATEs of class QC, one Python class each in cdc/errors.py; the table in
-- docs/queue.md ("Errors") is generated from it (python -m cdc.errors).
--
-- One function, or one tight group, per file under functions/, named after it. The internal
-- helpers (cdc._*) come first: the public functions call them.

\ir tables.sql
\ir functions/cdc._require.sql
\ir functions/cdc._queue.sql
\ir functions/cdc._consumer_access.sql
\ir functions/cdc._event_table.sql
\ir functions/cdc._batch.sql
\ir functions/cdc._tick.sql
\ir functions/cdc._count_tx_event.sql
\ir functions/cdc._retry_events.sql
\ir functions/cdc.create_queue.sql
\ir functions/cdc.drop_queue.sql
\ir functions/cdc.set_queue_config.sql
\ir functions/cdc.insert_event.sql
\ir functions/cdc.current_event_table.sql
\ir functions/cdc.register_consumer.sql
\ir functions/cdc.unregister_consumer.sql
\ir functions/cdc.set_consumer_owner.sql
\ir functions/cdc.next_batch.sql
\ir functions/cdc.get_batch_events.sql
\ir functions/cdc.finish_batch.sql
\ir functions/cdc.event_retry.sql
\ir functions/cdc.ticker.sql
\ir functions/cdc.maint.sql
\ir functions/cdc.info.sql
\ir functions/cdc.reader_info.sql
\ir functions/cdc.status.sql
