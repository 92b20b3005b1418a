-- idem_outbox_emit with a key and a new dedup_key (the ON CONFLICT path, no duplicate).
\set k random(1, 100000)
\set d random(1, 9000000000000000000)
SELECT idempotency.idem_outbox_emit('orders', '{"order":"o-1842","amount":4200,"currency":"EUR","customer":"c-77"}'::jsonb, key => 'k' || :k, dedup_key => 'd' || :d);
