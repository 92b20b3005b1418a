-- idem_canonical_json, idem_fingerprint, idem_uuid_v7, idem_uuid_v7_time, idem_hmac_sha256,
-- idem_secure_equal: exact outputs, the RFC 8785 vectors through jsonb and text, errors.
\pset null '<NULL>'
SET client_min_messages = warning;

-- fp_try(sql): runs sql and reports 'ok' or 'SQLSTATE: message'.
CREATE FUNCTION fp_try(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

-- canonical text: keys sorted, whitespace removed, numbers as ECMAScript prints them
SELECT idem_canonical_json('{"b": 1.0, "a": [1e2, "x", null, true, false], "": -0}'::jsonb);
SELECT idem_canonical_json('{"b": 1.0, "a": [1e2, "x", null, true, false], "": -0}'::text);
SELECT idem_canonical_json('[1, 1.0, 1.00, 1e0, 10e-1, -0, 0.0, 1e21, 1e-7, 0.000001, 123456789012345678]'::jsonb);
SELECT idem_canonical_json('[1e400]'::text, exact_numbers => true);
SELECT idem_canonical_json('[9007199254740993, 9007199254740992, 0.1000000000000000000001]'::jsonb);
SELECT idem_canonical_json('[9007199254740993, 9007199254740992, 0.1000000000000000000001]'::jsonb, true);
SELECT idem_canonical_json('"\u0001\b\t\n\f\r\u001f\"\\\/\u007f\u00e9\ud83d\ude00"'::jsonb);
-- scalars at the top level
SELECT idem_canonical_json('5.50'::jsonb), idem_canonical_json('"x"'::jsonb),
       idem_canonical_json('null'::jsonb), idem_canonical_json('true'::text);
-- UTF-16 key order: U+E000 sorts after U+1F600 (jsonb itself orders keys by length first)
SELECT idem_canonical_json(jsonb_build_object(U&'\E000', 1, U&'\+01F600', 2, 'é', 3, 'zz', 4, 'z', 5));
-- \u0000 in a string: jsonb cannot hold it, raw text can, and JCS writes it as \u0000
SELECT idem_canonical_json('{"a\u0000b": "x\u0000"}'::text);
SELECT fp_try($$SELECT '{"a\u0000b": 1}'::jsonb$$);

-- the six RFC 8785 vectors (../shared/vectors/jcs), through jsonb and through text
\set arrays_in `cat ../shared/vectors/jcs/input/arrays.json`
\set arrays_out `cat ../shared/vectors/jcs/output/arrays.json`
\set french_in `cat ../shared/vectors/jcs/input/french.json`
\set french_out `cat ../shared/vectors/jcs/output/french.json`
\set structures_in `cat ../shared/vectors/jcs/input/structures.json`
\set structures_out `cat ../shared/vectors/jcs/output/structures.json`
\set unicode_in `cat ../shared/vectors/jcs/input/unicode.json`
\set unicode_out `cat ../shared/vectors/jcs/output/unicode.json`
\set values_in `cat ../shared/vectors/jcs/input/values.json`
\set values_out `cat ../shared/vectors/jcs/output/values.json`
\set weird_in `cat ../shared/vectors/jcs/input/weird.json`
\set weird_out `cat ../shared/vectors/jcs/output/weird.json`
SELECT name, idem_canonical_json(i::jsonb) = o AS jsonb_ok, idem_canonical_json(i::text) = o AS text_ok,
       idem_fingerprint(i::jsonb) = sha256(convert_to(o, 'UTF8')) AS fp_jsonb_ok,
       idem_fingerprint(i::text) = sha256(convert_to(o, 'UTF8')) AS fp_text_ok,
       length(o) AS out_chars
FROM (VALUES ('arrays', :'arrays_in', :'arrays_out'), ('french', :'french_in', :'french_out'),
             ('structures', :'structures_in', :'structures_out'),
             ('unicode', :'unicode_in', :'unicode_out'), ('values', :'values_in', :'values_out'),
             ('weird', :'weird_in', :'weird_out')) v(name, i, o)
ORDER BY name;
SELECT idem_canonical_json(:'values_in'::text);

-- fingerprints: SHA-256 of the canonical bytes; retries re-serialised differently agree
SELECT idem_fingerprint('{"a":1}'::jsonb);
SELECT sha256('{"a":1}'::bytea) = idem_fingerprint('{"a":1}'::jsonb) AS same_as_sha256_of_canonical;
SELECT count(DISTINCT f) AS distinct_fingerprints, count(*) AS payloads FROM (
    SELECT idem_fingerprint(p::jsonb) AS f FROM unnest(ARRAY[
        '{"amount":1.0,"currency":"EUR","items":[{"sku":"x","qty":1e0}]}',
        '{ "items" : [ { "qty" : 1 , "sku" : "x" } ] , "currency" : "EUR" , "amount" : 1.00 }',
        '{"currency":"\u0045UR","amount":10e-1,"items":[{"qty":1,"sku":"x"}]}']) p
    UNION ALL
    SELECT idem_fingerprint(p::text) FROM unnest(ARRAY[
        '{"amount":1.0,"currency":"EUR","items":[{"sku":"x","qty":1e0}]}',
        '{ "items" : [ { "qty" : 1 , "sku" : "x" } ] , "currency" : "EUR" , "amount" : 1.00 }',
        '{"currency":"\u0045UR","amount":10e-1,"items":[{"qty":1,"sku":"x"}]}']) p) s;
-- a different request under the same key never passes as a retry
SELECT idem_fingerprint('{"amount":1,"currency":"EUR"}'::jsonb) = idem_fingerprint('{"amount":2,"currency":"EUR"}'::jsonb) AS amount_changed,
       idem_fingerprint('{"amount":1}'::jsonb) = idem_fingerprint('{"amount":"1"}'::jsonb) AS type_changed,
       idem_fingerprint('[1,2]'::jsonb) = idem_fingerprint('[2,1]'::jsonb) AS order_changed;
-- exact numbers: distinct values stay distinct, equal values still agree
SELECT idem_fingerprint('9007199254740993'::jsonb) = idem_fingerprint('9007199254740992'::jsonb) AS strict_collapses,
       idem_fingerprint('9007199254740993'::jsonb, exact_numbers => true) = idem_fingerprint('9007199254740992'::jsonb, exact_numbers => true) AS exact_collapses,
       idem_fingerprint('[1, -0]'::jsonb, exact_numbers => true) = idem_fingerprint('[1e0, 0.00]'::text, exact_numbers => true) AS exact_same_value;
-- an unknown-typed literal resolves to the text overload (strict raw-text parsing)
SELECT idem_fingerprint('{"a":1}') = idem_fingerprint('{"a":1}'::jsonb) AS unknown_literal_ok,
       fp_try($$SELECT idem_fingerprint('{"a":1,"a":2}')$$) AS unknown_literal_is_text;
SELECT idem_canonical_json('{"a":1,"a":2}'::jsonb) AS jsonb_keeps_last_duplicate;

-- include / exclude (paths in the #> operator's text-array form)
\set req '{"amount":5,"currency":"EUR","meta":{"trace_id":"t1","source":"web"},"ts":1,"items":[{"sku":"a","qty":1},{"sku":"b","qty":2}]}'
SELECT idem_fingerprint(:'req'::jsonb, exclude => ARRAY['{meta,trace_id}', 'ts'])
     = sha256(convert_to('{"amount":5,"currency":"EUR","items":[{"qty":1,"sku":"a"},{"qty":2,"sku":"b"}],"meta":{"source":"web"}}', 'UTF8')) AS exclude_ok;
SELECT idem_fingerprint(:'req'::jsonb, include => '{amount,currency}')
     = sha256(convert_to('{"amount":5,"currency":"EUR"}', 'UTF8')) AS include_ok;
SELECT idem_fingerprint(:'req'::jsonb, include => ARRAY['{items,1,sku}'])
     = sha256(convert_to('{"items":[{"sku":"b"}]}', 'UTF8')) AS include_index_ok;
SELECT idem_fingerprint(:'req'::jsonb, exclude => ARRAY['{meta,trace_id}'], include => ARRAY['meta', 'amount'])
     = sha256(convert_to('{"amount":5,"meta":{"source":"web"}}', 'UTF8')) AS both_ok;
SELECT idem_fingerprint(:'req'::jsonb, exclude => ARRAY['{meta,trace_id}', 'ts'])
     = idem_fingerprint('{"ts":99,"meta":{"source":"web","trace_id":"other"},"currency":"EUR","amount":5.0,"items":[{"qty":1,"sku":"a"},{"sku":"b","qty":2}]}'::text,
                        exclude => ARRAY['{meta,trace_id}', 'ts']) AS volatile_members_ignored;
-- missing paths are ignored; empty arrays mean "no filter"
SELECT idem_fingerprint(:'req'::jsonb, exclude => ARRAY['nope', '{items,9}', '{amount,x}']) = idem_fingerprint(:'req'::jsonb) AS missing_ignored,
       idem_fingerprint(:'req'::jsonb, exclude => '{}', include => '{}') = idem_fingerprint(:'req'::jsonb) AS empty_arrays_ok,
       idem_fingerprint(:'req'::jsonb, include => '{nope}') = sha256('{}'::bytea) AS nothing_included;
SELECT fp_try($$SELECT idem_fingerprint('{"a":1}'::jsonb, exclude => ARRAY['{}'])$$);
SELECT fp_try($$SELECT idem_fingerprint('{"a":1}'::jsonb, exclude => ARRAY[NULL::text])$$);
SELECT fp_try($$SELECT idem_fingerprint('{"a":1}'::jsonb, exclude => ARRAY['{a,NULL}'])$$);
SELECT fp_try($$SELECT idem_fingerprint('{"a":1}'::jsonb, include => ARRAY['{a,b']) $$);
SELECT fp_try($$SELECT idem_fingerprint('{"a":1}'::jsonb, include => '{{a},{b}}')$$);

-- NULL handling
SELECT idem_fingerprint(NULL::jsonb) AS null_jsonb, idem_fingerprint(NULL::text) AS null_text,
       idem_canonical_json(NULL::jsonb) AS canon_null, idem_fingerprint('{"a":1}'::jsonb, NULL, NULL) IS NOT NULL AS null_filters_ok;
SELECT fp_try($$SELECT idem_fingerprint('{"a":1}'::jsonb, exact_numbers => NULL)$$);

-- errors: what I-JSON forbids in raw text, with SQLSTATEs
SELECT q, fp_try(format('SELECT idem_fingerprint(%L::text)', q)) FROM unnest(ARRAY[
    '{"a":1,"a":2}', '{"a":1,"\u0061":2}', '["\ud800"]', '"\udc00x"', '[NaN]', '{"x":-Infinity}',
    '[1e400]', '[1,]', '{"a" 1}', '01', '', '"a' || chr(9) || 'b"', '[1] x']) q;
SELECT fp_try($$SELECT idem_canonical_json('[1e400]'::jsonb)$$);
SELECT fp_try($$SELECT idem_canonical_json(repeat('[', 100000) || repeat(']', 100000))$$);
SELECT fp_try($$SELECT idem_fingerprint(repeat('{"a":', 10001) || '1' || repeat('}', 10001))$$);
SELECT idem_canonical_json(repeat('[', 10000) || repeat(']', 10000)) = repeat('[', 10000) || repeat(']', 10000) AS depth_10000_ok;
SELECT idem_canonical_json((repeat('{"b":0,"a":', 5000) || '1' || repeat('}', 5000))::jsonb)
     = repeat('{"a":', 5000) || '1' || repeat(',"b":0}', 5000) AS deep_jsonb_ok;
-- invalid UTF-8 cannot reach a UTF8 database as text; convert_from rejects it first (22021)
SELECT fp_try($$SELECT idem_fingerprint(convert_from('\x22c0af22'::bytea, 'UTF8'))$$);

-- UUIDv7: version 7, variant 10, strictly increasing over 10,000 calls in one statement
SELECT count(*) AS n,
       bool_and(substr(u::text, 15, 1) = '7') AS version_7,
       bool_and(substr(u::text, 20, 1) IN ('8', '9', 'a', 'b')) AS variant_10,
       bool_and(prev IS NULL OR u > prev) AS strictly_increasing,
       count(DISTINCT u) AS distinct_values,
       bool_and(idem_uuid_v7_time(u) BETWEEN now() - interval '1 minute' AND clock_timestamp() + interval '10 seconds') AS time_now
FROM (SELECT u, lag(u) OVER (ORDER BY i) AS prev
      FROM (SELECT i, idem_uuid_v7() AS u FROM generate_series(1, 10000) i) g) s;
-- RFC 9562 Appendix A.6
SELECT idem_uuid_v7_time('017f22e2-79b0-7cc3-98c4-dc0c0c07398f') AT TIME ZONE 'UTC' AS a6_time;
SELECT fp_try($$SELECT idem_uuid_v7_time('f81d4fae-7dec-11d0-a765-00a0c91e6bf6')$$) AS v1_uuid;
SELECT fp_try($$SELECT idem_uuid_v7_time('017f22e2-79b0-7cc3-c8c4-dc0c0c07398f')$$) AS wrong_variant;

-- HMAC-SHA256: RFC 4231 test case 2 (and case 1)
SELECT idem_hmac_sha256('Jefe'::bytea, 'what do ya want for nothing?'::bytea);
SELECT idem_hmac_sha256('\x0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b'::bytea, 'Hi There'::bytea);
SELECT idem_hmac_sha256(NULL, 'x'::bytea) AS null_key;
-- constant-time comparison
SELECT idem_secure_equal('\x0102'::bytea, '\x0102'::bytea) AS same,
       idem_secure_equal('\x0102'::bytea, '\x0103'::bytea) AS differs,
       idem_secure_equal('\x0102'::bytea, '\x010200'::bytea) AS longer,
       idem_secure_equal(''::bytea, ''::bytea) AS empty,
       idem_secure_equal(idem_hmac_sha256('k', 'm'), idem_hmac_sha256('k', 'm')) AS hmac_equal;

-- function properties
SELECT p.oid::regprocedure AS function, p.provolatile, p.proisstrict, p.proparallel
FROM pg_proc p WHERE p.proname IN ('idem_canonical_json', 'idem_fingerprint', 'idem_uuid_v7',
    'idem_uuid_v7_time', 'idem_hmac_sha256', 'idem_secure_equal')
ORDER BY 1::text;

DROP FUNCTION fp_try(text);
