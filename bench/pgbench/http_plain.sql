-- An HTTP request's transaction without idempotency, as the examples' plain handler sends it.
-- Variables: bench/pgbench/http.vars (bench/instructions.sh passes them).
BEGIN;
INSERT INTO payments (customer, amount, currency, provider_ref) VALUES (:cust, 1000, :cur, NULL) RETURNING id, customer, amount, currency, status, created_at;
COMMIT;
