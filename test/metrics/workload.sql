-- The metrics stage's workload (test/stages/metrics.sh): known numbers for every series of
-- monitoring/postgres_exporter.yml, written down in test/metrics/expected.txt. Run as a
-- superuser in a fresh database of a cluster with idempotency preloaded, nothing else running
-- (the counters are the server's).
\set ON_ERROR_STOP on
SET client_min_messages = warning;
SELECT idempotency.idem_stats_reset() IS NOT NULL AS reset;

-- Records, scope pay: 5 completed, 3 replays, 2 mismatches, 4 in_progress answers to one live
-- claim, 1 stuck (lease ended), 1 taken over (reclaimed), 1 failed for good, 2 past their TTL.
DO $$
DECLARE
    c record;
BEGIN
    FOR i IN 1..5 LOOP
        SELECT * INTO c FROM idempotency.idem_claim('pay', 'k' || i, idempotency.idem_fingerprint('{"amount": 1}'));
        PERFORM idempotency.idem_complete('pay', 'k' || i, c.attempt, 'p' || i, '{"ok": true}', 201);
    END LOOP;
    FOR i IN 1..3 LOOP
        PERFORM idempotency.idem_claim('pay', 'k' || i, idempotency.idem_fingerprint('{"amount": 1.0}'));  -- replayed
    END LOOP;
    FOR i IN 4..5 LOOP
        PERFORM idempotency.idem_claim('pay', 'k' || i, idempotency.idem_fingerprint('{"amount": 2}'));    -- mismatch
    END LOOP;
    PERFORM idempotency.idem_claim('pay', 'busy', NULL, lease => '1 hour');
    FOR i IN 1..4 LOOP
        PERFORM idempotency.idem_claim('pay', 'busy', NULL, wait => false);                   -- in_progress
    END LOOP;
    SELECT * INTO c FROM idempotency.idem_claim('pay', 'declined', NULL);
    PERFORM idempotency.idem_fail('pay', 'declined', c.attempt, retryable => false);
    FOR i IN 1..2 LOOP
        SELECT * INTO c FROM idempotency.idem_claim('pay', 'old' || i, NULL, lease => '10 ms', ttl => '10 ms');
        PERFORM idempotency.idem_complete('pay', 'old' || i, c.attempt);
    END LOOP;
    PERFORM idempotency.idem_claim('pay', 'crashed', NULL, lease => '10 ms');
    PERFORM idempotency.idem_claim('pay', 'taken', NULL, lease => '10 ms');
    -- scope refund: one completed record
    SELECT * INTO c FROM idempotency.idem_claim('refund', 'r1', NULL);
    PERFORM idempotency.idem_complete('refund', 'r1', c.attempt);
END $$;
SELECT pg_sleep(0.1);
SELECT outcome FROM idempotency.idem_claim('pay', 'taken', NULL, lease => '1 hour');          -- reclaimed

-- Refused: the first owner of the taken-over key completes (IK002), a finished key is failed
-- (IK003).
DO $$
BEGIN
    BEGIN
        PERFORM idempotency.idem_complete('pay', 'taken', 1);
        RAISE 'idem_complete of a taken-over key succeeded';
    EXCEPTION WHEN SQLSTATE 'IK002' THEN NULL;
    END;
    BEGIN
        PERFORM idempotency.idem_fail('pay', 'k1', 1);
        RAISE 'idem_fail of a completed key succeeded';
    EXCEPTION WHEN SQLSTATE 'IK003' THEN NULL;
    END;
END $$;

-- Inbox, consumer billing: 3 handled inline (done), 3 duplicate deliveries, 3 queued and leased:
-- one failed for good, one queued again (retryable failure), one still leased; an entity's
-- sequence 2 then its late sequence 1 (stale); 1 done past its TTL.
SELECT idempotency.idem_inbox_receive('billing', 'e' || i) FROM generate_series(1, 3) i;
SELECT idempotency.idem_inbox_receive('billing', e) FROM unnest(ARRAY['e1', 'e2', 'e1']) e;  -- duplicate
SELECT idempotency.idem_inbox_receive('billing', 'q' || i, enqueue => true) FROM generate_series(1, 3) i;
CREATE TEMP TABLE inbox_leased AS
SELECT event_id, attempt FROM idempotency.idem_inbox_next('billing', 3, lease => '1 hour');
SELECT idempotency.idem_inbox_fail('billing', event_id, attempt, retryable => event_id = 'q2')
FROM inbox_leased WHERE event_id IN ('q1', 'q2') ORDER BY event_id;
SELECT idempotency.idem_inbox_receive('billing', 's' || n, entity_key => 'acct-1', entity_seq => n)
FROM unnest(ARRAY[2, 1]) n;                                                      -- new, stale
SELECT idempotency.idem_inbox_receive('billing', 'old', ttl => '10 ms');

-- Outbox, topic order.paid: 6 emitted (1 deliver_after an hour) plus 1 deduplicated; 4 leased:
-- 1 done, 2 dead, 1 still leased.
SELECT idempotency.idem_outbox_emit('order.paid', pg_catalog.jsonb_build_object('n', i), key => 'o' || i,
                        dedup_key => 'o' || i) IS NOT NULL
FROM generate_series(1, 5) i;
SELECT idempotency.idem_outbox_emit('order.paid', '{"n": 1}', key => 'o1', dedup_key => 'o1') IS NOT NULL;
SELECT idempotency.idem_outbox_emit('order.paid', '{"n": 6}', key => 'o6', deliver_after => '1 hour') IS NOT NULL;
CREATE TEMP TABLE outbox_leased AS
SELECT event_id, attempt, key FROM idempotency.idem_outbox_next('order.paid', 4, lease => '1 hour');
SELECT idempotency.idem_outbox_done(event_id, attempt) FROM outbox_leased WHERE key = 'o1';
SELECT idempotency.idem_outbox_fail(event_id, attempt, retryable => false, error => 'rejected')
FROM outbox_leased WHERE key IN ('o2', 'o3') ORDER BY key;
SELECT pg_sleep(0.1);
