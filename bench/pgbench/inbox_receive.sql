-- idem_inbox_receive of a new event, inline mode (the row is written as done).
\set k random(1, 9000000000000000000)
SELECT idempotency.idem_inbox_receive('billing', 'e' || :k);
