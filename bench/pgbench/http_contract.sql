-- The request's transaction as the 2.0.0 client packages send it (single-transaction mode, a new
-- key): idem_http_begin (scope, key, fingerprint and claim), the handler's INSERT, idem_http_end
-- with the answer's headers and body (stored by idem_complete). Compare http_manual.sql (the
-- same record by hand) and http_plain.sql (none).
-- Variables: bench/pgbench/http.vars (bench/instructions.sh passes them).
\set k random(1, 9000000000000000000)
BEGIN;
SELECT scope, key, attempt, run, reclaimed, status, headers, body FROM idempotency.idem_http_begin(:cust::text, 'POST /v1/payments'::text, ('"k' || :k || '"')::text, :fp::bytea, NULL::interval, NULL::interval, false);
INSERT INTO payments (customer, amount, currency, provider_ref) VALUES (:cust, 1000, :cur, NULL) RETURNING id, customer, amount, currency, status, created_at;
SELECT idempotency.idem_http_end(:cust || '/POST /v1/payments', 'k' || :k, 1, 201, :hdrs::jsonb, :body::bytea, NULL::text, '{Content-Type,Location}'::text[]) AS stored;
COMMIT;
