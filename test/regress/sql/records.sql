-- idem_claim / idem_complete / idem_fail / idem_heartbeat / idem_lookup: every outcome and error.
\pset null '<NULL>'
SET client_min_messages = warning;

\i test/regress/helpers.sql
CREATE VIEW rec AS
    SELECT scope, key, status, retryable, fingerprint, attempt, resource_id, response, response_status,
           lease_expires_at IS NOT NULL AS leased
    FROM idempotency.records ORDER BY scope, key;

-- claimed: attempt 1, lease and TTL from the settings
SELECT outcome, attempt, resource_id, response, response_status,
       lease_expires_at - clock_timestamp() BETWEEN '55 s' AND '60 s' AS lease_60s,
       expires_at - clock_timestamp() BETWEEN '23:59:50' AND '24:00:00' AS ttl_24h
FROM idempotency.idem_claim('user:1/create_payment', 'k1', '\x01');
-- the settings exist once the library is loaded (the first call, or shared_preload_libraries)
SHOW idempotency.default_lease;
SHOW idempotency.default_ttl;
SHOW idempotency.inbox_ttl;
-- in_progress: another owner holds the lease
SELECT outcome, attempt, resource_id, lease_expires_at > now() AS lease_live
FROM idempotency.idem_claim('user:1/create_payment', 'k1', '\x01');
-- mismatch comes first, even while processing
SELECT outcome, attempt, resource_id, response FROM idempotency.idem_claim('user:1/create_payment', 'k1', '\x02');
SELECT outcome FROM idempotency.idem_claim('user:1/create_payment', 'k1');  -- NULL fingerprint is a value
-- complete, then replay
SELECT idempotency.idem_complete('user:1/create_payment', 'k1', 1, 'pay_1', '{"id": "pay_1", "amount": 100}', 201);
SELECT outcome, attempt, resource_id, response, response_status, lease_expires_at
FROM idempotency.idem_claim('user:1/create_payment', 'k1', '\x01');
SELECT outcome FROM idempotency.idem_claim('user:1/create_payment', 'k1', '\x02');
-- repeating the same complete is a no-op (false); a different result is refused
SELECT idempotency.idem_complete('user:1/create_payment', 'k1', 1, 'pay_1', '{"amount": 100, "id": "pay_1"}', 201);
SELECT try($$SELECT idempotency.idem_complete('user:1/create_payment', 'k1', 1, 'pay_2', '{}', 201)$$);
SELECT try($$SELECT idempotency.idem_complete('user:1/create_payment', 'k1', 2, 'pay_1', '{"id": "pay_1", "amount": 100}', 201)$$);
SELECT try($$SELECT idempotency.idem_fail('user:1/create_payment', 'k1', 1)$$);
SELECT * FROM rec;

-- the same key in another scope is another operation
SELECT outcome, attempt FROM idempotency.idem_claim('user:2/create_payment', 'k1', '\x01');

-- lookup: zero or one row
SELECT status, fingerprint, attempt, resource_id, response, response_status,
       created_at <= updated_at AS ordered, lease_expires_at, expires_at > now() AS live
FROM idempotency.idem_lookup('user:1/create_payment', 'k1');
SELECT count(*) FROM idempotency.idem_lookup('user:1/create_payment', 'never-claimed');
SELECT status, attempt, lease_expires_at > created_at AS leased FROM idempotency.idem_lookup('user:2/create_payment', 'k1');

-- a NULL-fingerprint record and a retry with a fingerprint are a mismatch
SELECT outcome FROM idempotency.idem_claim('s', 'nofp');
SELECT outcome FROM idempotency.idem_claim('s', 'nofp', '\xab');
SELECT outcome FROM idempotency.idem_claim('s', 'nofp');

-- every kind of stored result replays exactly as stored
SELECT r, c.outcome, c.attempt FROM (VALUES ('sqlnull'), ('jsonnull'), ('zero'), ('false'), ('obj'), ('arr'), ('str')) v(r), LATERAL idempotency.idem_claim('results', r) c ORDER BY r;
SELECT idempotency.idem_complete('results', 'sqlnull', 1, NULL, NULL, NULL);
SELECT idempotency.idem_complete('results', 'jsonnull', 1, '', 'null', 0);
SELECT idempotency.idem_complete('results', 'zero', 1, '0', '0', 200);
SELECT idempotency.idem_complete('results', 'false', 1, 'f', 'false', 200);
SELECT idempotency.idem_complete('results', 'obj', 1, 'o', '{}', 200);
SELECT idempotency.idem_complete('results', 'arr', 1, 'a', '[]', 200);
SELECT idempotency.idem_complete('results', 'str', 1, 's', '""', 200);
SELECT r, c.outcome, c.resource_id, c.response, c.response IS NULL AS sql_null,
       jsonb_typeof(c.response) AS json_type, c.response_status
