-- Webhook signatures: Standard Webhooks and Stripe-style headers, verify-and-receive.
\set VERBOSITY default
SET client_min_messages = warning;
\i test/regress/helpers.sql
-- the published Standard Webhooks vector (test/vectors/README.md)
\set secret '''whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'''
\set msg_id '''msg_p5jXN8AQM9LWM0D4loKWxJek'''
\set ts '''1614265330'''
\set body '''{"test": 2432232314}'''
\set sig '''v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE='''
\set at 'to_timestamp(1614265330)'

SELECT idempotency.idem_webhook_sign_standard(:secret, :msg_id, :ts, :body) = :sig AS vector_signed;
SELECT idempotency.idem_webhook_verify_standard(:secret, :msg_id, :ts, :body, :sig, now => :at) AS text_payload,
       idempotency.idem_webhook_verify_standard(:secret, :msg_id, :ts, convert_to(:body, 'UTF8'), :sig,
                                    now => :at) AS bytea_payload,
       idempotency.idem_webhook_verify_standard(ARRAY[:secret], :msg_id, :ts, :body, :sig,
                                    now => :at) AS secret_array;

-- anything changed: not valid
SELECT idempotency.idem_webhook_verify_standard(:secret, :msg_id, :ts, '{"test": 2432232315}', :sig,
                                    now => :at) AS other_body,
       idempotency.idem_webhook_verify_standard(:secret, 'msg_other', :ts, :body, :sig,
                                    now => :at) AS other_id,
       idempotency.idem_webhook_verify_standard(:secret, :msg_id, '1614265331', :body, :sig,
                                    now => :at) AS other_timestamp,
       idempotency.idem_webhook_verify_standard('whsec_' || encode('another key of 24 bytes.', 'base64'), :msg_id, :ts,
                                    :body, :sig, now => :at) AS other_secret;
-- a body that differs in any byte does not verify: jsonb::text re-serialises (spacing, key
-- order), so verify the raw text or bytea as received, never jsonb
SELECT idempotency.idem_webhook_verify_standard(:secret, :msg_id, :ts, '{"test":2432232314}', :sig,
                                    now => :at) AS compact_body;

-- tolerance: 300 s by default, in both directions, inclusive
SELECT idempotency.idem_webhook_verify_standard(:secret, :msg_id, :ts, :body, :sig,
                                    now => :at + interval '300 s') AS plus_300,
       idempotency.idem_webhook_verify_standard(:secret, :msg_id, :ts, :body, :sig,
                                    now => :at - interval '300 s') AS minus_300,
       idempotency.idem_webhook_verify_standard(:secret, :msg_id, :ts, :body, :sig,
                                    now => :at + interval '301 s') AS plus_301,
       idempotency.idem_webhook_verify_standard(:secret, :msg_id, :ts, :body, :sig,
                                    now => :at - interval '301 s') AS minus_301,
       idempotency.idem_webhook_verify_standard(:secret, :msg_id, :ts, :body, :sig, interval '1 hour',
                                    :at + interval '3000 s') AS wider;
SET idempotency.webhook_tolerance = '10s';
SELECT idempotency.idem_webhook_verify_standard(:secret, :msg_id, :ts, :body, :sig,
                                    now => :at + interval '11 s') AS setting_10s;
RESET idempotency.webhook_tolerance;
-- without now: the server clock (the vector is from 2021)
SELECT idempotency.idem_webhook_verify_standard(:secret, :msg_id, :ts, :body, :sig) AS vector_today;

-- several signatures (space-separated) and key rotation (several secrets)
SELECT idempotency.idem_webhook_verify_standard(:secret, :msg_id, :ts, :body,
           'v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= v1a,c2lnbmF0dXJl ' || :sig,
           now => :at) AS several_signatures,
       idempotency.idem_webhook_verify_standard(ARRAY['whsec_' || encode('the new key of 24 bytes.', 'base64'), :secret],
                                    :msg_id, :ts, :body, :sig, now => :at) AS old_secret_kept,
       idempotency.idem_webhook_verify_standard(ARRAY['whsec_' || encode('the new key of 24 bytes.', 'base64'), :secret],
           :msg_id, :ts, :body,
           idempotency.idem_webhook_sign_standard('whsec_' || encode('the new key of 24 bytes.', 'base64'), :msg_id, :ts,
                                      :body), now => :at) AS new_secret,
       idempotency.idem_webhook_verify_standard(:secret, :msg_id, :ts, :body, 'v1a,' || substr(:sig, 4),
                                    now => :at) AS only_other_versions;

