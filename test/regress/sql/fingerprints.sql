-- idem_canonical_json, idem_fingerprint: exact outputs, the RFC 8785 vectors through jsonb and
-- text, errors. (idem_uuid_v7, idem_hmac_sha256, idem_secure_equal: test/regress/sql/utilities.sql.)
\pset null '<NULL>'
SET client_min_messages = warning;

\i test/regress/helpers.sql

-- canonical text: keys sorted, whitespace removed, numbers as ECMAScript prints them
SELECT idempotency.idem_canonical_json('{"b": 1.0, "a": [1e2, "x", null, true, false], "": -0}'::jsonb);
SELECT idempotency.idem_canonical_json('{"b": 1.0, "a": [1e2, "x", null, true, false], "": -0}'::text);
SELECT idempotency.idem_canonical_json('[1, 1.0, 1.00, 1e0, 10e-1, -0, 0.0, 1e21, 1e-7, 0.000001, 123456789012345678]'::jsonb);
SELECT idempotency.idem_canonical_json('[1e400]'::text, exact_numbers => true);
SELECT idempotency.idem_canonical_json('[9007199254740993, 9007199254740992, 0.1000000000000000000001]'::jsonb);
SELECT idempotency.idem_canonical_json('[9007199254740993, 9007199254740992, 0.1000000000000000000001]'::jsonb, true);
SELECT idempotency.idem_canonical_json('"\u0001\b\t\n\f\r\u001f\"\\\/\u007f\u00e9\ud83d\ude00"'::jsonb);
-- scalars at the top level
SELECT idempotency.idem_canonical_json('5.50'::jsonb), idempotency.idem_canonical_json('"x"'::jsonb),
       idempotency.idem_canonical_json('null'::jsonb), idempotency.idem_canonical_json('true'::text);
-- UTF-16 key order: U+E000 sorts after U+1F600 (jsonb itself orders keys by length first)
SELECT idempotency.idem_canonical_json(jsonb_build_object(U&'\E000', 1, U&'\+01F600', 2, 'é', 3, 'zz', 4, 'z', 5));
-- \u0000 in a string: jsonb cannot hold it, raw text can, and JCS writes it as \u0000
SELECT idempotency.idem_canonical_json('{"a\u0000b": "x\u0000"}'::text);
SELECT try($$SELECT '{"a\u0000b": 1}'::jsonb$$);

-- the six RFC 8785 vectors (test/vectors/jcs), through jsonb and through text
\set arrays_in `cat test/vectors/jcs/input/arrays.json`
\set arrays_out `cat test/vectors/jcs/output/arrays.json`
\set french_in `cat test/vectors/jcs/input/french.json`
\set french_out `cat test/vectors/jcs/output/french.json`
\set structures_in `cat test/vectors/jcs/input/structures.json`
\set structures_out `cat test/vectors/jcs/output/structures.json`
\set unicode_in `cat test/vectors/jcs/input/unicode.json`
\set unicode_out `cat test/vectors/jcs/output/unicode.json`
\set values_in `cat test/vectors/jcs/input/values.json`
\set values_out `cat test/vectors/jcs/output/values.json`
\set weird_in `cat test/vectors/jcs/input/weird.json`
\set weird_out `cat test/vectors/jcs/output/weird.json`
SELECT name, idempotency.idem_canonical_json(i::jsonb) = o AS jsonb_ok, idempotency.idem_canonical_json(i::text) = o AS text_ok,
       idempotency.idem_fingerprint(i::jsonb) = sha256(convert_to(o, 'UTF8')) AS fp_jsonb_ok,
       idempotency.idem_fingerprint(i::text) = sha256(convert_to(o, 'UTF8')) AS fp_text_ok,
       length(o) AS out_chars
FROM (VALUES ('arrays', :'arrays_in', :'arrays_out'), ('french', :'french_in', :'french_out'),
             ('structures', :'structures_in', :'structures_out'),
             ('unicode', :'unicode_in', :'unicode_out'), ('values', :'values_in', :'values_out'),
             ('weird', :'weird_in', :'weird_out')) v(name, i, o)
ORDER BY name;
SELECT idempotency.idem_canonical_json(:'values_in'::text);
-- the direct jsonb walker (no filters) against the raw-text parser and the iterator path (any
-- filter, even one that matches nothing, takes the iterator path)
SELECT name, idempotency.idem_canonical_json(i::jsonb) = idempotency.idem_canonical_json(i::jsonb::text) AS walker_eq_text,
       idempotency.idem_fingerprint(i::jsonb) = idempotency.idem_fingerprint(i::jsonb, exclude => ARRAY['{no,such,path}']) AS walker_eq_iterator,
       idempotency.idem_canonical_json(i::jsonb, true) = idempotency.idem_canonical_json(i::jsonb::text, true) AS exact_eq
