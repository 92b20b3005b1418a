-- The single-transaction mode: BEGIN, idem_claim of a new key, idem_complete with a body and
-- headers as the client packages store them, COMMIT.
\set k random(1, 9000000000000000000)
BEGIN;
SELECT outcome, attempt FROM idempotency.idem_claim('bench', 'c' || :k, '\x5d41402abc4b2a76b9719d911017c592b0e4fa3e5b6f3b8d1a4a1d2c3b4a5968'::bytea);
SELECT idempotency.idem_complete('bench', 'c' || :k, 1, '0193c6db-aaaa-7000-8000-000000000000', NULL, 201, '\x7b226964223a2230313933633664622d616161612d373030302d383030302d303030303030303030303030222c22616d6f756e74223a313030307d'::bytea, '{"Content-Type": "application/json", "Location": "/v1/payments/0193c6db-aaaa-7000-8000-000000000000"}'::jsonb);
COMMIT;