-- what the sender sent, malformed or missing: false, no error (these raised 22023 /
-- 22004 before); the receiver's own mistakes: 22023 / 22004, the secret never in a message
SELECT idempotency.idem_webhook_verify_standard(:secret, 'msg_1', '1614265330', 'x', '') AS empty_header,
       idempotency.idem_webhook_verify_standard(:secret, 'msg_1', '1614265330', 'x', 'g0hM9SsE+OTPJTGt')
           AS no_version,
       idempotency.idem_webhook_verify_standard(:secret, 'msg_1', '16142653.30', 'x', 'v1,abc=')
           AS bad_timestamp,
       idempotency.idem_webhook_verify_standard(:secret, 'msg_1', '1614265330', 'x', NULL) AS null_header;
SELECT try($$SELECT idempotency.idem_webhook_verify_standard('whsec_Top$ecret!', 'msg_1',
    '1614265330', 'x', 'v1,abc=')$$) AS bad_secret;
SELECT try($$SELECT idempotency.idem_webhook_verify_standard(ARRAY[]::text[], 'msg_1',
    '1614265330', 'x', 'v1,abc=')$$) AS no_secrets;
SELECT try($$SELECT idempotency.idem_webhook_verify_standard(ARRAY['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', NULL],
    'msg_1', '1614265330', 'x', 'v1,abc=')$$) AS null_secret;
SELECT try($$SELECT idempotency.idem_webhook_verify_standard('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
    'msg_1', '1614265330', 'x', 'v1,abc=', interval '-1 s')$$) AS negative_tolerance;
SELECT idempotency.idem_webhook_verify_standard('whsec_Top$ecret!', 'msg_1', '1614265330', 'x', 'v1,abc=');

-- Stripe-style: t=<seconds>,v1=<hex HMAC-SHA256 of "t.body">, the secret used as raw bytes
\set ssecret '''whsec_test_stripe_secret_0123456789abc'''
\set sbody '''{"id":"evt_1","type":"payment_intent.succeeded"}'''
SELECT idempotency.idem_webhook_sign_stripe(:ssecret, 1700000000, :sbody) AS stripe_header;
-- the same header assembled from idempotency.idem_hmac_sha256 (secret bytes as the key)
SELECT idempotency.idem_webhook_sign_stripe(:ssecret, 1700000000, :sbody) =
       't=1700000000,v1=' || encode(idempotency.idem_hmac_sha256(convert_to(:ssecret, 'UTF8'),
                                    convert_to('1700000000.' || :sbody, 'UTF8')), 'hex')
       AS matches_hmac;
-- and the Standard Webhooks vector from idem_hmac_sha256 with the base64-decoded secret
SELECT 'v1,' || encode(idempotency.idem_hmac_sha256(decode(substr(:secret, 7), 'base64'),
                       convert_to(:msg_id || '.' || :ts || '.' || :body, 'UTF8')), 'base64')
       = :sig AS vector_from_hmac;
\set sheader 'idempotency.idem_webhook_sign_stripe(' :ssecret ', 1700000000, ' :sbody ')'
\set sat 'to_timestamp(1700000000)'
SELECT idempotency.idem_webhook_verify_stripe(:ssecret, :sheader, :sbody, now => :sat) AS valid,
       idempotency.idem_webhook_verify_stripe(:ssecret, :sheader, convert_to(:sbody, 'UTF8'),
                                  now => :sat) AS bytea_payload,
       idempotency.idem_webhook_verify_stripe(:ssecret, :sheader, :sbody || ' ', now => :sat) AS other_body,
       idempotency.idem_webhook_verify_stripe(:ssecret, :sheader, :sbody,
                                  now => :sat + interval '300 s') AS plus_300,
       idempotency.idem_webhook_verify_stripe(:ssecret, :sheader, :sbody,
                                  now => :sat - interval '301 s') AS minus_301,
       idempotency.idem_webhook_verify_stripe(ARRAY['whsec_new_stripe_secret_0123456789abcd', :ssecret], :sheader, :sbody,
                                  now => :sat) AS rotation,
       idempotency.idem_webhook_verify_stripe(:ssecret, 't=1700000000,v1=' || repeat('0', 64) || ',' ||
                                  split_part(:sheader, ',', 2), :sbody, now => :sat) AS several_v1,
       idempotency.idem_webhook_verify_stripe(:ssecret, 't=1700000000,v0=' ||
                                  split_part(:sheader, 'v1=', 2), :sbody, now => :sat) AS v0_only;