FROM (VALUES ('sqlnull'), ('jsonnull'), ('zero'), ('false'), ('obj'), ('arr'), ('str')) v(r),
     LATERAL idempotency.idem_claim('results', r) c ORDER BY r;
-- a repeat of a SQL NULL / JSON null result is recognised as the same call
SELECT idempotency.idem_complete('results', 'sqlnull', 1, NULL, NULL, NULL);
SELECT idempotency.idem_complete('results', 'jsonnull', 1, '', 'null', 0);
SELECT try($$SELECT idempotency.idem_complete('results', 'jsonnull', 1, '', NULL, 0)$$);

-- retryable failure: claimable again at once with the next attempt
SELECT outcome, attempt FROM idempotency.idem_claim('fail', 'retry', '\x01');
SELECT idempotency.idem_fail('fail', 'retry', 1, true, '{"error": "gateway timeout"}', 504);
SELECT status, attempt, response, response_status FROM idempotency.idem_lookup('fail', 'retry');
SELECT idempotency.idem_fail('fail', 'retry', 1, true, '{"error": "gateway timeout"}', 504);  -- repeat: no-op
SELECT outcome, attempt, response FROM idempotency.idem_claim('fail', 'retry', '\x02');        -- still checked
SELECT outcome, attempt, response FROM idempotency.idem_claim('fail', 'retry', '\x01');
SELECT try($$SELECT idempotency.idem_complete('fail', 'retry', 1, 'late')$$);                 -- fenced
SELECT idempotency.idem_complete('fail', 'retry', 2, 'pay_9', '{"id": "pay_9"}', 201);
SELECT outcome, attempt, resource_id FROM idempotency.idem_claim('fail', 'retry', '\x01');

-- permanent failure: stored and replayed like a result
SELECT outcome, attempt FROM idempotency.idem_claim('fail', 'final');
SELECT idempotency.idem_fail('fail', 'final', 1, false, '{"error": "card declined"}', 402);
SELECT outcome, attempt, resource_id, response, response_status FROM idempotency.idem_claim('fail', 'final');
SELECT l.status, rec.retryable FROM idempotency.idem_lookup('fail', 'final') l JOIN rec ON rec.scope = 'fail' AND rec.key = 'final';
SELECT try($$SELECT idempotency.idem_fail('fail', 'final', 1, true)$$);

-- lease expiry: reclaimed with the next attempt; the old owner is fenced
SELECT outcome, attempt FROM idempotency.idem_claim('lease', 'crash', NULL, '10 milliseconds');
SELECT pg_sleep(0.05);
SELECT outcome, attempt, lease_expires_at > clock_timestamp() AS leased FROM idempotency.idem_claim('lease', 'crash', NULL, '1 minute');
SELECT try($$SELECT idempotency.idem_complete('lease', 'crash', 1, 'old')$$);
SELECT try($$SELECT idempotency.idem_heartbeat('lease', 'crash', 1)$$);
SELECT try($$SELECT idempotency.idem_fail('lease', 'crash', 1)$$);
SELECT idempotency.idem_complete('lease', 'crash', 2, 'new', '{"ok": true}', 200);
SELECT try($$SELECT idempotency.idem_complete('lease', 'crash', 1, 'old')$$);
SELECT outcome, attempt, resource_id FROM idempotency.idem_claim('lease', 'crash');
-- an owner whose lease expired may still finish while nobody took over
SELECT outcome, attempt FROM idempotency.idem_claim('lease', 'slow', NULL, '10 milliseconds');
SELECT pg_sleep(0.05);
SELECT idempotency.idem_complete('lease', 'slow', 1, 'done');
SELECT outcome, attempt, resource_id FROM idempotency.idem_claim('lease', 'slow');

-- heartbeat extends the lease
SELECT outcome, attempt FROM idempotency.idem_claim('hb', 'k', NULL, '1 second');
SELECT idempotency.idem_heartbeat('hb', 'k', 1, '1 hour') - clock_timestamp() BETWEEN '59 min' AND '60 min' AS extended;
SELECT lease_expires_at - clock_timestamp() > '59 min' AS extended, expires_at >= lease_expires_at AS ttl_covers
FROM idempotency.idem_lookup('hb', 'k');
SELECT idempotency.idem_heartbeat('hb', 'k', 1) - clock_timestamp() BETWEEN '55 s' AND '60 s' AS default_lease;
SELECT try($$SELECT idempotency.idem_heartbeat('hb', 'k', 2)$$);
SELECT try($$SELECT idempotency.idem_heartbeat('hb', 'missing', 1)$$);
SELECT try($$SELECT idempotency.idem_heartbeat('hb', 'k', 1, '0 seconds')$$);
SELECT idempotency.idem_complete('hb', 'k', 1);
SELECT try($$SELECT idempotency.idem_heartbeat('hb', 'k', 1)$$);

