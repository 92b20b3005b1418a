-- For information (NOTES=1 bench/load.sh): an older bare baseline of idem_claim,
-- which reads the clock four times per row (clock_timestamp()); a careful user would not
-- (insert_new.sql is the baseline of record).
\set k random(1, 9000000000000000000)
INSERT INTO bench_bare.records AS r (scope, key, status, fingerprint, attempt, created_at,
                                     updated_at, lease_expires_at, expires_at)
VALUES ('bench', 'n' || :k, 'processing', '\x5d41402abc4b2a76b9719d911017c592b0e4fa3e5b6f3b8d1a4a1d2c3b4a5968'::bytea, 1, clock_timestamp(), clock_timestamp(),
        clock_timestamp() + interval '60 s', clock_timestamp() + interval '1 day')
ON CONFLICT (scope, key) DO NOTHING;
