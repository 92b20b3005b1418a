-- The baseline of outbox_emit_dedup.sql: the bare insert with a new dedup_key, ON CONFLICT on
-- the dedup index (a duplicate would need a second SELECT for the kept id; none occurs here).
\set k random(1, 100000)
\set d random(1, 9000000000000000000)
INSERT INTO bench_bare.outbox (event_id, topic, key, dedup_key, payload, status, attempt,
                               attempt_base, emitted_at, available_at, updated_at)
VALUES (gen_random_uuid(), 'orders', 'k' || :k, 'd' || :d, '{"order":"o-1842","amount":4200,"currency":"EUR","customer":"c-77"}'::jsonb, 'pending', 0, 0, now(),
        now(), now())
ON CONFLICT (topic, dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
RETURNING event_id;
