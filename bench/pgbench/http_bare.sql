-- The request of http_exactly_once.sql with the exactly-once record a careful user writes by hand
-- (no extension): the key row inserted ON CONFLICT DO NOTHING into a table of the same definition
-- as idempotency.records (bench_bare.records of bench/pgbench/setup.sql), the handler's INSERT,
-- then the response stored by primary key. The cheapest record that keeps exactly-once: the key
-- parsed and the fingerprint computed by the service (none of it in SQL), no lease check, no
-- fencing, no replay path (every key is new, as in the others).
-- Variables: bench/pgbench/http.vars (bench/instructions.sh and bench/http_sql.sh pass them).
\set k random(1, 9000000000000000000)
BEGIN;
INSERT INTO bench_bare.records (scope, key, status, fingerprint, attempt, lease_expires_at, expires_at) VALUES (:scope, 'k' || :k, 'processing', :fp::bytea, 1, now() + interval '30 seconds', now() + interval '1 day') ON CONFLICT (scope, key) DO NOTHING RETURNING status, attempt;
INSERT INTO payments (customer, amount, currency, provider_ref) VALUES (:cust, 1000, :cur, NULL) RETURNING id, customer, amount, currency, status, created_at;
UPDATE bench_bare.records SET status = 'completed', response_status = 201, response_body = :body::bytea, response_headers = :hdrs::jsonb, resource_id = :rid, lease_expires_at = NULL, updated_at = now() WHERE scope = :scope AND key = 'k' || :k AND attempt = 1;
COMMIT;
