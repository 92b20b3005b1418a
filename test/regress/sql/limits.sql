-- The bounds of what callers store (docs/settings.md, "Bounds"; src/limits.cpp): at each bound a
-- call works, one past it fails with 54000 naming the setting and writes nothing. Response
-- headers: RFC 9110 field values, unique names, no framing or hop-by-hop fields (22023). The
-- distinct outbox keys of one transaction: 54000 past the bound, before the server's lock table
-- is hurt, and a new connection still works.
\pset null '<NULL>'
SET client_min_messages = warning;
\i test/regress/helpers.sql
CREATE VIEW limits_written AS
    SELECT (SELECT count(*) FROM idempotency.records WHERE scope = 'limits' AND status <> 'processing') AS finished,
           (SELECT count(*) FROM idempotency.outbox WHERE topic = 'limits') AS outbox,
           (SELECT count(*) FROM idempotency.inbox WHERE consumer = 'limits') AS inbox;

-- The settings: superuser settings with their defaults ------------------------------------------
SELECT name, setting, context FROM pg_settings
WHERE name ~ '^idempotency\.max_(response|outbox_payload|inbox_payload|error|outbox_keys)' ORDER BY name;
CREATE ROLE limits_caller;
GRANT USAGE ON SCHEMA idempotency TO limits_caller;
SET ROLE limits_caller;
SELECT try($$SET idempotency.max_response_bytes = '1GB'$$);
SELECT try($$SET idempotency.max_outbox_keys_per_transaction = 1000000$$);
RESET ROLE;
SELECT try($$SET idempotency.max_response_bytes = -1$$);
SELECT try($$SET idempotency.max_response_bytes = '1 parsec'$$);
SET idempotency.max_response_bytes = '1536kB';
SHOW idempotency.max_response_bytes;
SET idempotency.max_response_bytes = 1000;
SHOW idempotency.max_response_bytes;

-- Responses: resource_id, response, response_body ---------------------------------------------
SET idempotency.max_response_bytes = 100;
SELECT outcome FROM idempotency.idem_claim('limits', 'body-100');
SELECT idempotency.idem_complete('limits', 'body-100', 1, repeat('r', 100), NULL, 201,
                     ('\x' || repeat('ab', 100))::bytea) AS at_the_bound;
SELECT outcome FROM idempotency.idem_claim('limits', 'body-101');
SELECT try($$SELECT idempotency.idem_complete('limits', 'body-101', 1, 'r', NULL, 201, ('\x' || repeat('ab', 101))::bytea)$$, true);
SELECT try($$SELECT idempotency.idem_fail('limits', 'body-101', 1, false, NULL, 500, ('\x' || repeat('ab', 101))::bytea)$$);
SELECT try($$SELECT idempotency.idem_complete('limits', 'body-101', 1, repeat('r', 101))$$);
-- response (jsonb) counts its binary size: 108 bytes for this document
SELECT try($$SELECT idempotency.idem_complete('limits', 'body-101', 1, 'r', jsonb_build_object('s', repeat('x', 90)))$$);
SELECT status, resource_id, response, response_body FROM idempotency.records WHERE scope = 'limits' AND key = 'body-101';
SET idempotency.max_response_bytes = 108;
SELECT idempotency.idem_complete('limits', 'body-101', 1, 'r', jsonb_build_object('s', repeat('x', 90))) AS jsonb_at_the_bound;
RESET idempotency.max_response_bytes;
-- the default (16MB): a 200 MB body is refused before anything is written
SELECT outcome FROM idempotency.idem_claim('limits', 'body-200mb');
SELECT try($$SELECT idempotency.idem_complete('limits', 'body-200mb', 1, NULL, NULL, 200, convert_to(repeat('b', 200 * 1024 * 1024), 'UTF8'))$$);
SELECT status, response_body IS NULL AS no_body FROM idempotency.records WHERE scope = 'limits' AND key = 'body-200mb';

-- Response headers: count and total size -----------------------------------------------------
SELECT outcome FROM idempotency.idem_claim('limits', 'headers');
SET idempotency.max_response_headers = 3;
SET idempotency.max_response_header_bytes = 30;
-- 4 headers, or 31 bytes of names and values: one past each bound
SELECT try($$SELECT idempotency.idem_complete('limits', 'headers', 1, response_headers => '{"A": "1", "B": "2", "C": "3", "D": "4"}')$$, true);
SELECT try($$SELECT idempotency.idem_complete('limits', 'headers', 1, response_headers => '{"Location": "/v1/payments/42000", "ETag": "x"}')$$, true);
SELECT status FROM idempotency.records WHERE scope = 'limits' AND key = 'headers';
-- 3 headers, 30 bytes: at both bounds
SELECT idempotency.idem_complete('limits', 'headers', 1,
                     response_headers => '{"Location": "/v1/payments/420", "ETag": "x", "X": ""}') AS at_both_bounds;