FROM (VALUES ('arrays', :'arrays_in'), ('french', :'french_in'), ('structures', :'structures_in'),
             ('unicode', :'unicode_in'), ('values', :'values_in'), ('weird', :'weird_in')) v(name, i)
ORDER BY name;

-- Generated documents: keys and strings from characters where UTF-8 byte order and UTF-16 order
-- disagree (U+E000..U+FFFF against supplementary-plane characters), escapes and control
-- characters, nested arrays and objects (small, > 16 and > 24 members), numbers of every layout.
-- The walker must give the text path's canonical form byte for byte, in both number modes.
SELECT setseed(0.4242);
CREATE FUNCTION fp_gen_str() RETURNS text LANGUAGE sql VOLATILE AS $$
    SELECT string_agg((ARRAY['a', 'b', 'z', 'A', '0', ' ', '/', 'é', 'ÿ', U&'\0100', U&'\07FF',
                             U&'\0800', U&'\D7FF', U&'\E000', U&'\E001', U&'\FF01', U&'\FFFD',
                             U&'\FFFF', U&'\+010000', U&'\+01F600', U&'\+01F601', U&'\+10FFFF',
                             '"', '\', chr(1), chr(8), chr(9), chr(10), chr(31), chr(127)])
                      [1 + floor(random() * 30)::int], '')
    FROM generate_series(1, 1 + floor(random() * 4)::int)
$$;
CREATE FUNCTION fp_gen_num() RETURNS jsonb LANGUAGE sql VOLATILE AS $$
    SELECT to_jsonb(CASE floor(random() * 12)::int
        WHEN 0 THEN floor(random() * 1000)::numeric
        WHEN 1 THEN -floor(random() * 1e9)::numeric
        WHEN 2 THEN round((random() * 100000)::numeric, floor(random() * 6)::int)
        WHEN 3 THEN round((random() - 0.5)::numeric, 20)
        WHEN 4 THEN (floor(random() * 1e15)::numeric * 1e10)
        WHEN 5 THEN (random() * 1e-9)::numeric
        WHEN 6 THEN floor(random() * 1e17)::numeric
        WHEN 7 THEN (ARRAY[0, 1e21, 1e-7, 0.000001, 9007199254740993, 123456789012345678,
                           0.1000000000000000000001, 1.5e-310, 1e308, -1e-6, 5e-324, 1e-400])
                     [1 + floor(random() * 12)::int]
        WHEN 8 THEN round(random()::numeric, 2) * 10::numeric ^ floor(random() * 40)::int
        WHEN 9 THEN (random()::numeric * 1e25)
        WHEN 10 THEN -0.0::numeric
        ELSE (floor(random() * 1e6)::numeric / 1e3) END)
$$;
CREATE FUNCTION fp_gen(depth int) RETURNS jsonb LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    r float8 := random();
    n int;
    o jsonb;
BEGIN
    IF depth <= 0 OR r < 0.35 THEN
        r := random();
        RETURN CASE WHEN r < 0.4 THEN fp_gen_num() WHEN r < 0.8 THEN to_jsonb(fp_gen_str())
                    WHEN r < 0.87 THEN 'true' WHEN r < 0.94 THEN 'false' ELSE 'null' END;
    END IF;
    n := CASE WHEN depth >= 3 AND random() < 0.15 THEN 17 + floor(random() * 30)::int
              ELSE floor(random() * 5)::int END;
    IF r < 0.6 THEN
        SELECT coalesce(jsonb_agg(fp_gen(depth - 1)), '[]') INTO o FROM generate_series(1, n);
    ELSE
        o := '{}';
        FOR i IN 1 .. n LOOP
            o := o || jsonb_build_object(fp_gen_str(), fp_gen(depth - 1));
        END LOOP;
    END IF;
    RETURN o;
END $$;
CREATE TEMP TABLE fp_docs AS SELECT i, fp_gen(4) AS j FROM generate_series(1, 400) i;
SELECT count(*) AS docs,
       count(*) FILTER (WHERE jsonb_typeof(j) = 'object') > 100 AS has_objects,
       count(*) FILTER (WHERE j::text ~ U&'[\E000-\FFFF]' AND j::text ~ U&'[\+010000-\+10FFFF]') > 10 AS has_both_planes,
       count(*) FILTER (WHERE idempotency.idem_canonical_json(j) IS DISTINCT FROM idempotency.idem_canonical_json(j::text)) AS strict_mismatches,
       count(*) FILTER (WHERE idempotency.idem_canonical_json(j, true) IS DISTINCT FROM idempotency.idem_canonical_json(j::text, true)) AS exact_mismatches,
       count(*) FILTER (WHERE idempotency.idem_fingerprint(j) IS DISTINCT FROM idempotency.idem_fingerprint(j, exclude => ARRAY['{no,such,path}'])) AS iterator_mismatches,
       count(*) FILTER (WHERE idempotency.idem_fingerprint(j) IS DISTINCT FROM sha256(convert_to(idempotency.idem_canonical_json(j::text), 'UTF8'))) AS fingerprint_mismatches
FROM fp_docs;
-- keys that differ only in the plane of their first character, in one object
SELECT idempotency.idem_canonical_json(o) = idempotency.idem_canonical_json(o::text) AS planes_ok,
       regexp_replace(idempotency.idem_canonical_json(o), '"[^"]*":', '', 'g') AS values_in_utf16_key_order
FROM (SELECT jsonb_object_agg(k, ord) AS o
      FROM unnest(ARRAY[U&'\FFFF', U&'\+010000', U&'\E000x', U&'\+01F600', U&'\D7FF', 'z',
                        U&'\E000', U&'\+10FFFF', U&'\FF01a', U&'\+01F600a'])
           WITH ORDINALITY AS t(k, ord)) s;
-- long strings (escaped in pieces) and numbers the walker hands to numeric_out
SELECT idempotency.idem_canonical_json(j) = idempotency.idem_canonical_json(j::text) AS long_ok, length(idempotency.idem_canonical_json(j)) AS len
FROM (SELECT jsonb_build_object(repeat('k"', 40000), repeat(E'a\u0001\\"é' || U&'\+01F600', 30000),
                                'n', 1.00000000000000000000000000000000000000000000000000000000000000000001) AS j) s;
SELECT idempotency.idem_canonical_json(j, true) = idempotency.idem_canonical_json(j::text, true) AS big_numbers_ok
FROM (SELECT jsonb_build_array(10::numeric ^ 300, -(10::numeric ^ 200 + 1), 1e-300, 2::numeric ^ 400) AS j) s;
-- the walker leaves documents deeper than 200 levels to the iterator path
SELECT d, idempotency.idem_canonical_json(j) = idempotency.idem_canonical_json(j::text) AS ok
FROM (SELECT d, (repeat('{"b":[0,', d) || '1' || repeat(']}', d))::jsonb AS j FROM unnest(ARRAY[99, 100, 101, 150]) d) s
ORDER BY d;
DROP FUNCTION fp_gen(int);
DROP FUNCTION fp_gen_num();
DROP FUNCTION fp_gen_str();

-- fingerprints: SHA-256 of the canonical bytes; retries re-serialised differently agree
SELECT idempotency.idem_fingerprint('{"a":1}'::jsonb);
SELECT sha256('{"a":1}'::bytea) = idempotency.idem_fingerprint('{"a":1}'::jsonb) AS same_as_sha256_of_canonical;
SELECT count(DISTINCT f) AS distinct_fingerprints, count(*) AS payloads FROM (
    SELECT idempotency.idem_fingerprint(p::jsonb) AS f FROM unnest(ARRAY[
        '{"amount":1.0,"currency":"EUR","items":[{"sku":"x","qty":1e0}]}',
        '{ "items" : [ { "qty" : 1 , "sku" : "x" } ] , "currency" : "EUR" , "amount" : 1.00 }',
        '{"currency":"\u0045UR","amount":10e-1,"items":[{"qty":1,"sku":"x"}]}']) p
    UNION ALL
    SELECT idempotency.idem_fingerprint(p::text) FROM unnest(ARRAY[
        '{"amount":1.0,"currency":"EUR","items":[{"sku":"x","qty":1e0}]}',
        '{ "items" : [ { "qty" : 1 , "sku" : "x" } ] , "currency" : "EUR" , "amount" : 1.00 }',
        '{"currency":"\u0045UR","amount":10e-1,"items":[{"qty":1,"sku":"x"}]}']) p) s;
-- a different request under the same key never passes as a retry
SELECT idempotency.idem_fingerprint('{"amount":1,"currency":"EUR"}'::jsonb) = idempotency.idem_fingerprint('{"amount":2,"currency":"EUR"}'::jsonb) AS amount_changed,
       idempotency.idem_fingerprint('{"amount":1}'::jsonb) = idempotency.idem_fingerprint('{"amount":"1"}'::jsonb) AS type_changed,
       idempotency.idem_fingerprint('[1,2]'::jsonb) = idempotency.idem_fingerprint('[2,1]'::jsonb) AS order_changed;
-- exact numbers: distinct values stay distinct, equal values still agree
SELECT idempotency.idem_fingerprint('9007199254740993'::jsonb) = idempotency.idem_fingerprint('9007199254740992'::jsonb) AS strict_collapses,
       idempotency.idem_fingerprint('9007199254740993'::jsonb, exact_numbers => true) = idempotency.idem_fingerprint('9007199254740992'::jsonb, exact_numbers => true) AS exact_collapses,
       idempotency.idem_fingerprint('[1, -0]'::jsonb, exact_numbers => true) = idempotency.idem_fingerprint('[1e0, 0.00]'::text, exact_numbers => true) AS exact_same_value;
-- an unknown-typed literal resolves to the text overload (strict raw-text parsing)
SELECT idempotency.idem_fingerprint('{"a":1}') = idempotency.idem_fingerprint('{"a":1}'::jsonb) AS unknown_literal_ok,
       try($$SELECT idempotency.idem_fingerprint('{"a":1,"a":2}')$$) AS unknown_literal_is_text;
SELECT idempotency.idem_canonical_json('{"a":1,"a":2}'::jsonb) AS jsonb_keeps_last_duplicate;

-- include / exclude (paths in the #> operator's text-array form)
\set req '{"amount":5,"currency":"EUR","meta":{"trace_id":"t1","source":"web"},"ts":1,"items":[{"sku":"a","qty":1},{"sku":"b","qty":2}]}'
SELECT idempotency.idem_fingerprint(:'req'::jsonb, exclude => ARRAY['{meta,trace_id}', 'ts'])
     = sha256(convert_to('{"amount":5,"currency":"EUR","items":[{"qty":1,"sku":"a"},{"qty":2,"sku":"b"}],"meta":{"source":"web"}}', 'UTF8')) AS exclude_ok;
SELECT idempotency.idem_fingerprint(:'req'::jsonb, include => '{amount,currency}')
     = sha256(convert_to('{"amount":5,"currency":"EUR"}', 'UTF8')) AS include_ok;
SELECT idempotency.idem_fingerprint(:'req'::jsonb, include => ARRAY['{items,1,sku}'])
     = sha256(convert_to('{"items":[{"sku":"b"}]}', 'UTF8')) AS include_index_ok;
SELECT idempotency.idem_fingerprint(:'req'::jsonb, exclude => ARRAY['{meta,trace_id}'], include => ARRAY['meta', 'amount'])
     = sha256(convert_to('{"amount":5,"meta":{"source":"web"}}', 'UTF8')) AS both_ok;
SELECT idempotency.idem_fingerprint(:'req'::jsonb, exclude => ARRAY['{meta,trace_id}', 'ts'])
     = idempotency.idem_fingerprint('{"ts":99,"meta":{"source":"web","trace_id":"other"},"currency":"EUR","amount":5.0,"items":[{"qty":1,"sku":"a"},{"sku":"b","qty":2}]}'::text,
                        exclude => ARRAY['{meta,trace_id}', 'ts']) AS volatile_members_ignored;
-- missing paths are ignored; empty arrays mean "no filter"
SELECT idempotency.idem_fingerprint(:'req'::jsonb, exclude => ARRAY['nope', '{items,9}', '{amount,x}']) = idempotency.idem_fingerprint(:'req'::jsonb) AS missing_ignored,
       idempotency.idem_fingerprint(:'req'::jsonb, exclude => '{}', include => '{}') = idempotency.idem_fingerprint(:'req'::jsonb) AS empty_arrays_ok,
       idempotency.idem_fingerprint(:'req'::jsonb, include => '{nope}') = sha256('{}'::bytea) AS nothing_included;
SELECT try($$SELECT idempotency.idem_fingerprint('{"a":1}'::jsonb, exclude => ARRAY['{}'])$$);
SELECT try($$SELECT idempotency.idem_fingerprint('{"a":1}'::jsonb, exclude => ARRAY[NULL::text])$$);
SELECT try($$SELECT idempotency.idem_fingerprint('{"a":1}'::jsonb, exclude => ARRAY['{a,NULL}'])$$);
SELECT try($$SELECT idempotency.idem_fingerprint('{"a":1}'::jsonb, include => ARRAY['{a,b']) $$);
SELECT try($$SELECT idempotency.idem_fingerprint('{"a":1}'::jsonb, include => '{{a},{b}}')$$);

-- NULL handling
SELECT idempotency.idem_fingerprint(NULL::jsonb) AS null_jsonb, idempotency.idem_fingerprint(NULL::text) AS null_text,
       idempotency.idem_canonical_json(NULL::jsonb) AS canon_null, idempotency.idem_fingerprint('{"a":1}'::jsonb, NULL, NULL) IS NOT NULL AS null_filters_ok;
SELECT try($$SELECT idempotency.idem_fingerprint('{"a":1}'::jsonb, exact_numbers => NULL)$$);

-- errors: what I-JSON forbids in raw text, with SQLSTATEs
SELECT q, try(format('SELECT idempotency.idem_fingerprint(%L::text)', q)) FROM unnest(ARRAY[
    '{"a":1,"a":2}', '{"a":1,"\u0061":2}', '["\ud800"]', '"\udc00x"', '[NaN]', '{"x":-Infinity}',
    '[1e400]', '[1,]', '{"a" 1}', '01', '', '"a' || chr(9) || 'b"', '[1] x']) q;
SELECT try($$SELECT idempotency.idem_canonical_json('[1e400]'::jsonb)$$);
SELECT try($$SELECT idempotency.idem_canonical_json(repeat('[', 100000) || repeat(']', 100000))$$);
SELECT try($$SELECT idempotency.idem_fingerprint(repeat('{"a":', 10001) || '1' || repeat('}', 10001))$$);
SELECT idempotency.idem_canonical_json(repeat('[', 10000) || repeat(']', 10000)) = repeat('[', 10000) || repeat(']', 10000) AS depth_10000_ok;
SELECT idempotency.idem_canonical_json((repeat('{"b":0,"a":', 5000) || '1' || repeat('}', 5000))::jsonb)
     = repeat('{"a":', 5000) || '1' || repeat(',"b":0}', 5000) AS deep_jsonb_ok;
-- invalid UTF-8 cannot reach a UTF8 database as text; convert_from rejects it first (22021)
SELECT try($$SELECT idempotency.idem_fingerprint(convert_from('\x22c0af22'::bytea, 'UTF8'))$$);
-- invalid UTF-8 in the bytea form, inside a string and outside one: 22021 naming the first
-- invalid sequence, also where the bytes are malformed JSON besides (text that is not UTF-8
-- cannot be read as JSON at all); the same through the streaming path (any filter) and in exact
-- mode
CREATE FUNCTION fp_error(doc bytea, exclude text[] DEFAULT NULL, exact boolean DEFAULT false)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    state text;
    message text;
    detail text;
BEGIN
    PERFORM idempotency.idem_fingerprint(doc, exclude, exact_numbers => exact);
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT,
                            detail = PG_EXCEPTION_DETAIL;
    RETURN state || ': ' || message || ' (' || detail || ')';
END $$;
SELECT encode(seq, 'hex') AS seq, place, fp_error(doc) AS error,
       fp_error(doc, exclude => '{zz}') = fp_error(doc) AS streaming_same,
       fp_error(doc, exact => true) = fp_error(doc) AS exact_same
FROM (VALUES (1, '\xff'::bytea), (2, '\xc0af'), (3, '\xeda080'), (4, '\xe282')) s(i, seq),
     LATERAL (VALUES
        (1, 'in a string', convert_to('{"a":"', 'UTF8') || seq || convert_to('"}', 'UTF8')),
        (2, 'in a name', convert_to('{"', 'UTF8') || seq || convert_to('":1}', 'UTF8')),
        (3, 'alone', seq),
        (4, 'after {"a":1}', convert_to('{"a":1}', 'UTF8') || seq),
        (5, 'before a value', convert_to('[', 'UTF8') || seq || convert_to('1]', 'UTF8')),
        (6, 'after [1,]', convert_to('[1,]', 'UTF8') || seq)) p(j, place, doc)
ORDER BY i, j;
-- valid UTF-8 outside a string is a grammar error (22P02), as before
SELECT fp_error(convert_to('{"a":1}é', 'UTF8')) AS after_value, fp_error(convert_to('[€]', 'UTF8')) AS as_value;
-- the error in full
\set SHOW_CONTEXT never
SELECT idempotency.idem_fingerprint(convert_to('{"amount": 100, "note": "', 'UTF8') || '\xe282'::bytea || convert_to('"}', 'UTF8'));
\set SHOW_CONTEXT errors
DROP FUNCTION fp_error(bytea, text[], boolean);

-- function properties
SELECT p.oid::regprocedure AS function, p.provolatile, p.proisstrict, p.proparallel
FROM pg_proc p WHERE p.proname IN ('idem_canonical_json', 'idem_fingerprint')
ORDER BY p.oid::regprocedure::text COLLATE "C";

DROP FUNCTION try(text, boolean);