-- a malformed header is false, not an error; an empty secret is the receiver's 22023
SELECT idempotency.idem_webhook_verify_stripe(:ssecret, 'v1=abcd', 'x') AS no_t,
       idempotency.idem_webhook_verify_stripe(:ssecret, 't=1,t=2,v1=abcd', 'x') AS two_t,
       idempotency.idem_webhook_verify_stripe(:ssecret, 't=1,garbage', 'x') AS no_equals,
       idempotency.idem_webhook_verify_stripe(:ssecret, 't=now,v1=abcd', 'x') AS bad_t;
SELECT try($$SELECT idempotency.idem_webhook_verify_stripe('', 't=1,v1=abcd', 'x')$$) AS empty_secret;
SELECT try($$SELECT idempotency.idem_webhook_sign_stripe('whsec_test_stripe_secret_0123456789abc', -1, 'x')$$)
    AS negative_t;

-- verify and receive in one call: refused deliveries write nothing
CREATE TEMP VIEW wh AS
SELECT consumer, event_id, status, attempt, event_type, convert_from(payload, 'UTF8') AS payload,
       payload_hash = sha256(convert_to('{"test": 2432232314}', 'UTF8')) AS hash_of_body
FROM idempotency.inbox WHERE consumer LIKE 'w\_%' ORDER BY consumer, event_id;
SELECT idempotency.idem_webhook_receive('w_hooks', 'standard', ARRAY[:secret], :msg_id, :body, :sig, :ts,
                            now => :at) AS first;
SELECT idempotency.idem_webhook_receive('w_hooks', 'standard', ARRAY[:secret], :msg_id, :body, :sig, :ts,
                            now => :at) AS again;
-- re-signed by the sender with a new timestamp (a retry): still the same event
SELECT idempotency.idem_webhook_receive('w_hooks', 'standard', ARRAY[:secret], :msg_id, :body,
                            idempotency.idem_webhook_sign_standard(:secret, :msg_id, '1614265400', :body),
                            '1614265400', now => :at + interval '70 s') AS resigned;
-- the same id with another (correctly signed) body: mismatch
SELECT idempotency.idem_webhook_receive('w_hooks', 'standard', ARRAY[:secret], :msg_id, '{"test": 1}',
                            idempotency.idem_webhook_sign_standard(:secret, :msg_id, :ts, '{"test": 1}'),
                            :ts, now => :at) AS other_body;
SELECT idempotency.idem_webhook_receive('w_hooks', 'standard', ARRAY[:secret], 'msg_forged', :body, :sig,
                            :ts, now => :at) AS forged;
SELECT idempotency.idem_webhook_receive('w_hooks', 'standard', ARRAY[:secret], 'msg_old', :body,
                            idempotency.idem_webhook_sign_standard(:secret, 'msg_old', :ts, :body), :ts,
                            now => :at + interval '1 hour') AS too_old;
SELECT idempotency.idem_webhook_receive('w_hooks', 'standard', ARRAY[:secret], 'msg_garbled', :body,
                            'garbage', :ts, now => :at) AS malformed_header,
       idempotency.idem_webhook_receive('w_hooks', 'standard', ARRAY[:secret], 'msg_noheader', :body,
                            NULL, :ts, now => :at) AS missing_header,
       idempotency.idem_webhook_receive('w_hooks', 'standard', ARRAY[:secret], 'msg_nots', :body,
                            :sig, NULL, now => :at) AS missing_timestamp,
       idempotency.idem_webhook_receive('w_hooks', 'standard', ARRAY[:secret], 'msg_badts', :body,
                            :sig, 'yesterday', now => :at) AS malformed_timestamp;
SELECT * FROM wh;

-- fast-ack: enqueue stores the raw body and the event type for idem_inbox_next
SELECT idempotency.idem_webhook_receive('w_queue', 'standard', ARRAY[:secret], :msg_id,
                            convert_to(:body, 'UTF8'), :sig, :ts, event_type => 'test.event',
                            enqueue => true, now => :at) AS queued;