RESET idempotency.max_response_headers;
RESET idempotency.max_response_header_bytes;
-- the defaults: 20,000 headers, or 9 of 8 KB
SELECT outcome FROM idempotency.idem_claim('limits', 'many-headers');
SELECT try(format($$SELECT idempotency.idem_complete('limits', 'many-headers', 1, response_headers => %L)$$,
                  (SELECT jsonb_object_agg('X-' || i, 'v') FROM generate_series(1, 20000) i)));
SELECT try(format($$SELECT idempotency.idem_complete('limits', 'many-headers', 1, response_headers => %L)$$,
                  (SELECT jsonb_object_agg('X-' || i, repeat('v', 8192)) FROM generate_series(1, 9) i)));
SELECT status FROM idempotency.records WHERE scope = 'limits' AND key = 'many-headers';

-- Response headers: RFC 9110 field values and names (22023), nothing written -------------------
SELECT outcome FROM idempotency.idem_claim('limits', 'syntax');
SELECT h, try(format($$SELECT idempotency.idem_complete('limits', 'syntax', 1, response_headers => %L)$$, h)) AS answer
FROM (VALUES ('{"X": "a\u0001b"}'), ('{"X": "a\u007fb"}'), ('{"X": "a\u0085b"}'), ('{"X": "a\u2028b"}'),
             ('{"X": "a\u2029b"}'), ('{"X": "a\u009fb"}'), ('{"X": " a"}'), ('{"X": "a\t"}'),
             ('{"Location": "/a", "location": "/b"}'),
             ('{"Content-Length": "5"}'), ('{"Transfer-Encoding": "chunked"}'), ('{"connection": "close"}'),
             ('{"Keep-Alive": "timeout=5"}'), ('{"Proxy-Connection": "close"}'), ('{"TE": "trailers"}'),
             ('{"Trailer": "Expires"}'), ('{"Upgrade": "h2c"}')) v(h);
SELECT status, response_headers FROM idempotency.records WHERE scope = 'limits' AND key = 'syntax';
-- UTF-8 text is obs-text (kept as bytes), HTAB and SP inside a value are fine
SELECT idempotency.idem_complete('limits', 'syntax', 1, response_headers => '{"X-Name": "caf\u00e9\tnoir \u00a0 \u20ac", "X-Empty": ""}') AS accepted;
SELECT response_headers FROM idempotency.idem_lookup('limits', 'syntax');

-- Outbox payloads and headers -------------------------------------------------------------------
SET idempotency.max_outbox_payload_bytes = 10;
SELECT idempotency.idem_outbox_emit('limits', '\x00010203040506070809'::bytea) IS NOT NULL AS bytes_at_the_bound;
SELECT try($$SELECT idempotency.idem_outbox_emit('limits', '\x000102030405060708090a'::bytea)$$, true);
SELECT try($$SELECT idempotency.idem_outbox_emit('limits', jsonb_build_object('s', repeat('x', 20)))$$);
SELECT try($$SELECT idempotency.idem_outbox_emit('limits', '{"s": "xxxxxxxxxxxxxxxxxxxx"}'::text)$$);
SELECT try($$SELECT idempotency.idem_outbox_emit('limits', '\x00'::bytea, headers => '{"content-type": "application/json"}')$$);
SELECT count(*) AS outbox_rows FROM idempotency.outbox WHERE topic = 'limits';
RESET idempotency.max_outbox_payload_bytes;

-- Inbox payloads ----------------------------------------------------------------------------------
SET idempotency.max_inbox_payload_bytes = 10;
SELECT idempotency.idem_inbox_receive('limits', 'e10', NULL, true, NULL, '\x00010203040506070809') AS at_the_bound;
SELECT try($$SELECT idempotency.idem_inbox_receive('limits', 'e11', NULL, true, NULL, '\x000102030405060708090a')$$, true);
-- an authentic webhook whose body is past the bound: 54000, nothing written
SELECT try($$SELECT idempotency.idem_webhook_receive('limits', 'standard', ARRAY['whsec_' || encode('a key of twenty-four b..', 'base64')],
             'wh1', 'twelve bytes', idempotency.idem_webhook_sign_standard('whsec_' || encode('a key of twenty-four b..', 'base64'),
             'wh1', '1700000000', 'twelve bytes'), '1700000000', NULL, true, now => to_timestamp(1700000000))$$);
SELECT event_id, octet_length(payload) FROM idempotency.inbox WHERE consumer = 'limits' ORDER BY event_id;
RESET idempotency.max_inbox_payload_bytes;

