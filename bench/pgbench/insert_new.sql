-- The bare baseline of a new-key claim: the row idem_claim inserts, by INSERT ... ON CONFLICT
-- DO NOTHING, as a careful user writes it: one clock read (now(), the transaction's timestamp;
-- created_at and updated_at are the table's DEFAULT now()), no other function call.
\set k random(1, 9000000000000000000)
INSERT INTO bench_bare.records (scope, key, status, fingerprint, attempt, lease_expires_at, expires_at)
VALUES ('bench', 'n' || :k, 'processing', '\x5d41402abc4b2a76b9719d911017c592b0e4fa3e5b6f3b8d1a4a1d2c3b4a5968'::bytea, 1,
        now() + interval '60 s', now() + interval '1 day')
ON CONFLICT (scope, key) DO NOTHING;