SELECT idempotency.idem_webhook_receive('w_queue', 'standard', ARRAY[:secret], :msg_id, :body, :sig, :ts,
                            enqueue => true, now => :at) AS queued_again;
SELECT * FROM wh WHERE consumer = 'w_queue';
SELECT event_id, event_type, convert_from(payload, 'UTF8') AS payload, attempt
FROM idempotency.idem_inbox_next('w_queue');

-- Stripe: the event id comes from the (signed) body
SELECT idempotency.idem_webhook_receive('w_stripe', 'stripe', ARRAY[:ssecret], 'evt_1', :sbody, :sheader,
                            now => :sat) AS stripe_first,
       idempotency.idem_webhook_receive('w_stripe', 'stripe', ARRAY[:ssecret], 'evt_1', :sbody,
                            idempotency.idem_webhook_sign_stripe(:ssecret, 1700000060, :sbody),
                            now => :sat + interval '1 minute') AS stripe_resigned,
       idempotency.idem_webhook_receive('w_stripe', 'stripe', ARRAY['whsec_wrong_stripe_secret_0123456789ab'], 'evt_2', :sbody,
                            :sheader, now => :sat) AS stripe_wrong_secret;
SELECT consumer, event_id, status FROM wh WHERE consumer = 'w_stripe';

-- errors of the receiver's own arguments
SELECT try($$SELECT idempotency.idem_webhook_receive('w_err', 'github', ARRAY['s'], 'e', 'x', 'h')$$)
    AS unknown_scheme;
SELECT try($$SELECT idempotency.idem_webhook_receive('w_err', 'stripe', ARRAY['s'], 'e', 'x',
    't=1,v1=00', '1')$$) AS stripe_with_timestamp;
SELECT try($$SELECT idempotency.idem_webhook_receive('w_err', 'standard', ARRAY['whsec_###'], 'e',
    'x', 'v1,AAAA', '1')$$) AS bad_secret;
-- a NULL event id is the sender's: an outcome, not an error (it raised 22004)
SELECT idempotency.idem_webhook_receive('w_err', 'standard', ARRAY['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'],
    NULL, 'x', 'v1,AAAA', '1') AS null_event_id;
SELECT try($$SELECT idempotency.idem_webhook_receive(NULL, 'standard', ARRAY['s'], 'e', 'x', 'h', '1')$$, true)
    AS null_consumer;
SELECT count(*) AS err_rows FROM wh WHERE consumer = 'w_err';

-- Sender input never raises ------------------------------------------------------
-- Every field an unauthenticated sender controls (the event id, the body, the signature and
-- timestamp headers), missing, NULL, empty, blank, with CR/LF, oversized or malformed, ends in
-- an outcome, never an error; only deliveries answered new write a row.
CREATE FUNCTION wh_receive(scheme text, secrets text[], event_id text, payload text,
                           header text, ts text, at timestamptz) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    RETURN idempotency.idem_webhook_receive('w_table', scheme, secrets, event_id, payload, header, ts,
                                now => at);
EXCEPTION WHEN OTHERS THEN
    RETURN 'ERROR ' || SQLSTATE || ': ' || SQLERRM;
END $$;
-- the Standard Webhooks vector's secret, body and timestamp; the signature of any id/ts/body
CREATE FUNCTION std_sig(id text, ts text DEFAULT '1614265330',
                        body text DEFAULT '{"test": 2432232314}') RETURNS text
LANGUAGE sql AS $$ SELECT idempotency.idem_webhook_sign_standard('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', id, ts, body) $$;
SELECT n, sender_input, wh_receive('standard', ARRAY['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'],
                                   id, body, header, ts, to_timestamp(1614265330)) AS outcome
