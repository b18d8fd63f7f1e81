-- Runtime queries against a real PgQ (schema pgq): the consumer's calls, under the names
-- they have in queries.sql (cdc.pg.engine.PGQ reads this file).

-- name: register_consumer
select pgq.register_consumer(%(queue)s, %(consumer)s);

-- name: next_batch_custom
select * from pgq.next_batch_custom(%(queue)s, %(consumer)s,
                                    %(min_lag)s, %(min_count)s, %(min_interval)s);

-- name: finish_batch
select pgq.finish_batch(%(batch_id)s);

-- name: ticker_queue
select pgq.ticker(%(queue)s);

-- name: force_tick
select pgq.force_tick(%(queue)s);