-- last_error ------------------------------------------------------------------------------------
SET idempotency.max_error_bytes = 10;
SELECT idempotency.idem_outbox_emit('limits', '{}', dedup_key => 'fail-me') IS NOT NULL AS emitted;
CREATE TEMP TABLE leased AS SELECT event_id, attempt FROM idempotency.idem_outbox_next('limits', 10) WHERE dedup_key = 'fail-me';
SELECT try(format($$SELECT idempotency.idem_outbox_fail(%L, %s, true, %L)$$, event_id, attempt, repeat('e', 11)), true) FROM leased;
SELECT status, last_error FROM idempotency.outbox WHERE topic = 'limits' AND dedup_key = 'fail-me';
SELECT idempotency.idem_outbox_fail(event_id, attempt, true, repeat('e', 10)) FROM leased;
SELECT status, last_error FROM idempotency.outbox WHERE topic = 'limits' AND dedup_key = 'fail-me';
SELECT event_id, attempt FROM idempotency.idem_inbox_next('limits', 10);
SELECT try($$SELECT idempotency.idem_inbox_fail('limits', 'e10', 1, true, repeat('e', 11))$$);
SELECT status, last_error FROM idempotency.inbox WHERE consumer = 'limits';
SELECT idempotency.idem_inbox_fail('limits', 'e10', 1, true, repeat('e', 10));
SELECT status, last_error FROM idempotency.inbox WHERE consumer = 'limits';
RESET idempotency.max_error_bytes;
SELECT * FROM limits_written;

-- Distinct outbox keys per transaction --------------------------------------------------------
-- Each key holds a lock of the server's shared lock table until the transaction ends; a
-- savepoint rolled back releases its keys' locks and they no longer count.
BEGIN;
SET LOCAL idempotency.max_outbox_keys_per_transaction = 3;
SELECT idempotency.idem_outbox_emit('limits_keys', '{}', 'k1') IS NOT NULL AS k1;
SAVEPOINT a;
SELECT idempotency.idem_outbox_emit('limits_keys', '{}', 'k2') IS NOT NULL AS k2;
SAVEPOINT b;
SELECT idempotency.idem_outbox_emit('limits_keys', '{}', 'k3') IS NOT NULL AS k3;
RELEASE b;
SELECT try($$SELECT idempotency.idem_outbox_emit('limits_keys', '{}', 'k4')$$, true);
ROLLBACK TO a;
SELECT idempotency.idem_outbox_emit('limits_keys', '{}', 'k5') IS NOT NULL AS k5,
       idempotency.idem_outbox_emit('limits_keys', '{}', 'k6') IS NOT NULL AS k6;
SELECT try($$SELECT idempotency.idem_outbox_emit('limits_keys', '{}', 'k7')$$);
-- a key this transaction holds, and an event without a key, are not new keys
SELECT idempotency.idem_outbox_emit('limits_keys', '{}', 'k1') IS NOT NULL AS k1_again,
       idempotency.idem_outbox_emit('limits_keys', '{}') IS NOT NULL AS no_key;
SELECT key, count(*) FROM idempotency.outbox WHERE topic = 'limits_keys' GROUP BY key ORDER BY key;
SELECT count(*) AS key_locks FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 18756 AND pid = pg_backend_pid();
ROLLBACK;

-- The attack: one transaction emits with 5,000 distinct keys, each in a subtransaction that
-- catches its error, and keeps the locks. Before the bound all 5,000 succeeded (and ~140,000
-- filled the lock table: "out of shared memory" for every new connection); now 1,000 (the
-- default) succeed, the rest fail with 54000, and a new connection still works.
CREATE EXTENSION IF NOT EXISTS dblink;
CREATE TEMP TABLE attack (outcome text);
BEGIN;
DO $$
BEGIN
    FOR i IN 1 .. 5000 LOOP
        BEGIN
            PERFORM idempotency.idem_outbox_emit('limits_attack', '{}', 'key-' || i);
            INSERT INTO attack VALUES ('emitted');
        EXCEPTION WHEN OTHERS THEN
            INSERT INTO attack VALUES (SQLSTATE);
        END;
    END LOOP;
END $$;
SELECT outcome, count(*) FROM attack GROUP BY outcome ORDER BY outcome;
SELECT count(*) AS key_locks FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 18756 AND pid = pg_backend_pid();
SELECT * FROM dblink(format('host=%s port=%s dbname=%s', split_part(current_setting('unix_socket_directories'), ',', 1),
                            current_setting('port'), current_database()),
                     'SELECT 1') AS t(new_connection int);
ROLLBACK;
SELECT count(*) FROM idempotency.outbox WHERE topic = 'limits_attack';
DROP EXTENSION dblink;

-- Clean up
DELETE FROM idempotency.records WHERE scope = 'limits';
DELETE FROM idempotency.outbox WHERE topic = 'limits';
DELETE FROM idempotency.inbox WHERE consumer = 'limits';
DROP VIEW limits_written;
REVOKE USAGE ON SCHEMA idempotency FROM limits_caller;
DROP ROLE limits_caller;