-- TTL: a record past its TTL counts as absent for claim and lookup, even before it is purged
SELECT outcome, attempt FROM idempotency.idem_claim('ttl', 'k', '\x01', '10 milliseconds', '20 milliseconds');
SELECT idempotency.idem_complete('ttl', 'k', 1, 'old');
SELECT expires_at - updated_at = '20 milliseconds' AS ttl_from_finish FROM idempotency.idem_lookup('ttl', 'k');
SELECT pg_sleep(0.05);
SELECT count(*) AS visible FROM idempotency.idem_lookup('ttl', 'k');
SELECT count(*) AS stored FROM idempotency.records WHERE scope = 'ttl';
-- claimed anew (no mismatch against the expired fingerprint); the fencing token keeps counting
SELECT outcome, attempt, resource_id FROM idempotency.idem_claim('ttl', 'k', '\x02');
SELECT status, fingerprint, attempt, resource_id FROM idempotency.idem_lookup('ttl', 'k');

-- an unfinished record never expires by TTL: stuck past its TTL it is reclaimed (outcome unknown:
-- reconcile), and a different request is still a mismatch (was: claimed anew, no fingerprint check)
SELECT outcome, attempt FROM idempotency.idem_claim('ttl', 'stuck', '\x01', '10 milliseconds', '20 milliseconds');
SELECT pg_sleep(0.05);
SELECT status, attempt FROM idempotency.idem_lookup('ttl', 'stuck');
SELECT outcome, attempt FROM idempotency.idem_claim('ttl', 'stuck', '\x02');
SELECT outcome, attempt FROM idempotency.idem_claim('ttl', 'stuck', '\x01');
-- an attempt that was never handed out is refused as such
SELECT try($$SELECT idempotency.idem_complete('ttl', 'stuck', 7)$$);

-- the fencing token cannot wrap around: a takeover past INT32_MAX is refused and writes nothing
SELECT outcome FROM idempotency.idem_claim('exhaust', 'k');
UPDATE idempotency.records SET attempt = 2147483647 WHERE scope = 'exhaust';
SELECT idempotency.idem_fail('exhaust', 'k', 2147483647);
SELECT try($$SELECT idempotency.idem_claim('exhaust', 'k')$$);
SELECT status, attempt FROM idempotency.idem_lookup('exhaust', 'k');

-- per-call arguments override the settings
SET idempotency.default_lease = '5s';
SET idempotency.default_ttl = '1h';
SELECT outcome FROM idempotency.idem_claim('settings', 'k');
SELECT lease_expires_at - created_at AS lease, expires_at - created_at AS ttl FROM idempotency.idem_lookup('settings', 'k');
SELECT outcome FROM idempotency.idem_claim('settings', 'k2', NULL, '2 minutes', '2 days');
SELECT lease_expires_at - created_at AS lease, expires_at - created_at AS ttl FROM idempotency.idem_lookup('settings', 'k2');
RESET idempotency.default_lease;
RESET idempotency.default_ttl;
-- out-of-range settings: test/regress/sql/settings.sql

-- bad input: a clear error with its SQLSTATE, and nothing written
SELECT count(*) AS before FROM idempotency.records \gset
SELECT try($$SELECT idempotency.idem_claim(NULL, 'k')$$);
SELECT try($$SELECT idempotency.idem_claim('s', NULL)$$);
SELECT try($$SELECT idempotency.idem_claim('', 'k')$$);
SELECT try($$SELECT idempotency.idem_claim('s', '')$$);
SELECT try(format('SELECT idempotency.idem_claim(%L, %L)', 's', repeat('k', 256)));
SELECT try(format('SELECT idempotency.idem_claim(%L, %L)', repeat('s', 1025), 'k'));
SELECT try(format('SELECT idempotency.idem_claim(%L, %L)', 's', repeat('é', 128)));  -- 256 bytes
SELECT try($$SELECT idempotency.idem_claim('s', 'k', '\x')$$);
SELECT try(format('SELECT idempotency.idem_claim(%L, %L, %L::bytea)', 's', 'k', '\x' || repeat('00', 65)));
SELECT try($$SELECT idempotency.idem_claim('s', 'k', NULL, '0 seconds')$$);
SELECT try($$SELECT idempotency.idem_claim('s', 'k', NULL, '-5 seconds')$$);
SELECT try($$SELECT idempotency.idem_claim('s', 'k', NULL, '1 minute', '30 seconds')$$);
SELECT try($$SELECT idempotency.idem_claim('s', 'k', NULL, NULL, '10 seconds')$$);
SELECT try($$SELECT idempotency.idem_claim('s', 'k', NULL, '1 minute', '100000000 years')$$);
SELECT try($$SELECT idempotency.idem_complete('s', 'k', NULL)$$);
SELECT try($$SELECT idempotency.idem_complete('s', 'k', 0)$$);
SELECT try($$SELECT idempotency.idem_complete('s', 'never-claimed', 1)$$);
SELECT try($$SELECT idempotency.idem_fail('s', 'never-claimed', 1)$$);
SELECT try($$SELECT idempotency.idem_lookup(NULL, 'k')$$);
SELECT count(*) - :before AS written FROM idempotency.records;
-- limits are inclusive
SELECT outcome FROM idempotency.idem_claim('s', repeat('k', 255), ('\x' || repeat('ff', 64))::bytea);
SELECT outcome FROM idempotency.idem_claim(repeat('s', 1024), 'k', '\x00');
SELECT outcome FROM idempotency.idem_claim('s', 'century', NULL, '100 years', '100 years');

