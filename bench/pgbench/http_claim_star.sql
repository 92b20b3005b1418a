-- http_claim.sql with the select list key, c.* (no casts, the key parsed once more).
-- Variables: bench/pgbench/http.vars (bench/instructions.sh passes them).
\set k random(1, 9000000000000000000)
BEGIN;
SELECT idempotency.idem_key_from_header('"k' || :k || '"') AS key, c.* FROM idempotency.idem_claim(:scope, idempotency.idem_key_from_header('"k' || :k || '"'), idempotency.idem_fingerprint(:fp::bytea)) c;
INSERT INTO payments (customer, amount, currency, provider_ref) VALUES (:cust, 1000, :cur, NULL) RETURNING id, customer, amount, currency, status, created_at;
COMMIT;
