-- Hostile input: huge keys and payloads, deep nesting, NUL bytes, NaN, invalid UTF-8, absurd
-- settings, cancellation. Every case ends in a clear SQLSTATE or a correct answer, and an error
-- writes nothing. The 100 MB variants run in test/stages/hostile_big.sh (10 MB here).
\pset null '<NULL>'
SET client_min_messages = warning;

\i test/regress/helpers.sql
-- Everything stored, as one row of counts.
CREATE VIEW hostile_written AS
    SELECT (SELECT count(*) FROM idempotency.records WHERE scope LIKE 'hostile%') AS records,
           (SELECT count(*) FROM idempotency.inbox WHERE consumer LIKE 'hostile%') AS inbox;

-- Keys and scopes of 1 MB: 22001 at once, nothing written -----------------------------------
SELECT try($$SELECT idempotency.idem_claim(repeat('s', 1048576), 'k')$$);
SELECT try($$SELECT idempotency.idem_claim('hostile', repeat('k', 1048576))$$);
SELECT try($$SELECT idempotency.idem_complete('hostile', repeat('k', 1048576), 1)$$);
SELECT try($$SELECT idempotency.idem_fail(repeat('s', 1048576), 'k', 1)$$);
SELECT try($$SELECT idempotency.idem_heartbeat('hostile', repeat('k', 1048576), 1)$$);
SELECT try($$SELECT * FROM idempotency.idem_lookup(repeat('s', 1048576), 'k')$$);
SELECT try($$SELECT idempotency.idem_inbox_receive(repeat('c', 1048576), 'e')$$);
SELECT try($$SELECT idempotency.idem_inbox_receive('hostile', repeat('e', 1048576))$$);
SELECT try($$SELECT idempotency.idem_claim('hostile', 'k', ('\x' || repeat('ab', 1048576))::bytea)$$);
SELECT * FROM hostile_written;

-- Payloads of 10 MB: correct answers ---------------------------------------------------------
-- a 10 MB JSON string, as raw text and as jsonb: the same fingerprint as the small-string rule
SELECT idempotency.idem_fingerprint('"' || repeat('a', 10485760) || '"')
     = sha256(convert_to('"' || repeat('a', 10485760) || '"', 'UTF8')) AS text_10mb,
       idempotency.idem_fingerprint(('"' || repeat('a', 10485760) || '"')::jsonb)
     = sha256(convert_to('"' || repeat('a', 10485760) || '"', 'UTF8')) AS jsonb_10mb;
-- 10 MB of numbers, re-serialised: one fingerprint
SELECT idempotency.idem_fingerprint('[' || repeat('1.50, ', 1747626) || '0]')
     = idempotency.idem_fingerprint(('[' || repeat('1.5,', 1747626) || '0]')::jsonb) AS numbers_10mb,
       length(idempotency.idem_canonical_json(('[' || repeat('1.5,', 1747626) || '0]')::jsonb)) AS canonical_length;
-- a 10 MB response is stored and replayed whole
SELECT outcome, attempt FROM idempotency.idem_claim('hostile', 'big-response');
SELECT idempotency.idem_complete('hostile', 'big-response', 1, 'r', jsonb_build_object('blob', repeat('x', 10485760)), 200);
SELECT outcome, length(response ->> 'blob') AS blob_length, response_status
FROM idempotency.idem_claim('hostile', 'big-response');
-- a 10 MB inbox payload
SELECT idempotency.idem_inbox_receive('hostile', 'big-event', sha256(convert_to(repeat('p', 10485760), 'UTF8')),
                          true, 'blob', convert_to(repeat('p', 10485760), 'UTF8'));
SELECT idempotency.idem_inbox_receive('hostile', 'big-event', sha256(convert_to(repeat('p', 10485760), 'UTF8')));
SELECT * FROM hostile_written;

