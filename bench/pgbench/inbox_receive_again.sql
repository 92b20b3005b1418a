-- A redelivery: idem_inbox_receive, inline, of one of 50 event ids, so that after the first calls
-- of a run every delivery is a duplicate (bench/instructions.sh: what a duplicate costs).
\set k random(1, 50)
SELECT idempotency.idem_inbox_receive('billing', 'a' || :k);