-- errors in full (message, detail, hint)
\set SHOW_CONTEXT never
SELECT idempotency.idem_complete('lease', 'crash', 1, 'old');
SELECT idempotency.idem_claim('s', '');
SELECT idempotency.idem_heartbeat('nope', 'k', 1);
\set VERBOSITY default

-- idem_claim is callable with named arguments
SELECT outcome, attempt FROM idempotency.idem_claim(scope => 'named', key => 'k', ttl => '1 day', lease => '10 seconds', wait => false);

-- idempotency.direct_access: idem_claim inserts and reads records through the table and index
-- access methods (on, the default) or by SQL statements (off); every answer is the same both ways
-- (stored results of every kind, mismatch, a replayed failure)
SHOW idempotency.direct_access;
CREATE TEMP TABLE probe_cases (scope text, key text, fp bytea);
INSERT INTO probe_cases VALUES
    ('results', 'sqlnull', NULL), ('results', 'jsonnull', NULL), ('results', 'zero', NULL),
    ('results', 'false', NULL), ('results', 'obj', NULL), ('results', 'arr', NULL),
    ('results', 'str', NULL), ('user:1/create_payment', 'k1', '\x01'),
    ('user:1/create_payment', 'k1', '\x02'), ('fail', 'final', NULL), ('fail', 'retry', '\x01'),
    ('user:2/create_payment', 'k1', '\x01');
SET idempotency.direct_access = off;
CREATE TEMP TABLE via_sql AS
    SELECT p.scope, p.key, p.fp, c.outcome, c.attempt, c.resource_id, c.response::text AS response,
           c.response_status, c.expires_at
    FROM probe_cases p, LATERAL idempotency.idem_claim(p.scope, p.key, p.fp) c;
RESET idempotency.direct_access;
CREATE TEMP TABLE via_direct AS
    SELECT p.scope, p.key, p.fp, c.outcome, c.attempt, c.resource_id, c.response::text AS response,
           c.response_status, c.expires_at
    FROM probe_cases p, LATERAL idempotency.idem_claim(p.scope, p.key, p.fp) c;
SELECT count(*) AS differences FROM ((TABLE via_sql EXCEPT TABLE via_direct) UNION ALL (TABLE via_direct EXCEPT TABLE via_sql)) d;
SELECT scope, key, fp, outcome, attempt, resource_id, response, response_status FROM via_direct ORDER BY 1, 2, 3;
-- a new key claimed twice in one statement: the second call sees the first one's row, both ways
SET idempotency.direct_access = off;
SELECT v.i, c.outcome, c.attempt FROM (VALUES (1), (2)) v(i), LATERAL idempotency.idem_claim('twice', 'via-sql' || left(v.i::text, 0)) c ORDER BY v.i;
RESET idempotency.direct_access;
SELECT v.i, c.outcome, c.attempt FROM (VALUES (1), (2)) v(i), LATERAL idempotency.idem_claim('twice', 'direct' || left(v.i::text, 0)) c ORDER BY v.i;
SELECT key, status, attempt FROM idempotency.records WHERE scope = 'twice' ORDER BY key;
-- a claim in a read-only transaction is refused (25006) and writes nothing
BEGIN READ ONLY;
SELECT * FROM try($$SELECT outcome FROM idempotency.idem_claim('readonly', 'k')$$);
ROLLBACK;
SELECT count(*) AS readonly_rows FROM idempotency.records WHERE scope = 'readonly';
-- the table as installed takes the direct path on every supported major: the claim says at
-- DEBUG1 when it steps aside, and here it does not
SET client_min_messages = debug1;
SELECT outcome, attempt FROM idempotency.idem_claim('direct-taken', 'k');
SELECT outcome, attempt FROM idempotency.idem_claim('direct-taken', 'k');
-- wait => false too. It once took the SQL path without a DEBUG1 line (the path was chosen before
-- any direct attempt), whose insert runs in a subtransaction with a 1 ms lock_timeout: the new
-- record's xmin tells them apart, the transaction's own id on the direct path, a
-- subtransaction's by SQL (direct_access off, for contrast)
SELECT outcome, attempt FROM idempotency.idem_claim('direct-taken', 'nowait', wait => false);
SELECT outcome, attempt FROM idempotency.idem_claim('direct-taken', 'nowait', wait => false);
SET client_min_messages = warning;
BEGIN;
SELECT outcome FROM idempotency.idem_claim('direct-taken', 'nowait-xmin', wait => false);
SET LOCAL idempotency.direct_access = off;
SELECT outcome FROM idempotency.idem_claim('direct-taken', 'nowait-sql', wait => false);
SELECT key, xmin = pg_current_xact_id()::xid AS by_the_transaction
    FROM idempotency.records WHERE scope = 'direct-taken' AND key LIKE 'nowait-%' ORDER BY key;