FROM (VALUES
    (1, 'valid', 'std-valid', '{"test": 2432232314}', std_sig('std-valid'), '1614265330'),
    (2, 'webhook-id NULL', NULL, '{"test": 2432232314}', std_sig('std-null-id'), '1614265330'),
    (3, 'webhook-id empty, not signed', '', '{"test": 2432232314}', std_sig('x'), '1614265330'),
    (4, 'webhook-id empty, signed', '', '{"test": 2432232314}', std_sig(''), '1614265330'),
    (5, 'webhook-id blank, signed', ' ', '{"test": 2432232314}', std_sig(' '), '1614265330'),
    (6, 'webhook-id 1025 bytes, signed', repeat('i', 1025), '{"test": 2432232314}',
        std_sig(repeat('i', 1025)), '1614265330'),
    (7, 'webhook-id 1 MB, not signed', repeat('i', 1048576), '{"test": 2432232314}',
        std_sig('x'), '1614265330'),
    (8, 'webhook-id + CR LF, signed without', E'std-id-crlf\r\n', '{"test": 2432232314}',
        std_sig('std-id-crlf'), '1614265330'),
    (9, 'body NULL', 'std-null-body', NULL, std_sig('std-null-body'), '1614265330'),
    (10, 'body empty, signed', 'std-empty-body', '', std_sig('std-empty-body', body => ''),
        '1614265330'),
    (11, 'body changed', 'std-changed', '{"test": 2432232315}', std_sig('std-changed'),
        '1614265330'),
    (12, 'body 1 MB, not signed', 'std-big', repeat('b', 1048576), std_sig('std-big'),
        '1614265330'),
    (13, 'webhook-signature NULL', 'std-h1', '{"test": 2432232314}', NULL, '1614265330'),
    (14, 'webhook-signature empty', 'std-h2', '{"test": 2432232314}', '', '1614265330'),
    (15, 'webhook-signature blank', 'std-h3', '{"test": 2432232314}', '   ', '1614265330'),
    (16, 'webhook-signature tab', 'std-h4', '{"test": 2432232314}', E'\t', '1614265330'),
    (17, 'webhook-signature CR LF', 'std-h5', '{"test": 2432232314}', E'\r\n', '1614265330'),
    (18, 'webhook-signature + CR LF', 'std-sig-crlf', '{"test": 2432232314}',
        std_sig('std-sig-crlf') || E'\r\n', '1614265330'),
    (19, 'webhook-signature + LF', 'std-sig-lf', '{"test": 2432232314}',
        std_sig('std-sig-lf') || E'\n', '1614265330'),
    (20, 'CR LF + webhook-signature', 'std-crlf-sig', '{"test": 2432232314}',
        E'\r\n' || std_sig('std-crlf-sig'), '1614265330'),
    (21, 'webhook-signature + entry without comma', 'std-h6', '{"test": 2432232314}',
        std_sig('std-h6') || ' garbage', '1614265330'),
    (22, 'webhook-signature v1, (empty)', 'std-h7', '{"test": 2432232314}', 'v1,',
        '1614265330'),
    (23, 'webhook-signature v1 (no comma)', 'std-h8', '{"test": 2432232314}', 'v1',
        '1614265330'),
    (24, 'webhook-signature , (comma only)', 'std-h9', '{"test": 2432232314}', ',',
        '1614265330'),
    (25, 'webhook-signature of 20,000 bytes', 'std-h10', '{"test": 2432232314}',
        std_sig('std-h10') || repeat(' v1,AAAA', 2494), '1614265330'),
    (26, 'webhook-timestamp NULL', 'std-t1', '{"test": 2432232314}', std_sig('std-t1'), NULL),
    (27, 'webhook-timestamp empty', 'std-t2', '{"test": 2432232314}', std_sig('std-t2'), ''),
    (28, 'webhook-timestamp blank', 'std-t3', '{"test": 2432232314}', std_sig('std-t3'), ' '),
    (29, 'webhook-timestamp + CR LF', 'std-ts-crlf', '{"test": 2432232314}',
        std_sig('std-ts-crlf'), E'1614265330\r\n'),
    (30, 'webhook-timestamp negative', 'std-t4', '{"test": 2432232314}', std_sig('std-t4'),
        '-1614265330'),
    (31, 'webhook-timestamp +1614265330', 'std-t5', '{"test": 2432232314}', std_sig('std-t5'),
        '+1614265330'),
    (32, 'webhook-timestamp 1614265330.5', 'std-t6', '{"test": 2432232314}', std_sig('std-t6'),
        '1614265330.5'),
    (33, 'webhook-timestamp 1.6e9', 'std-t7', '{"test": 2432232314}', std_sig('std-t7'),
        '1.6e9'),
    (34, 'webhook-timestamp 19 digits', 'std-t8', '{"test": 2432232314}', std_sig('std-t8'),
        '1614265330000000000'),
    (35, 'webhook-timestamp 18 digits, signed', 'std-t9', '{"test": 2432232314}',
        std_sig('std-t9', '999999999999999999'), '999999999999999999'),
    (36, 'webhook-timestamp 0, signed', 'std-t10', '{"test": 2432232314}',
        std_sig('std-t10', '0'), '0'),
    (37, 'webhook-timestamp an hour old, signed', 'std-t11', '{"test": 2432232314}',
        std_sig('std-t11', '1614261730'), '1614261730')
) AS c(n, sender_input, id, body, header, ts)
ORDER BY n;

