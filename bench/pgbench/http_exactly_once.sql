-- The same request in the single-transaction mode as clients/go sends it: the claim with its
-- select list, the handler's INSERT, idem_complete with the body and headers.
-- Variables: bench/pgbench/http.vars (bench/instructions.sh passes them).
\set k random(1, 9000000000000000000)
BEGIN;
SELECT idempotency.idem_key_from_header('"k' || :k || '"'), c.outcome, coalesce(c.attempt, 0), c.resource_id, c.response::text, c.response_status, c.lease_expires_at, c.expires_at, c.response_body, c.response_headers::text FROM idempotency.idem_claim(:scope, idempotency.idem_key_from_header('"k' || :k || '"'), idempotency.idem_fingerprint(:fp::bytea)) c;
INSERT INTO payments (customer, amount, currency, provider_ref) VALUES (:cust, 1000, :cur, NULL) RETURNING id, customer, amount, currency, status, created_at;
SELECT idempotency.idem_complete(:scope, 'k' || :k, 1, response_status => 201, response_body => :body::bytea, response_headers => :hdrs::jsonb, resource_id => :rid);
COMMIT;