COMMIT;
-- a trigger on the records table (not supported, but not ignored either): claims fall back to
-- SQL statements, so the trigger sees every insert
CREATE FUNCTION pg_temp.saw_insert() RETURNS trigger LANGUAGE plpgsql AS
    $$BEGIN RAISE NOTICE 'trigger saw %/%', NEW.scope, NEW.key; RETURN NEW; END$$;
CREATE TRIGGER saw_insert BEFORE INSERT ON idempotency.records
    FOR EACH ROW EXECUTE FUNCTION pg_temp.saw_insert();
SET client_min_messages = debug1;
SELECT outcome, attempt FROM idempotency.idem_claim('trigger', 'k');
SELECT outcome, attempt FROM idempotency.idem_claim('trigger', 'k');
DROP TRIGGER saw_insert ON idempotency.records;
SELECT outcome, attempt FROM idempotency.idem_claim('trigger', 'k2');
SET client_min_messages = warning;
-- a CHECK constraint or NOT NULL added to the records table (not supported either) is not
-- skipped: the claim falls back to the SQL statement, which enforces it, and writes nothing
ALTER TABLE idempotency.records ADD CONSTRAINT short_keys CHECK (length(key) <= 10) NOT VALID;
SELECT * FROM try($$SELECT outcome FROM idempotency.idem_claim('added-check', 'this-key-is-too-long')$$);
SELECT outcome FROM idempotency.idem_claim('added-check', 'short');
ALTER TABLE idempotency.records DROP CONSTRAINT short_keys;
BEGIN;
DELETE FROM idempotency.records;
ALTER TABLE idempotency.records ALTER COLUMN resource_id SET NOT NULL;
SELECT * FROM try($$SELECT outcome FROM idempotency.idem_claim('added-not-null', 'k')$$);
ROLLBACK;
SELECT scope, key FROM idempotency.records WHERE scope LIKE 'added-%' ORDER BY 1, 2;
SELECT outcome FROM idempotency.idem_claim('added-not-null', 'k');
-- a changed column type or an added column default is not written around either: the SQL path
-- runs, and reads every column cast to the type it expects (found by review: a numeric attempt
-- column crashed the direct path's reader, and the SQL path misread it as a huge attempt)
BEGIN;
DROP VIEW rec;
ALTER TABLE idempotency.records ALTER COLUMN attempt TYPE numeric;
SELECT outcome, attempt FROM idempotency.idem_claim('retyped', 'k');
SELECT outcome, attempt FROM idempotency.idem_claim('retyped', 'k');
ROLLBACK;
BEGIN;
ALTER TABLE idempotency.records ALTER COLUMN resource_id SET DEFAULT 'none';
SELECT outcome FROM idempotency.idem_claim('defaulted', 'k');
SELECT resource_id FROM idempotency.records WHERE scope = 'defaulted';
ROLLBACK;
-- rows that the same statement wrote before the claim (a data-modifying CTE) are seen by it, as
-- by the SQL statement: a retry after a failure is taken over, an inserted row is in progress
-- (found by review: the direct path answered 40001)
SELECT outcome FROM idempotency.idem_claim('cte', 'k1');
SELECT idempotency.idem_fail('cte', 'k1', 1, true);
WITH u AS (UPDATE idempotency.records SET updated_at = now() WHERE scope = 'cte' AND key = 'k1' RETURNING 1)
SELECT c.outcome, c.attempt FROM u, LATERAL idempotency.idem_claim('cte', 'k1') c;
WITH i AS (INSERT INTO idempotency.records (scope, key, status, attempt, created_at, updated_at, lease_expires_at, expires_at)
           VALUES ('cte', 'k2', 'processing', 1, now(), now(), now() + interval '1 minute', now() + interval '1 day') RETURNING 1)
SELECT c.outcome, c.attempt FROM i, LATERAL idempotency.idem_claim('cte', 'k2') c;

-- a finished record is kept exactly as long after its finish as its TTL window was long: whole
-- days are 24 hours in any session time zone (the expiry is computed in UTC; it moved by an
-- hour when the window crossed a daylight-saving change, as windows of 30..360 days in Berlin do)
SET TimeZone = 'Europe/Berlin';
SELECT count(*) FILTER (WHERE c.outcome = 'claimed') AS claimed,
       count(*) FILTER (WHERE idempotency.idem_complete('dst', 'k' || n, 1)) AS completed
FROM generate_series(30, 360, 30) n, LATERAL idempotency.idem_claim('dst', 'k' || n, NULL, NULL, make_interval(days => n)) c;
SELECT count(*) AS windows,
       count(*) FILTER (WHERE extract(epoch FROM expires_at) - extract(epoch FROM updated_at)
                              = substr(key, 2)::int * 86400) AS exact_days
FROM idempotency.records WHERE scope = 'dst';
RESET TimeZone;

-- Replays of HTTP responses (0.6): the exact body bytes and the kept headers come back from the
-- replay (direct path and SQL path) and from idem_lookup, byte for byte
SELECT outcome FROM idempotency.idem_claim('http', 'b1', '\x01');
SELECT idempotency.idem_complete('http', 'b1', 1, 'pay_9', NULL, 201,
                     convert_to(E'{"id":"pay_9",  "amount":100}\n', 'UTF8'),
                     '{"Location": "/v1/payments/pay_9", "Content-Type": "application/json", "ETag": "W/\"1\""}');
SELECT outcome, resource_id, response, response_status, convert_to(E'{"id":"pay_9",  "amount":100}\n', 'UTF8') = response_body AS same_bytes,
       response_headers
FROM idempotency.idem_claim('http', 'b1', '\x01');
SET idempotency.direct_access = off;
SELECT outcome, length(response_body) AS body_bytes, response_headers ->> 'ETag' AS etag FROM idempotency.idem_claim('http', 'b1', '\x01');
RESET idempotency.direct_access;
SELECT status, length(response_body) AS body_bytes, response_headers ->> 'Location' AS location FROM idempotency.idem_lookup('http', 'b1');
-- a mismatch carries no stored result
SELECT outcome, response_body, response_headers FROM idempotency.idem_claim('http', 'b1', '\x02');
-- the same complete again is a no-op; another body or other headers are IK003
SELECT idempotency.idem_complete('http', 'b1', 1, 'pay_9', NULL, 201,
                     convert_to(E'{"id":"pay_9",  "amount":100}\n', 'UTF8'),
                     '{"ETag": "W/\"1\"", "Location": "/v1/payments/pay_9", "Content-Type": "application/json"}') AS again;
SELECT try($$SELECT idempotency.idem_complete('http', 'b1', 1, 'pay_9', NULL, 201, '\x7b7d',
                                  '{"Location": "/v1/payments/pay_9", "Content-Type": "application/json", "ETag": "W/\"1\""}')$$) AS other_body;
SELECT try($$SELECT idempotency.idem_complete('http', 'b1', 1, 'pay_9', NULL, 201,
                                  convert_to(E'{"id":"pay_9",  "amount":100}\n', 'UTF8'), NULL)$$) AS no_headers;
-- a stored non-retryable failure replays its body and headers too
SELECT outcome FROM idempotency.idem_claim('http', 'f1');
SELECT idempotency.idem_fail('http', 'f1', 1, false, NULL, 402, '{"error":"card_declined"}', '{"Content-Type": "application/json"}');
SELECT outcome, response_status, convert_from(response_body, 'UTF8') AS body, response_headers FROM idempotency.idem_claim('http', 'f1');
-- a retryable failure's body is not replayed: the next claim takes the key over and the stored
-- body and headers are cleared with the rest of the result
SELECT outcome FROM idempotency.idem_claim('http', 'r1');
SELECT idempotency.idem_fail('http', 'r1', 1, true, NULL, 503, 'busy', '{"Retry-After": "1"}');
SELECT outcome, attempt, response_body, response_headers FROM idempotency.idem_claim('http', 'r1');
SELECT response_body, response_headers FROM idempotency.records WHERE scope = 'http' AND key = 'r1';
-- response_headers must be an object of header name to string value, the names HTTP tokens,
-- the values free of CR, LF and NUL (no header injection through a replay); nothing is written
SELECT outcome FROM idempotency.idem_claim('http', 'h1');
SELECT try(format($$SELECT idempotency.idem_complete('http', 'h1', 1, response_headers => %L)$$, h)) AS bad_headers
FROM (VALUES ('[]'), ('"Location"'), ('{"Location": 1}'), ('{"Location": null}'),
             ('{"Bad Name": "x"}'), ('{"": "x"}'), ('{"Location": "/a\r\nSet-Cookie: s=1"}'),
             ('{"Location": "a\u0000b"}')) v(h);
SELECT status, response_headers FROM idempotency.records WHERE scope = 'http' AND key = 'h1';
SELECT idempotency.idem_complete('http', 'h1', 1, response_headers => '{}') AS empty_object_ok;

-- idempotency.idem_claim_support (0.7): at planning, the trailing arguments at their defaults are dropped
-- from the call, so each execution evaluates fewer expressions. idem_claim takes an absent
-- argument as NULL, which for each of them is the declared default (wait: NULL waits too), so
-- the declared defaults are pinned here: changing one needs src/records_claim_support.cpp.
SELECT pg_get_function_arguments('idempotency.idem_claim(text,text,bytea,interval,interval,boolean)'::regprocedure) AS declared;
SELECT prosupport FROM pg_proc
WHERE oid = 'idempotency.idem_claim(text,text,bytea,interval,interval,boolean)'::regprocedure;
CREATE FUNCTION pg_temp.call_shape(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    l text;
BEGIN
    FOR l IN EXECUTE 'EXPLAIN (VERBOSE, COSTS OFF) ' || q LOOP
        IF l ~ 'idem_claim\(' THEN
            RETURN substring(l FROM 'idem_claim\(.*\)');
        END IF;
    END LOOP;
    RETURN NULL;
END $$;
-- only trailing constants at their defaults go; a parameter of a generic plan stays
PREPARE claim_lease(text, interval) AS SELECT * FROM idempotency.idem_claim('s', $1, NULL, $2);
SET plan_cache_mode = force_generic_plan;
SELECT q AS call, pg_temp.call_shape(q) AS planned FROM (VALUES
    ($$SELECT * FROM idempotency.idem_claim('s', 'k')$$),
    ($$SELECT * FROM idempotency.idem_claim('s', 'k', '\x01')$$),
    ($$SELECT * FROM idempotency.idem_claim('s', 'k', NULL, NULL, NULL, NULL)$$),
    ($$SELECT * FROM idempotency.idem_claim('s', 'k', '\x01', '5 min')$$),
    ($$SELECT * FROM idempotency.idem_claim('s', 'k', '\x01', ttl => '1 day')$$),
    ($$SELECT * FROM idempotency.idem_claim('s', 'k', '\x01', wait => false)$$),
    ($$SELECT * FROM idempotency.idem_claim('s', 'k', '\x01', wait => true)$$),
    ($$SELECT idempotency.idem_claim('s', 'k', '\x01')$$),
    ($$EXECUTE claim_lease('k', NULL)$$)) v(q);
RESET plan_cache_mode;
DEALLOCATE claim_lease;
-- and a call answers the same with the defaults dropped or passed (random() >= 0 is no constant:
-- it keeps every argument): the settings' lease and TTL, and it waits
SET idempotency.default_lease = '7 s';
SET idempotency.default_ttl = '2d';
SELECT pg_temp.call_shape($$SELECT * FROM idempotency.idem_claim('support', 'kept', NULL, NULL, NULL, random() >= 0)$$) AS kept;
SELECT s.key, c.outcome, c.attempt, c.expires_at - c.lease_expires_at AS ttl_minus_lease
FROM (VALUES ('dropped'), ('kept')) s(key),
     LATERAL (SELECT * FROM idempotency.idem_claim('support', s.key) WHERE s.key = 'dropped'
              UNION ALL
              SELECT * FROM idempotency.idem_claim('support', s.key, NULL, NULL, NULL, random() >= 0)
              WHERE s.key = 'kept') c
ORDER BY 1;
RESET idempotency.default_lease;
RESET idempotency.default_ttl;

-- idem_complete and idem_fail update the record directly (src/direct_update.cpp; on, the
-- default) or by the SQL statement (off): every stored column the same both ways, with updates
-- that stay on the page (HOT) and bodies too large for it (a new primary key entry), and amcheck
-- finds every row's entry in the primary key
CREATE EXTENSION amcheck;
CREATE TEMP TABLE finish_cases AS
    SELECT i, CASE WHEN i % 3 = 0 THEN 'fail' ELSE 'complete' END AS verb,
           CASE WHEN i % 2 = 0 THEN repeat('b', 1800) ELSE 'small' END AS body
    FROM generate_series(1, 40) i;
SELECT count(*) FROM finish_cases c, (VALUES ('fin-sql'), ('fin-direct')) p(scope),
    LATERAL idempotency.idem_claim(p.scope, 'f' || c.i, ttl => '1 hour') x WHERE x.outcome = 'claimed';
BEGIN;
SET LOCAL idempotency.direct_access = off;
SELECT count(*) FILTER (WHERE CASE c.verb
    WHEN 'complete' THEN idempotency.idem_complete('fin-sql', 'f' || c.i, 1, 'r' || c.i, '{"n": 1}', 201,
                                       convert_to(c.body, 'UTF8'), '{"Location": "/p"}')
    ELSE idempotency.idem_fail('fin-sql', 'f' || c.i, 1, c.i % 2 = 0, NULL, 402, convert_to(c.body, 'UTF8')) END)
    AS stored_by_sql FROM finish_cases c;
COMMIT;
BEGIN;
SELECT n_tup_upd AS upd0, n_tup_hot_upd AS hot0 FROM pg_stat_xact_user_tables
WHERE relid = 'idempotency.records'::regclass \gset
SELECT count(*) FILTER (WHERE CASE c.verb
    WHEN 'complete' THEN idempotency.idem_complete('fin-direct', 'f' || c.i, 1, 'r' || c.i, '{"n": 1}', 201,
                                       convert_to(c.body, 'UTF8'), '{"Location": "/p"}')
    ELSE idempotency.idem_fail('fin-direct', 'f' || c.i, 1, c.i % 2 = 0, NULL, 402, convert_to(c.body, 'UTF8')) END)
    AS stored_directly FROM finish_cases c;
SELECT n_tup_upd - :upd0 AS updates, n_tup_upd - :upd0 > n_tup_hot_upd - :hot0 AS some_not_hot,
       n_tup_hot_upd > :hot0 AS some_hot
FROM pg_stat_xact_user_tables WHERE relid = 'idempotency.records'::regclass;
COMMIT;
SELECT count(*) AS differences FROM (
    (SELECT key, status, retryable, fingerprint, attempt, resource_id, response, response_status,
            lease_expires_at, expires_at - updated_at AS kept, response_body, response_headers
     FROM idempotency.records WHERE scope = 'fin-sql'
     EXCEPT
     SELECT key, status, retryable, fingerprint, attempt, resource_id, response, response_status,
            lease_expires_at, expires_at - updated_at, response_body, response_headers
     FROM idempotency.records WHERE scope = 'fin-direct')
    UNION ALL
    (SELECT key, status, retryable, fingerprint, attempt, resource_id, response, response_status,
            lease_expires_at, expires_at - updated_at, response_body, response_headers
     FROM idempotency.records WHERE scope = 'fin-direct'
     EXCEPT
     SELECT key, status, retryable, fingerprint, attempt, resource_id, response, response_status,
            lease_expires_at, expires_at - updated_at, response_body, response_headers
     FROM idempotency.records WHERE scope = 'fin-sql')) d;
SELECT status, retryable, count(*), min(expires_at - updated_at) AS kept, bool_and(lease_expires_at IS NULL) AS no_lease
FROM idempotency.records WHERE scope = 'fin-direct' GROUP BY 1, 2 ORDER BY 1, 2;
SELECT 'complete' AS pkey FROM (SELECT bt_index_check('idempotency.records_pkey', true)) c;
SET enable_seqscan = off;
SELECT count(*) AS found_by_key FROM finish_cases c
    JOIN idempotency.records r ON r.scope = 'fin-direct' AND r.key = 'f' || c.i AND r.status <> 'processing';
RESET enable_seqscan;
-- a finished record is never changed: a repeat is a no-op (false), another result IK003, both ways
SELECT * FROM try($$SELECT idempotency.idem_complete('fin-direct', 'f1', 1, 'r1', '{"n": 1}', 201, convert_to('small', 'UTF8'), '{"Location": "/p"}')$$);
SELECT * FROM try($$SELECT idempotency.idem_complete('fin-direct', 'f1', 1, 'other')$$);
DROP EXTENSION amcheck;
-- what the direct update leaves to the SQL statement, answered alike both ways: an expiry a day
-- past the timestamp range (a TTL window that long, set by hand here; no int64 overflow) raises
-- 22008 and stores nothing; a published records table without a replica identity refuses the update (55000)
SELECT count(*) FROM (VALUES ('edge-sql'), ('edge-direct')) p(scope), LATERAL idempotency.idem_claim(p.scope, 'far') c;
UPDATE idempotency.records SET created_at = now() - interval '2 days', expires_at = '294276-12-31 00:00:00+00'
WHERE key = 'far';
SET idempotency.direct_access = off;
SELECT * FROM try($$SELECT idempotency.idem_complete('edge-sql', 'far', 1, 'r')$$);
RESET idempotency.direct_access;
SELECT * FROM try($$SELECT idempotency.idem_complete('edge-direct', 'far', 1, 'r')$$);
SELECT scope, status, expires_at = '294276-12-31 00:00:00+00' AS kept FROM idempotency.records WHERE key = 'far' ORDER BY scope;
UPDATE idempotency.records SET created_at = now(), expires_at = now() + interval '1 hour' WHERE key = 'far';
SET client_min_messages = error; -- not the wal_level warning, which depends on the cluster
CREATE PUBLICATION idem_records_pub FOR TABLE idempotency.records;
RESET client_min_messages;
ALTER TABLE idempotency.records REPLICA IDENTITY NOTHING;
SET idempotency.direct_access = off;
SELECT * FROM try($$SELECT idempotency.idem_complete('edge-sql', 'far', 1, 'r')$$);
RESET idempotency.direct_access;
SELECT * FROM try($$SELECT idempotency.idem_complete('edge-direct', 'far', 1, 'r')$$);
ALTER TABLE idempotency.records REPLICA IDENTITY DEFAULT;
DROP PUBLICATION idem_records_pub;
SELECT scope, status FROM idempotency.records WHERE key = 'far' ORDER BY scope;
SELECT count(*) FILTER (WHERE idempotency.idem_complete(p.scope, 'far', 1, 'r')) AS stored
FROM (VALUES ('edge-sql'), ('edge-direct')) p(scope);