-- Stripe: the event id comes from the signed body; a signing secret as Stripe issues them
CREATE FUNCTION stripe_sig(body text, t bigint DEFAULT 1700000000) RETURNS text
LANGUAGE sql AS $$ SELECT idempotency.idem_webhook_sign_stripe('whsec_7Kq2mX9pL4vR8sT1wZ6yB3nC5dF0gH2j', t, body) $$;
SELECT n, sender_input, wh_receive('stripe', ARRAY['whsec_7Kq2mX9pL4vR8sT1wZ6yB3nC5dF0gH2j'],
                                   id, body, header, NULL, to_timestamp(1700000000)) AS outcome
FROM (VALUES
    (1, 'valid', 'evt_valid', '{"id":"evt_valid"}', stripe_sig('{"id":"evt_valid"}')),
    (2, 'event id NULL, not signed', NULL, '{}', 't=1700000000,v1=' || repeat('0', 64)),
    (3, 'event id NULL, signed', NULL, '{}', stripe_sig('{}')),
    (4, 'event id empty, signed', '', '{"id":""}', stripe_sig('{"id":""}')),
    (5, 'event id 1025 bytes, signed', repeat('e', 1025), '{"id":"e..."}',
        stripe_sig('{"id":"e..."}')),
    (6, 'body NULL', 'evt_null_body', NULL, stripe_sig('{"id":"evt_null_body"}')),
    (7, 'Stripe-Signature NULL', 'evt_h1', '{"id":"evt_h1"}', NULL),
    (8, 'Stripe-Signature empty', 'evt_h2', '{"id":"evt_h2"}', ''),
    (9, 'Stripe-Signature blank', 'evt_h3', '{"id":"evt_h3"}', '   '),
    (10, 'Stripe-Signature CR LF', 'evt_h4', '{"id":"evt_h4"}', E'\r\n'),
    (11, 'Stripe-Signature + CR LF', 'evt_crlf', '{"id":"evt_crlf"}',
        stripe_sig('{"id":"evt_crlf"}') || E'\r\n'),
    (12, 'Stripe-Signature + LF', 'evt_lf', '{"id":"evt_lf"}',
        stripe_sig('{"id":"evt_lf"}') || E'\n'),
    (13, 'Stripe-Signature + CR', 'evt_cr', '{"id":"evt_cr"}',
        stripe_sig('{"id":"evt_cr"}') || E'\r'),
    (14, 'Stripe-Signature + space, tab', 'evt_sp', '{"id":"evt_sp"}',
        stripe_sig('{"id":"evt_sp"}') || E' \t'),
    (15, 'CR LF + Stripe-Signature', 'evt_lead', '{"id":"evt_lead"}',
        E'\r\n' || stripe_sig('{"id":"evt_lead"}')),
    (16, 'CR LF after the comma', 'evt_fold', '{"id":"evt_fold"}',
        replace(stripe_sig('{"id":"evt_fold"}'), ',', E',\r\n ')),
    (17, 't only', 'evt_h5', '{"id":"evt_h5"}', 't=1700000000'),
    (18, 'v1 only', 'evt_h6', '{"id":"evt_h6"}',
        split_part(stripe_sig('{"id":"evt_h6"}'), ',', 2)),
    (19, 't twice', 'evt_h7', '{"id":"evt_h7"}', 't=1700000000,' || stripe_sig('{"id":"evt_h7"}')),
    (20, 't empty', 'evt_h8', '{"id":"evt_h8"}', 't=,v1=' || repeat('0', 64)),
    (21, 't not a number', 'evt_h9', '{"id":"evt_h9"}', 't=now,v1=' || repeat('0', 64)),
    (22, 't 19 digits', 'evt_h10', '{"id":"evt_h10"}', 't=1700000000000000000,v1=' || repeat('0', 64)),
    (23, 'item without =', 'evt_h11', '{"id":"evt_h11"}', stripe_sig('{"id":"evt_h11"}') || ',junk'),
    (24, ',,,', 'evt_h12', '{"id":"evt_h12"}', ',,,'),
    (25, 'v1 not hex', 'evt_h13', '{"id":"evt_h13"}', 't=1700000000,v1=' || repeat('z', 64)),
    (26, 'v1 of 31 bytes', 'evt_h14', '{"id":"evt_h14"}',
        left(stripe_sig('{"id":"evt_h14"}'), -2)),
    (27, 'the MAC as v0 only', 'evt_h15', '{"id":"evt_h15"}',
        replace(stripe_sig('{"id":"evt_h15"}'), 'v1=', 'v0=')),
    (28, 'Stripe-Signature of 20,000 bytes', 'evt_h16', '{"id":"evt_h16"}',
        stripe_sig('{"id":"evt_h16"}') || repeat(',v0=abcd', 2490)),
    (29, 't 301 s old, signed', 'evt_old', '{"id":"evt_old"}',
        stripe_sig('{"id":"evt_old"}', 1699999699))
) AS c(n, sender_input, id, body, header)
ORDER BY n;
-- only the deliveries answered new are stored
SELECT event_id, status FROM idempotency.inbox WHERE consumer = 'w_table' ORDER BY event_id;

