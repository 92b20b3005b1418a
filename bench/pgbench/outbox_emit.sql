-- idem_outbox_emit of an event with a key (one of 100,000: the key lock is taken, and almost
-- never waited for), no dedup_key; each emit its own transaction.
\set k random(1, 100000)
SELECT idempotency.idem_outbox_emit('orders', '{"order":"o-1842","amount":4200,"currency":"EUR","customer":"c-77"}'::jsonb, key => 'k' || :k);
