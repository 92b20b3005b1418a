-- idem_http_answer: the HTTP answer (status, headers, body) of every claim outcome and of a key's
-- stored result (the IK003 path), and idem_fingerprint of the raw body as bytea.
\pset null '<NULL>'
SET client_min_messages = warning;
\i test/regress/helpers.sql

-- The raw body as bytes: the same digest as its text; invalid UTF-8 is 22021, not I-JSON 22P02.
SELECT idempotency.idem_fingerprint('{"b": 2, "a": 1.0}'::bytea) = idempotency.idem_fingerprint('{"a":1,"b":2}') AS same_as_text,
       idempotency.idem_fingerprint(convert_to('{"name": "café"}', 'UTF8')) = idempotency.idem_fingerprint('{"name":"café"}') AS utf8,
       idempotency.idem_fingerprint(NULL::bytea) AS null_in_null_out;
SELECT try($$SELECT idempotency.idem_fingerprint('\x7b2261223a2280227d'::bytea)$$) AS bad_utf8,
       try($$SELECT idempotency.idem_fingerprint('\x7b2261223a7d'::bytea)$$) AS not_json,
       try($$SELECT idempotency.idem_fingerprint('\x7b2261223a312c2261223a327d'::bytea)$$) AS duplicate_name;
-- the filters work as in the text form
SELECT idempotency.idem_fingerprint('{"a": 1, "ts": 5}'::bytea, exclude => ARRAY['ts'])
       = idempotency.idem_fingerprint('{"a": 1}') AS excluded;

-- claimed: no answer, run the handler
SELECT c.outcome, a.status, a.headers, a.body
FROM idempotency.idem_claim('http/a', 'k1', '\x01') c, idempotency.idem_http_answer(c) a;
SELECT idempotency.idem_complete('http/a', 'k1', 1, 'pay_1', NULL, 201, '{"id": "pay_1"}',
                     '{"Location": "/v1/payments/pay_1", "content-type": "application/json",
                       "IDEMPOTENT-REPLAYED": "planted"}') AS completed;
-- replayed: the stored status, headers (a stored Idempotent-Replayed in any case is replaced)
-- and the exact body bytes
SELECT c.outcome, a.status, a.headers, convert_from(a.body, 'UTF8') AS body
FROM idempotency.idem_claim('http/a', 'k1', '\x01') c, idempotency.idem_http_answer(c) a;
-- mismatch: 422, a problem document
SELECT c.outcome, a.status, a.headers, convert_from(a.body, 'UTF8')::jsonb AS body
FROM idempotency.idem_claim('http/a', 'k1', '\x02') c, idempotency.idem_http_answer(c) a;
-- in_progress: 409, Retry-After the whole seconds to the lease's end (30 s lease)
SELECT outcome FROM idempotency.idem_claim('http/a', 'k2', '\x01', lease => '30 seconds');
SELECT c.outcome, a.status, a.headers - 'Retry-After' AS headers,
       (a.headers->>'Retry-After')::int BETWEEN 28 AND 30 AS retry_after_30,
       convert_from(a.body, 'UTF8')::jsonb AS body
FROM idempotency.idem_claim('http/a', 'k2', '\x01') c, idempotency.idem_http_answer(c) a;
-- wait => false behind an unfinished transaction: no lease known, Retry-After 1
SELECT a.status, a.headers->>'Retry-After' AS retry_after
FROM idempotency.idem_http_answer(ROW('in_progress', 1, NULL, NULL, NULL, NULL, NULL, NULL, NULL)::idempotency.idem_claim_result) a;
-- a lease that has just ended still says 1, never 0
SELECT a.headers->>'Retry-After' AS retry_after
FROM idempotency.idem_http_answer(ROW('in_progress', 1, NULL, NULL, NULL, now() - interval '1 minute', NULL, NULL, NULL)::idempotency.idem_claim_result) a;
-- a jsonb response without body bytes: its text, and Content-Type application/json unless stored
SELECT outcome FROM idempotency.idem_claim('http/a', 'k3');
SELECT idempotency.idem_complete('http/a', 'k3', 1, NULL, '{"b": [1, 2], "a": null}') AS completed;
SELECT a.status, a.headers, convert_from(a.body, 'UTF8') AS body
FROM idempotency.idem_claim('http/a', 'k3') c, idempotency.idem_http_answer(c) a;
SELECT outcome FROM idempotency.idem_claim('http/a', 'k4');
SELECT idempotency.idem_complete('http/a', 'k4', 1, NULL, '{"a": 1}', 200, NULL, '{"Content-Type": "application/vnd.x+json"}');
SELECT a.headers FROM idempotency.idem_claim('http/a', 'k4') c, idempotency.idem_http_answer(c) a;
-- nothing stored at all: 200, an empty body
SELECT outcome FROM idempotency.idem_claim('http/a', 'k5');
SELECT idempotency.idem_complete('http/a', 'k5', 1);
SELECT a.status, a.headers, length(a.body) AS body_bytes FROM idempotency.idem_claim('http/a', 'k5') c, idempotency.idem_http_answer(c) a;
-- a stored non-retryable failure replays like a result
SELECT outcome FROM idempotency.idem_claim('http/a', 'k6');
SELECT idempotency.idem_fail('http/a', 'k6', 1, false, NULL, 402, '{"error": "card_declined"}');
SELECT a.status, convert_from(a.body, 'UTF8') AS body FROM idempotency.idem_claim('http/a', 'k6') c, idempotency.idem_http_answer(c) a;
-- NULL in, NULLs out
SELECT * FROM idempotency.idem_http_answer(NULL::idempotency.idem_claim_result);

-- The key form (IK003: another attempt finished the operation): the same answers from the record
SELECT status, headers->>'Idempotent-Replayed' AS replayed, convert_from(body, 'UTF8') AS body
FROM idempotency.idem_http_answer('http/a', 'k1');
SELECT status, (headers->>'Retry-After')::int BETWEEN 28 AND 30 AS retry_after_30
FROM idempotency.idem_http_answer('http/a', 'k2');
SELECT status, convert_from(body, 'UTF8') AS body FROM idempotency.idem_http_answer('http/a', 'k6');
-- nothing to answer: no record, a retryable failure, a lease that ran out
SELECT status, headers, body FROM idempotency.idem_http_answer('http/a', 'absent');
SELECT outcome FROM idempotency.idem_claim('http/a', 'k7');
SELECT idempotency.idem_fail('http/a', 'k7', 1, true);
SELECT status, headers, body FROM idempotency.idem_http_answer('http/a', 'k7');
SELECT outcome FROM idempotency.idem_claim('http/a', 'k8', lease => '1 millisecond');
SELECT pg_sleep(0.01);
SELECT status, headers, body FROM idempotency.idem_http_answer('http/a', 'k8');
-- its arguments are checked as idem_lookup's: a NULL key is 22004, an empty one 22023
SELECT try($$SELECT idempotency.idem_http_answer('http/a', NULL)$$) AS null_key,
       try($$SELECT idempotency.idem_http_answer('http/a', '')$$) AS empty_key;
-- PUBLIC may compute the answer of a claim result, not read a key's record
SELECT has_function_privilege('public', 'idempotency.idem_http_answer(idempotency.idem_claim_result)', 'EXECUTE') AS claim_form,
       has_function_privilege('public', 'idempotency.idem_http_answer(text,text)', 'EXECUTE') AS key_form,
       has_function_privilege('public', 'idempotency.idem_fingerprint(bytea,text[],text[],boolean)', 'EXECUTE') AS fingerprint_bytea;
