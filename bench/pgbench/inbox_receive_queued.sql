-- idem_inbox_receive of a new event, queued mode (the row is written as received, for
-- idem_inbox_next; it also enters the partial index inbox_queue).
\set k random(1, 9000000000000000000)
SELECT idempotency.idem_inbox_receive('billing', 'e' || :k, enqueue => true);
