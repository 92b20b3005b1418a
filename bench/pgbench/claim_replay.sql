-- idem_claim of a completed key (outcome replayed, the stored result returned). Five columns, as
-- the bare baseline (select_replay.sql) selects: idem_claim decides on the status and compares
-- the fingerprint itself, and returns outcome and attempt in their place.
\set k random(1, 100000)
SELECT outcome, attempt, resource_id, response, response_status FROM idempotency.idem_claim('bench', 'r' || :k, '\x5d41402abc4b2a76b9719d911017c592b0e4fa3e5b6f3b8d1a4a1d2c3b4a5968'::bytea);
