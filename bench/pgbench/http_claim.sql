-- http_exactly_once.sql without idem_complete: what the claim statement costs.
-- Variables: bench/pgbench/http.vars (bench/instructions.sh passes them).
\set k random(1, 9000000000000000000)
BEGIN;
SELECT idempotency.idem_key_from_header('"k' || :k || '"'), c.outcome, coalesce(c.attempt, 0), c.resource_id, c.response::text, c.response_status, c.lease_expires_at, c.expires_at, c.response_body, c.response_headers::text FROM idempotency.idem_claim(:scope, idempotency.idem_key_from_header('"k' || :k || '"'), idempotency.idem_fingerprint(:fp::bytea)) c;
INSERT INTO payments (customer, amount, currency, provider_ref) VALUES (:cust, 1000, :cur, NULL) RETURNING id, customer, amount, currency, status, created_at;
COMMIT;
