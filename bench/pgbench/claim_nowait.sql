-- idempotency.idem_claim(wait => false) of a new key: the direct path, as claim_new.sql (with
-- idempotency.direct_access = off, bench/instructions.sh claim_nowait_sql, the INSERT runs in a
-- subtransaction with lock_timeout); also MEMORY_SCRIPT=claim_nowait bench/load.sh.
\set k random(1, 9000000000000000000)
SELECT outcome FROM idempotency.idem_claim('bench', 'w' || :k, '\x5d41402abc4b2a76b9719d911017c592b0e4fa3e5b6f3b8d1a4a1d2c3b4a5968'::bytea, wait => false);
