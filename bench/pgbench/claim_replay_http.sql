-- claim_replay.sql as the client packages send it: idem_claim joined with
-- idem_http_answer, whose whole-row argument turns the claim's custom scan into a function scan.
\set k random(1, 100000)
SELECT c.outcome, c.attempt, a.status, a.headers, a.body FROM idempotency.idem_claim('bench', 'r' || :k, '\x5d41402abc4b2a76b9719d911017c592b0e4fa3e5b6f3b8d1a4a1d2c3b4a5968'::bytea) c, idempotency.idem_http_answer(c) a;
