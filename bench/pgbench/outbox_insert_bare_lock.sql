-- For the price of the key lock: the bare insert of outbox_insert_bare.sql, with the per-key
-- transaction lock a user would take first (pg_advisory_xact_lock on (topic, key) as two int4
-- hashes, as bench/plpgsql_outbox.sql does), in the same single statement (the CTE is scanned
-- before the row, and with it its seq, is made).
\set k random(1, 100000)
WITH l AS MATERIALIZED (SELECT pg_advisory_xact_lock(hashtext('orders'), hashtext('k' || :k)))
INSERT INTO bench_bare.outbox (event_id, topic, key, payload, status, attempt, attempt_base,
                               emitted_at, available_at, updated_at)
SELECT gen_random_uuid(), 'orders', 'k' || :k, '{"order":"o-1842","amount":4200,"currency":"EUR","customer":"c-77"}'::jsonb, 'pending', 0, 0, now(), now(), now()
  FROM l
RETURNING event_id;
