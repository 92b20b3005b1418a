-- The request's transaction with the exactly-once record written by hand, as the example
-- services send it with IDEMPOTENCY=manual (examples/schema.sql's manual_keys; a new key): the
-- key row, the handler's INSERT, the answer stored by primary key. The key is parsed and the
-- fingerprint (SHA-256 of the raw body) computed by the service: a constant here.
-- Variables: bench/pgbench/http.vars (bench/instructions.sh passes them).
\set k random(1, 9000000000000000000)
BEGIN;
INSERT INTO manual_keys (scope, key, fingerprint) VALUES (:cust || '/POST /v1/payments', 'k' || :k, '\x5d41402abc4b2a76b9719d911017c5925d41402abc4b2a76b9719d911017c592'::bytea) ON CONFLICT DO NOTHING RETURNING true;
INSERT INTO payments (customer, amount, currency, provider_ref) VALUES (:cust, 1000, :cur, NULL) RETURNING id, customer, amount, currency, status, created_at;
UPDATE manual_keys SET status = 201, headers = :hdrs::jsonb, body = :body::bytea WHERE scope = :cust || '/POST /v1/payments' AND key = 'k' || :k;
COMMIT;
