-- idem_uuid_v7, idem_uuid_v7_time, idem_hmac_sha256, idem_secure_equal: exact outputs against
-- the RFC vectors, errors.
\pset null '<NULL>'
SET client_min_messages = warning;
\i test/regress/helpers.sql

-- UUIDv7: version 7, variant 10, strictly increasing over 10,000 calls in one statement
SELECT count(*) AS n,
       bool_and(substr(u::text, 15, 1) = '7') AS version_7,
       bool_and(substr(u::text, 20, 1) IN ('8', '9', 'a', 'b')) AS variant_10,
       bool_and(prev IS NULL OR u > prev) AS strictly_increasing,
       count(DISTINCT u) AS distinct_values,
       bool_and(idempotency.idem_uuid_v7_time(u) BETWEEN now() - interval '1 minute' AND clock_timestamp() + interval '10 seconds') AS time_now
FROM (SELECT u, lag(u) OVER (ORDER BY i) AS prev
      FROM (SELECT i, idempotency.idem_uuid_v7() AS u FROM generate_series(1, 10000) i) g) s;
-- RFC 9562 Appendix A.6
SELECT idempotency.idem_uuid_v7_time('017f22e2-79b0-7cc3-98c4-dc0c0c07398f') AT TIME ZONE 'UTC' AS a6_time;
SELECT try($$SELECT idempotency.idem_uuid_v7_time('f81d4fae-7dec-11d0-a765-00a0c91e6bf6')$$) AS v1_uuid;
SELECT try($$SELECT idempotency.idem_uuid_v7_time('017f22e2-79b0-7cc3-c8c4-dc0c0c07398f')$$) AS wrong_variant;

-- HMAC-SHA256: RFC 4231 test case 2 (and case 1)
SELECT idempotency.idem_hmac_sha256('Jefe'::bytea, 'what do ya want for nothing?'::bytea);
SELECT idempotency.idem_hmac_sha256('\x0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b'::bytea, 'Hi There'::bytea);
SELECT idempotency.idem_hmac_sha256(NULL, 'x'::bytea) AS null_key;
-- constant-time comparison
SELECT idempotency.idem_secure_equal('\x0102'::bytea, '\x0102'::bytea) AS same,
       idempotency.idem_secure_equal('\x0102'::bytea, '\x0103'::bytea) AS differs,
       idempotency.idem_secure_equal('\x0102'::bytea, '\x010200'::bytea) AS longer,
       idempotency.idem_secure_equal(''::bytea, ''::bytea) AS empty,
       idempotency.idem_secure_equal(idempotency.idem_hmac_sha256('k', 'm'), idempotency.idem_hmac_sha256('k', 'm')) AS hmac_equal;

-- function properties
SELECT p.oid::regprocedure AS function, p.provolatile, p.proisstrict, p.proparallel
FROM pg_proc p WHERE p.proname IN ('idem_uuid_v7', 'idem_uuid_v7_time', 'idem_hmac_sha256',
    'idem_secure_equal')
ORDER BY p.oid::regprocedure::text COLLATE "C";

DROP FUNCTION try(text, boolean);
