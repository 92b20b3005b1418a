-- For information: the statements of bench/plpgsql_queue.sql sent bare, without the PL/pgSQL
-- functions (the client would check done's row count; a refused done is not measured).
\set k random(1, 9000000000000000000)
INSERT INTO bench_q.inbox (consumer, event_id, event_type, payload)
VALUES ('billing', 'q' || :k, 'order.paid', '\x7b226f72646572223a226f2d31383432222c22616d6f756e74223a343230302c2263757272656e6379223a22455552222c22637573746f6d6572223a22632d3737227d'::bytea) ON CONFLICT DO NOTHING;
WITH picked AS (
    SELECT i.event_id FROM bench_q.inbox i
     WHERE i.consumer = 'billing' AND i.status IN ('received', 'processing')
       AND (i.status = 'received' OR i.lease_expires_at <= now())
     ORDER BY i.received_at LIMIT 1 FOR UPDATE SKIP LOCKED)
UPDATE bench_q.inbox i SET status = 'processing', attempt = i.attempt + 1,
       lease_expires_at = now() + interval '60 s'
  FROM picked WHERE i.consumer = 'billing' AND i.event_id = picked.event_id
RETURNING i.event_id, i.event_type, i.payload, i.attempt \gset
UPDATE bench_q.inbox i SET status = 'done', lease_expires_at = NULL
 WHERE i.consumer = 'billing' AND i.event_id = :event_id AND i.attempt = :attempt
   AND i.status = 'processing';
