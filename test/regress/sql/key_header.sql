-- idem_key_from_header: the Idempotency-Key header value as the IETF draft defines it (an RFC 8941
-- Structured Field string) and unquoted, one key either way; malformed values are 22023.
\pset null '<NULL>'
SET client_min_messages = warning;
\i test/regress/helpers.sql

SELECT v AS header_value, idempotency.idem_key_from_header(v) AS key
FROM (VALUES ('"8e03978e-40d5"'), ('8e03978e-40d5'), ('  "8e03978e-40d5"  '), (E'\t8e03978e-40d5'),
             ('"a\"b"'), ('"a\\b"'), ('"with space"'), ('"k";param=1'), ('"k";a;b=?0')) t(v);
SELECT idempotency.idem_key_from_header(NULL) AS null_in_null_out;
SELECT v AS header_value, try(format('SELECT idempotency.idem_key_from_header(%L)', v)) AS error
FROM (VALUES (''), ('  '), ('""'), ('"open'), ('"bad\escape"'), ('"k" trailing'), ('"k","l"'),
             ('two words'), ('a"b'), (E'"tab\there"'), (E'k\r\n'), ('"café"'), ('café')) t(v);
SELECT try($$SELECT idempotency.idem_key_from_header('"open')$$, true) AS with_hint;
-- in a claim: the quoted and the unquoted header are one key, and a malformed one claims nothing
SELECT outcome FROM idempotency.idem_claim('hdr', idempotency.idem_key_from_header('"k-1"'), '\x01');
SELECT outcome FROM idempotency.idem_claim('hdr', idempotency.idem_key_from_header('k-1'), '\x01');
SELECT try($$SELECT idempotency.idem_claim('hdr', idempotency.idem_key_from_header('"k-2'), '\x01')$$) AS malformed;
SELECT key FROM idempotency.records WHERE scope = 'hdr' ORDER BY key;
-- immutable, strict and parallel safe: usable in an index or a generated column
SELECT provolatile, proisstrict, proparallel FROM pg_proc WHERE proname = 'idem_key_from_header';
