-- Objects for bench/load.sh (run once in a fresh database).
CREATE EXTENSION idempotency;
\ir ../plpgsql_claim.sql

-- The bare baseline: a table of the same definition as idempotency.records (same columns, row
-- width, primary key, NOT NULLs, fillfactor), with the DEFAULT now() a careful user gives its
-- time stamps, and without the two CHECK constraints: idem_claim's direct write skips them (its
-- row satisfies them by construction), while PostgreSQL re-reads every CHECK expression on each
-- execution of a prepared INSERT (about 50,000 instructions here), so a baseline that keeps them
-- would flatter the claim.
CREATE SCHEMA bench_bare;
CREATE TABLE bench_bare.records (LIKE idempotency.records INCLUDING ALL) WITH (fillfactor = 90);
ALTER TABLE bench_bare.records ALTER created_at SET DEFAULT now(),
                               ALTER updated_at SET DEFAULT now(),
                               DROP CONSTRAINT records_status_check,
                               DROP CONSTRAINT records_attempt_check;

-- Completed keys r1..r100000 for the replay comparison, in idempotency.records and as the same
-- rows in bench_bare.replay for the bare primary-key SELECT.
INSERT INTO idempotency.records (scope, key, status, fingerprint, attempt, resource_id, response,
                                 response_status, created_at, updated_at, lease_expires_at,
                                 expires_at)
SELECT 'bench', 'r' || i, 'completed', '\x5d41402abc4b2a76b9719d911017c592b0e4fa3e5b6f3b8d1a4a1d2c3b4a5968'::bytea, 1,
       'pay_' || md5(i::text), jsonb_build_object('payment_id', 'pay_' || md5(i::text),
                                                  'amount', 1000, 'currency', 'EUR'),
       201, now(), now(), NULL, now() + interval '10 days'
FROM generate_series(1, 100000) i;
CREATE TABLE bench_bare.replay (LIKE idempotency.records INCLUDING ALL) WITH (fillfactor = 90);
INSERT INTO bench_bare.replay SELECT * FROM idempotency.records WHERE key LIKE 'r%';
VACUUM ANALYZE;