-- the boolean verify functions: false for any sender field, never an error
CREATE FUNCTION wh_verify(call text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    ok boolean;
BEGIN
    EXECUTE 'SELECT ' || call INTO ok;
    RETURN coalesce(ok::text, 'NULL');
EXCEPTION WHEN OTHERS THEN
    RETURN 'ERROR ' || SQLSTATE || ': ' || SQLERRM;
END $$;
SELECT n, sender_input, wh_verify(format(f, args)) AS verified
FROM (VALUES
    ('idempotency.idem_webhook_verify_standard(''whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'', %s, now => to_timestamp(1614265330))'),
    ('idempotency.idem_webhook_verify_stripe(''whsec_7Kq2mX9pL4vR8sT1wZ6yB3nC5dF0gH2j'', %s, now => to_timestamp(1700000000))')
) AS s(f), LATERAL (SELECT * FROM (VALUES
    (1, 'standard: valid', $$'msg_p5jXN8AQM9LWM0D4loKWxJek', '1614265330', '{"test": 2432232314}', 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE='$$),
    (2, 'standard: msg_id NULL', $$NULL, '1614265330', '{"test": 2432232314}', 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE='$$),
    (3, 'standard: msg_timestamp NULL', $$'msg_p5jXN8AQM9LWM0D4loKWxJek', NULL, '{"test": 2432232314}', 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE='$$),
    (4, 'standard: payload NULL', $$'msg_p5jXN8AQM9LWM0D4loKWxJek', '1614265330', NULL::text, 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE='$$),
    (5, 'standard: header NULL', $$'msg_p5jXN8AQM9LWM0D4loKWxJek', '1614265330', '{"test": 2432232314}', NULL$$),
    (6, 'standard: header empty', $$'msg_p5jXN8AQM9LWM0D4loKWxJek', '1614265330', '{"test": 2432232314}', ''$$),
    (7, 'standard: header without comma', $$'msg_p5jXN8AQM9LWM0D4loKWxJek', '1614265330', '{"test": 2432232314}', 'garbage'$$),
    (8, 'standard: timestamp malformed', $$'msg_p5jXN8AQM9LWM0D4loKWxJek', 'yesterday', '{"test": 2432232314}', 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE='$$),
    (9, 'standard: header + CR LF', $$'msg_p5jXN8AQM9LWM0D4loKWxJek', '1614265330', '{"test": 2432232314}', E'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=\r\n'$$),
    (10, 'standard: timestamp + CR LF', $$'msg_p5jXN8AQM9LWM0D4loKWxJek', E'1614265330\r\n', '{"test": 2432232314}', 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE='$$),
    (11, 'stripe: valid', $$stripe_sig('{}'), '{}'$$),
    (12, 'stripe: header NULL', $$NULL, '{}'$$),
    (13, 'stripe: payload NULL', $$stripe_sig('{}'), NULL::text$$),
    (14, 'stripe: header empty', $$'', '{}'$$),
    (15, 'stripe: header garbage', $$'garbage', '{}'$$),
    (16, 'stripe: t twice', $$'t=1,t=2,v1=abcd', '{}'$$),
    (17, 'stripe: header + CR LF', $$stripe_sig('{}') || E'\r\n', '{}'$$)
) AS c(n, sender_input, args) WHERE (n <= 10) = (f LIKE '%standard%')) AS c
ORDER BY n;

-- The receiver's own misconfiguration -------------------------------------------------------
-- 22023 with a hint on the first delivery, whatever the sender sent (here: a malformed
-- signature header); Standard Webhooks secrets decode to 24..64 bytes, Stripe-style secrets have
-- at least 32 bytes ('ok': accepted, the delivery answered invalid_signature)
SELECT n, misconfiguration,
       try(format('SELECT idempotency.idem_webhook_receive(%L, %L, ARRAY[%L], %L, %L::text, %L)',
                  consumer, scheme, secret, 'e-cfg', '{}', 'garbage'), true) AS error
FROM (VALUES
    (1, 'standard: decodes to 1 byte', 'w_cfg', 'standard', 'whsec_' || encode('k', 'base64')),
    (2, 'standard: 23 bytes', 'w_cfg', 'standard', 'whsec_' || encode(repeat('k', 23)::bytea, 'base64')),
    (3, 'standard: 24 bytes', 'w_cfg', 'standard', 'whsec_' || encode(repeat('k', 24)::bytea, 'base64')),
    (4, 'standard: 64 bytes', 'w_cfg', 'standard',
        'whsec_' || translate(encode(repeat('k', 64)::bytea, 'base64'), E'\n', '')),
    (5, 'standard: 65 bytes', 'w_cfg', 'standard',
        'whsec_' || translate(encode(repeat('k', 65)::bytea, 'base64'), E'\n', '')),
    (6, 'standard: 24 bytes without whsec_', 'w_cfg', 'standard', encode(repeat('k', 24)::bytea, 'base64')),
    (7, 'standard: whsec_ only', 'w_cfg', 'standard', 'whsec_'),
    (8, 'standard: not base64', 'w_cfg', 'standard', 'whsec_Top$ecret!'),
    (9, 'stripe: 10 bytes', 'w_cfg', 'stripe', 'whsec_test'),
    (10, 'stripe: 31 bytes', 'w_cfg', 'stripe', 'whsec_' || repeat('k', 25)),
    (11, 'stripe: 32 bytes', 'w_cfg', 'stripe', 'whsec_' || repeat('k', 26)),
    (12, 'stripe: empty', 'w_cfg', 'stripe', ''),
    (13, 'consumer empty', '', 'standard', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'),
    (14, 'consumer 256 bytes', repeat('c', 256), 'standard', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw')
) AS c(n, misconfiguration, consumer, scheme, secret)
ORDER BY n;
-- also when the delivery carries no headers at all
SELECT try($$SELECT idempotency.idem_webhook_receive('w_cfg', 'standard', ARRAY['whsec_eA=='],
    'e-cfg', '{}', NULL)$$, true) AS one_byte_no_headers;
SELECT try($$SELECT idempotency.idem_webhook_receive('w_cfg', 'stripe', ARRAY['whsec_test'],
    'e-cfg', '{}', NULL)$$, true) AS stripe_short_no_header;
SELECT try($$SELECT idempotency.idem_webhook_receive('w_cfg', 'standard', ARRAY['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'],
    'e-cfg', '{}', NULL, tolerance => interval '-1 s')$$, true) AS negative_tolerance;
SELECT try($$SELECT idempotency.idem_webhook_receive('w_cfg', 'standard', ARRAY['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'],
    'e-cfg', '{}', 'garbage', '1', ttl => interval '0')$$, true) AS zero_ttl;
-- the same limits when signing and verifying
SELECT try($$SELECT idempotency.idem_webhook_sign_standard('whsec_eA==', 'msg_1', '1', 'x')$$) AS sign_standard_1_byte;
SELECT try($$SELECT idempotency.idem_webhook_sign_stripe('whsec_test', 1, 'x')$$) AS sign_stripe_10_bytes;
SELECT try($$SELECT idempotency.idem_webhook_verify_standard('whsec_eA==', 'msg_1', '1', 'x', 'v1,AAAA')$$)
    AS verify_standard_1_byte;
SELECT try($$SELECT idempotency.idem_webhook_verify_stripe('whsec_test', 't=1,v1=00', 'x')$$)
    AS verify_stripe_10_bytes;
SELECT count(*) AS cfg_rows FROM idempotency.inbox WHERE consumer = 'w_cfg';
