-- For information: the row an inline idem_inbox_receive writes, by hand into a copy of
-- idempotency.inbox (one clock read: now()).
\set k random(1, 9000000000000000000)
INSERT INTO bench_bare.inbox (consumer, event_id, status, attempt, received_at, updated_at, expires_at)
VALUES ('billing', 'e' || :k, 'done', 1, now(), now(), now() + interval '7 days')
ON CONFLICT DO NOTHING;