-- Nesting 100,000 levels: 54001, no stack overflow --------------------------------------------
SELECT try($$SELECT idempotency.idem_fingerprint(repeat('[', 100000) || repeat(']', 100000))$$);
SELECT try($$SELECT idempotency.idem_canonical_json(repeat('{"a":', 100000) || '1' || repeat('}', 100000))$$);
-- jsonb input itself refuses it (PostgreSQL's own stack check)
SELECT try($$SELECT idempotency.idem_fingerprint((repeat('[', 100000) || repeat(']', 100000))::jsonb)$$);
-- unbalanced: malformed, not a crash
SELECT try($$SELECT idempotency.idem_fingerprint(repeat('[', 100000))$$);
-- the limit is 10,000 levels, for raw text and for jsonb
SELECT length(idempotency.idem_canonical_json(repeat('[', 10000) || repeat(']', 10000))) AS depth_10000;
SELECT try($$SELECT idempotency.idem_canonical_json(repeat('[', 10001) || repeat(']', 10001))$$);
SELECT length(idempotency.idem_canonical_json((repeat('[', 10000) || repeat(']', 10000))::jsonb)) AS jsonb_depth_10000;
SELECT length(idempotency.idem_fingerprint((repeat('[', 10000) || repeat(']', 10000))::jsonb)) AS jsonb_fingerprint_depth_10000;
-- a deep response is stored as jsonb accepted it
SELECT outcome FROM idempotency.idem_claim('hostile', 'deep');
SELECT idempotency.idem_complete('hostile', 'deep', 1, NULL, (repeat('[', 2000) || repeat(']', 2000))::jsonb);
SELECT outcome, length(response::text) AS response_length FROM idempotency.idem_claim('hostile', 'deep');

-- NUL bytes -------------------------------------------------------------------------------------
-- in JSON text \u0000 is a character like any other: RFC 8785 writes it as \u0000
SELECT idempotency.idem_canonical_json('{"k\u0000": "a\u0000b", "k": 1}');
SELECT idempotency.idem_fingerprint('"a\u0000b"') = sha256(convert_to('"a\u0000b"', 'UTF8')) AS nul_fingerprint;
-- jsonb cannot hold it (PostgreSQL refuses \u0000 in jsonb text values)
SELECT try($$SELECT idempotency.idem_canonical_json('"a\u0000b"'::jsonb)$$);
-- text cannot hold a NUL byte at all: the value never reaches the extension
SELECT try($$SELECT idempotency.idem_claim('hostile', 'a' || chr(0))$$);
SELECT try($$SELECT idempotency.idem_claim('hostile', E'a\u0000')$$);
-- bytea can: NUL-filled fingerprints and payloads are ordinary values
SELECT outcome FROM idempotency.idem_claim('hostile', 'nul-fp', '\x0000000000');
SELECT outcome FROM idempotency.idem_claim('hostile', 'nul-fp', '\x0000000000', wait => false);
SELECT outcome FROM idempotency.idem_claim('hostile', 'nul-fp', '\x00000000');
SELECT idempotency.idem_inbox_receive('hostile', 'nul-payload', '\x00', true, NULL, '\x000000');

-- NaN and Infinity are not JSON ----------------------------------------------------------------
SELECT try($$SELECT idempotency.idem_canonical_json('NaN')$$);
SELECT try($$SELECT idempotency.idem_fingerprint('{"amount": NaN}')$$);
SELECT try($$SELECT idempotency.idem_fingerprint('[Infinity]')$$);
SELECT try($$SELECT idempotency.idem_fingerprint('[-Infinity]')$$);
SELECT try($$SELECT idempotency.idem_fingerprint('NaN'::jsonb)$$);
-- a float8 NaN turned into jsonb becomes a string, which is a correct JSON value
SELECT idempotency.idem_canonical_json(to_jsonb('NaN'::float8));
-- numbers beyond IEEE-754: 22003 unless exact_numbers
SELECT try($$SELECT idempotency.idem_fingerprint('1e400')$$);
SELECT idempotency.idem_canonical_json('1e400', exact_numbers => true);
SELECT try($$SELECT idempotency.idem_canonical_json('1' || repeat('0', 100000))$$);

-- Absurd settings and arguments ----------------------------------------------------------------
-- out-of-range settings (22023, the setting unchanged): test/regress/sql/settings.sql
-- the largest settings work (68 years)
SET idempotency.default_lease = 2147483647;
SET idempotency.default_ttl = 2147483647;
SELECT outcome, attempt FROM idempotency.idem_claim('hostile', 'max-settings');
RESET idempotency.default_lease;
RESET idempotency.default_ttl;
-- negative, zero, inverted and overflowing intervals: 22023 / 22008, nothing written
SELECT try($$SELECT idempotency.idem_claim('hostile', 'neg', NULL, '-1 second')$$);
SELECT try($$SELECT idempotency.idem_claim('hostile', 'neg', NULL, '0')$$);
SELECT try($$SELECT idempotency.idem_claim('hostile', 'neg', NULL, NULL, '-1 day')$$);
SELECT try($$SELECT idempotency.idem_claim('hostile', 'neg', NULL, '1 month -40 days')$$);
SELECT try($$SELECT idempotency.idem_claim('hostile', 'neg', NULL, '100 years')$$);
SELECT try($$SELECT idempotency.idem_claim('hostile', 'neg', NULL, NULL, '1000000 years')$$);
SELECT try($$SELECT idempotency.idem_claim('hostile', 'neg', NULL, '178000000 years', '178000000 years')$$);
SELECT try($$SELECT idempotency.idem_inbox_receive('hostile', 'neg', NULL, false, NULL, NULL, NULL, NULL, '-1 day')$$);
SELECT try($$SELECT idempotency.idem_inbox_receive('hostile', 'neg', NULL, false, NULL, NULL, NULL, NULL, '1000000 years')$$);
SELECT * FROM hostile_written;
-- a lease of 100 years with a TTL to match: claimed, and in_progress for a century
SELECT outcome, attempt, lease_expires_at - now() > '36000 days' AS century
FROM idempotency.idem_claim('hostile', 'century', NULL, '100 years', '100 years');
SELECT outcome FROM idempotency.idem_claim('hostile', 'century', NULL, wait => false);
SELECT try($$SELECT idempotency.idem_heartbeat('hostile', 'century', 1, '1000000 years')$$);
SELECT idempotency.idem_heartbeat('hostile', 'century', 1, '100 years') - now() > '36000 days' AS heartbeat_century;
-- attempt numbers out of range
SELECT try($$SELECT idempotency.idem_complete('hostile', 'century', -2147483648)$$);
SELECT try($$SELECT idempotency.idem_complete('hostile', 'century', 2147483647)$$);
-- batch sizes
SELECT try($$SELECT * FROM idempotency.idem_inbox_next('hostile', 0)$$);
SELECT try($$SELECT * FROM idempotency.idem_inbox_next('hostile', -1)$$);
SELECT try($$SELECT * FROM idempotency.idem_inbox_next('hostile', 2147483647)$$);
SELECT count(*) AS leased FROM idempotency.idem_inbox_next('hostile', 10000);
SELECT try($$SELECT idempotency.idem_purge(batch_size => 0)$$);
SELECT try($$SELECT idempotency.idem_purge(batch_size => -1)$$);

-- Cancellation of a long canonicalisation (statement_timeout): 57014, nothing written ----------
-- (50 MB of numbers as text, 20 MB as jsonb: each call takes 5x to 12x the timeout; a 10 ms
-- timeout once fired before try's block began, on the loaded cassert server)
CREATE TEMP TABLE hostile_big AS SELECT '[' || repeat('1234567.5,', 5242880) || '0]' AS doc;
CREATE TEMP TABLE hostile_bigj AS SELECT ('[' || repeat('1234567.5,', 2097152) || '0]')::jsonb AS doc;
SET statement_timeout = '20ms';
SELECT try($$SELECT idempotency.idem_fingerprint(doc) FROM hostile_big$$);
SELECT try($$SELECT idempotency.idem_canonical_json(doc) FROM hostile_big$$);
SELECT try($$SELECT idempotency.idem_fingerprint(doc) FROM hostile_bigj$$);
SELECT try($$SELECT idempotency.idem_canonical_json(doc) FROM hostile_bigj$$);
SELECT try($$SELECT idempotency.idem_claim('hostile', 'cancelled', idempotency.idem_fingerprint(doc)) FROM hostile_big$$);
RESET statement_timeout;
SELECT count(*) AS cancelled_claims FROM idempotency.records WHERE key = 'cancelled';
-- the backend is fine afterwards
SELECT idempotency.idem_canonical_json('{"b": 1, "a": [true, null]}');

-- Invalid UTF-8 in the raw-text functions --------------------------------------------------------
-- A UTF-8 database cannot hold invalid UTF-8 in text (the input functions refuse it), so it is
-- tried in a SQL_ASCII database, whose text values are unchecked bytes.
SELECT try($$SELECT convert_from('\x22ff22', 'UTF8')$$);
\c contrib_regression
SET client_min_messages = warning;
DROP DATABASE IF EXISTS idem_hostile_sql_ascii;
CREATE DATABASE idem_hostile_sql_ascii ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0;
\c idem_hostile_sql_ascii
SET client_min_messages = warning;
CREATE EXTENSION idempotency;
\i test/regress/helpers.sql
SELECT try($$SELECT idempotency.idem_canonical_json(E'"\xff"')$$);
SELECT try($$SELECT idempotency.idem_fingerprint(E'{"a": "\xc3\x28"}')$$);
SELECT try($$SELECT idempotency.idem_fingerprint(E'{"\xed\xa0\x80": 1}')$$);
SELECT try($$SELECT idempotency.idem_canonical_json(E'"\xf4\x90\x80\x80"')$$);
SELECT try($$SELECT idempotency.idem_canonical_json(E'"\xc0\xaf"')$$);
-- outside strings too, and before anything else wrong with the text: 22021 (docs/fingerprints.md)
SELECT try($$SELECT idempotency.idem_fingerprint(E'\xff')$$);
SELECT try($$SELECT idempotency.idem_fingerprint(E'{"a": 1}\xe2\x82')$$);
SELECT try($$SELECT idempotency.idem_canonical_json(E'[1,]\xc0\xaf')$$);
SELECT try($$SELECT idempotency.idem_fingerprint(E'[\xed\xa0\x80]', exclude => '{zz}')$$);
-- jsonb keeps a SQL_ASCII database's bytes unchecked: the writer checks its strings
SELECT try($$SELECT idempotency.idem_fingerprint(E'{"a": "\xff"}'::jsonb)$$);
SELECT idempotency.idem_canonical_json(E'"\xc3\xa9"') = E'"\xc3\xa9"' AS valid_utf8_kept;
-- keys are bytes: an invalid UTF-8 key is stored and found byte for byte
SELECT outcome FROM idempotency.idem_claim('hostile', E'k\xff');
SELECT outcome FROM idempotency.idem_claim('hostile', E'k\xff', wait => false);
SELECT count(*) FROM idempotency.idem_lookup('hostile', E'k\xfe');
\c contrib_regression
SET client_min_messages = warning;
DROP DATABASE idem_hostile_sql_ascii;

-- Summary: everything the suite wrote, and nothing else ------------------------------------------
SELECT scope, key, status, attempt FROM idempotency.records WHERE scope LIKE 'hostile%' ORDER BY key;
SELECT consumer, event_id, status, length(payload) AS payload_length FROM idempotency.inbox
WHERE consumer LIKE 'hostile%' ORDER BY event_id;
DELETE FROM idempotency.records WHERE scope LIKE 'hostile%';
DELETE FROM idempotency.inbox WHERE consumer LIKE 'hostile%';
DROP VIEW hostile_written;
DROP FUNCTION try(text, boolean);
