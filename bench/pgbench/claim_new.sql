-- idem_claim of a new key (default lease and TTL, a 32-byte fingerprint).
\set k random(1, 9000000000000000000)
SELECT outcome FROM idempotency.idem_claim('bench', 'n' || :k, '\x5d41402abc4b2a76b9719d911017c592b0e4fa3e5b6f3b8d1a4a1d2c3b4a5968'::bytea);
