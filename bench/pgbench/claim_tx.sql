-- The single-transaction mode's claim alone: BEGIN, idem_claim of a new key, COMMIT (the
-- baseline claim_complete.sql is measured against).
\set k random(1, 9000000000000000000)
BEGIN;
SELECT outcome, attempt FROM idempotency.idem_claim('bench', 'c' || :k, '\x5d41402abc4b2a76b9719d911017c592b0e4fa3e5b6f3b8d1a4a1d2c3b4a5968'::bytea);
COMMIT;
