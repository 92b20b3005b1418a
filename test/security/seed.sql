-- Rows for the purge to find (run by a superuser before any hostile path is set): expired records
-- and a stuck one, settled inbox entries past their retention, done outbox events past theirs,
-- and dead outbox events for idempotency.idem_outbox_requeue (topic seed/dead).
SET client_min_messages = warning;
SET search_path = public, pg_catalog;
INSERT INTO idempotency.records (scope, key, status, attempt, created_at, updated_at,
                                 lease_expires_at, expires_at)
SELECT 'seed', 'expired-' || g, 'completed', 1, now() - interval '2 days',
       now() - interval '2 days', NULL::timestamptz, now() - interval '1 day'
FROM generate_series(1, 300) g
UNION ALL
SELECT 'seed', 'stuck-' || g, 'processing', 1, now() - interval '2 days', now() - interval '2 days',
       now() - interval '2 days', now() - interval '1 day'
FROM generate_series(1, 10) g;
SELECT count(idempotency.idem_inbox_receive('seed', 'e-' || g)) FROM generate_series(1, 300) g;
UPDATE idempotency.inbox SET expires_at = now() - interval '1 day' WHERE consumer = 'seed';
SELECT count(idempotency.idem_outbox_emit('seed/done', jsonb_build_object('n', g))) FROM generate_series(1, 300) g;
SELECT count(idempotency.idem_outbox_done(n.event_id, n.attempt)) FROM idempotency.idem_outbox_next('seed/done', 300) n;
UPDATE idempotency.outbox SET expires_at = now() - interval '1 day' WHERE topic = 'seed/done';
SELECT count(idempotency.idem_outbox_emit('seed/dead', jsonb_build_object('n', g))) FROM generate_series(1, 60) g;
SELECT count(idempotency.idem_outbox_fail(n.event_id, n.attempt, false, 'seeded')) FROM idempotency.idem_outbox_next('seed/dead', 60) n;
