-- The baseline of outbox_emit.sql: the row idem_outbox_emit writes, inserted by hand into a copy
-- of idempotency.outbox (bench_bare.outbox): one clock read (now()), seq from the column DEFAULT
-- (a sequence), the id from gen_random_uuid(), no lock; RETURNING the id as emit returns it.
\set k random(1, 100000)
INSERT INTO bench_bare.outbox (event_id, topic, key, payload, status, attempt, attempt_base,
                               emitted_at, available_at, updated_at)
VALUES (gen_random_uuid(), 'orders', 'k' || :k, '{"order":"o-1842","amount":4200,"currency":"EUR","customer":"c-77"}'::jsonb, 'pending', 0, 0, now(), now(), now())
RETURNING event_id;
