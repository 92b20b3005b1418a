-- The bare baseline of idempotency.idem_inbox_receive: the textbook dedup insert, one clock read
-- (the DEFAULT now() of processed_at).
\set k random(1, 9000000000000000000)
INSERT INTO bench_bare.processed_event (event_id, consumer_group) VALUES ('e' || :k, 'billing')
ON CONFLICT DO NOTHING;
