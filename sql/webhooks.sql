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

SELECT idem_webhook_sign_standard(:secret, :msg_id, :ts, :body) = :sig AS vector_signed;
SELECT idem_webhook_verify_standard(:secret, :msg_id, :ts, :body, :sig, now => :at) AS text_payload,
       idem_webhook_verify_standard(:secret, :msg_id, :ts, convert_to(:body, 'UTF8'), :sig,
                                    now => :at) AS bytea_payload,
       idem_webhook_verify_standard(ARRAY[:secret], :msg_id, :ts, :body, :sig,
                                    now => :at) AS secret_array;

-- anything changed: not valid
SELECT idem_webhook_verify_standard(:secret, :msg_id, :ts, '{"test": 2432232315}', :sig,
                                    now => :at) AS other_body,
       idem_webhook_verify_standard(:secret, 'msg_other', :ts, :body, :sig,
                                    now => :at) AS other_id,
       idem_webhook_verify_standard(:secret, :msg_id, '1614265331', :body, :sig,
                                    now => :at) AS other_timestamp,
       idem_webhook_verify_standard('whsec_' || encode('another key', 'base64'), :msg_id, :ts,
                                    :body, :sig, now => :at) AS other_secret;
-- a body that differs in any byte does not verify: jsonb::text re-serialises (spacing, key
-- order), so verify the raw text or bytea as received, never jsonb
SELECT idem_webhook_verify_standard(:secret, :msg_id, :ts, '{"test":2432232314}', :sig,
                                    now => :at) AS compact_body;

-- tolerance: 300 s by default, in both directions, inclusive
SELECT idem_webhook_verify_standard(:secret, :msg_id, :ts, :body, :sig,
                                    now => :at + interval '300 s') AS plus_300,
       idem_webhook_verify_standard(:secret, :msg_id, :ts, :body, :sig,
                                    now => :at - interval '300 s') AS minus_300,
       idem_webhook_verify_standard(:secret, :msg_id, :ts, :body, :sig,
                                    now => :at + interval '301 s') AS plus_301,
       idem_webhook_verify_standard(:secret, :msg_id, :ts, :body, :sig,
                                    now => :at - interval '301 s') AS minus_301,
       idem_webhook_verify_standard(:secret, :msg_id, :ts, :body, :sig, interval '1 hour',
                                    :at + interval '3000 s') AS wider;
SET idempotency.webhook_tolerance = '10s';
SELECT idem_webhook_verify_standard(:secret, :msg_id, :ts, :body, :sig,
                                    now => :at + interval '11 s') AS setting_10s;
RESET idempotency.webhook_tolerance;
-- without now: the server clock (the vector is from 2021)
SELECT idem_webhook_verify_standard(:secret, :msg_id, :ts, :body, :sig) AS vector_today;

-- several signatures (space-separated) and key rotation (several secrets)
SELECT idem_webhook_verify_standard(:secret, :msg_id, :ts, :body,
           'v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= v1a,c2lnbmF0dXJl ' || :sig,
           now => :at) AS several_signatures,
       idem_webhook_verify_standard(ARRAY['whsec_' || encode('the new key', 'base64'), :secret],
                                    :msg_id, :ts, :body, :sig, now => :at) AS old_secret_kept,
       idem_webhook_verify_standard(ARRAY['whsec_' || encode('the new key', 'base64'), :secret],
           :msg_id, :ts, :body,
           idem_webhook_sign_standard('whsec_' || encode('the new key', 'base64'), :msg_id, :ts,
                                      :body), now => :at) AS new_secret,
       idem_webhook_verify_standard(:secret, :msg_id, :ts, :body, 'v1a,' || substr(:sig, 4),
                                    now => :at) AS only_other_versions;

-- malformed input: 22023 (22004 for NULL); the secret never appears in a message
SELECT try($$SELECT idem_webhook_verify_standard('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
    'msg_1', '1614265330', 'x', '')$$) AS empty_header;
SELECT try($$SELECT idem_webhook_verify_standard('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
    'msg_1', '1614265330', 'x', 'g0hM9SsE+OTPJTGt')$$) AS no_version;
SELECT try($$SELECT idem_webhook_verify_standard('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
    'msg_1', '16142653.30', 'x', 'v1,abc=')$$) AS bad_timestamp;
SELECT try($$SELECT idem_webhook_verify_standard('whsec_Top$ecret!', 'msg_1',
    '1614265330', 'x', 'v1,abc=')$$) AS bad_secret;
SELECT try($$SELECT idem_webhook_verify_standard(ARRAY[]::text[], 'msg_1',
    '1614265330', 'x', 'v1,abc=')$$) AS no_secrets;
SELECT try($$SELECT idem_webhook_verify_standard(ARRAY['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', NULL],
    'msg_1', '1614265330', 'x', 'v1,abc=')$$) AS null_secret;
SELECT try($$SELECT idem_webhook_verify_standard('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
    'msg_1', '1614265330', 'x', NULL)$$) AS null_header;
SELECT try($$SELECT idem_webhook_verify_standard('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
    'msg_1', '1614265330', 'x', 'v1,abc=', interval '-1 s')$$) AS negative_tolerance;
SELECT idem_webhook_verify_standard('whsec_Top$ecret!', 'msg_1', '1614265330', 'x', 'v1,abc=');

-- Stripe-style: t=<seconds>,v1=<hex HMAC-SHA256 of "t.body">, the secret used as raw bytes
\set ssecret '''whsec_test_stripe_secret'''
\set sbody '''{"id":"evt_1","type":"payment_intent.succeeded"}'''
SELECT idem_webhook_sign_stripe(:ssecret, 1700000000, :sbody) AS stripe_header;
-- the same header assembled from idem_hmac_sha256 (secret bytes as the key)
SELECT idem_webhook_sign_stripe(:ssecret, 1700000000, :sbody) =
       't=1700000000,v1=' || encode(idem_hmac_sha256(convert_to(:ssecret, 'UTF8'),
                                    convert_to('1700000000.' || :sbody, 'UTF8')), 'hex')
       AS matches_hmac;
-- and the Standard Webhooks vector from idem_hmac_sha256 with the base64-decoded secret
SELECT 'v1,' || encode(idem_hmac_sha256(decode(substr(:secret, 7), 'base64'),
                       convert_to(:msg_id || '.' || :ts || '.' || :body, 'UTF8')), 'base64')
       = :sig AS vector_from_hmac;
\set sheader 'idem_webhook_sign_stripe(' :ssecret ', 1700000000, ' :sbody ')'
\set sat 'to_timestamp(1700000000)'
SELECT idem_webhook_verify_stripe(:ssecret, :sheader, :sbody, now => :sat) AS valid,
       idem_webhook_verify_stripe(:ssecret, :sheader, convert_to(:sbody, 'UTF8'),
                                  now => :sat) AS bytea_payload,
       idem_webhook_verify_stripe(:ssecret, :sheader, :sbody || ' ', now => :sat) AS other_body,
       idem_webhook_verify_stripe(:ssecret, :sheader, :sbody,
                                  now => :sat + interval '300 s') AS plus_300,
       idem_webhook_verify_stripe(:ssecret, :sheader, :sbody,
                                  now => :sat - interval '301 s') AS minus_301,
       idem_webhook_verify_stripe(ARRAY['whsec_new', :ssecret], :sheader, :sbody,
                                  now => :sat) AS rotation,
       idem_webhook_verify_stripe(:ssecret, 't=1700000000,v1=' || repeat('0', 64) || ',' ||
                                  split_part(:sheader, ',', 2), :sbody, now => :sat) AS several_v1,
       idem_webhook_verify_stripe(:ssecret, 't=1700000000,v0=' ||
                                  split_part(:sheader, 'v1=', 2), :sbody, now => :sat) AS v0_only;
SELECT try($$SELECT idem_webhook_verify_stripe('s', 'v1=abcd', 'x')$$) AS no_t;
SELECT try($$SELECT idem_webhook_verify_stripe('s', 't=1,t=2,v1=abcd', 'x')$$) AS two_t;
SELECT try($$SELECT idem_webhook_verify_stripe('s', 't=1,garbage', 'x')$$) AS no_equals;
SELECT try($$SELECT idem_webhook_verify_stripe('s', 't=now,v1=abcd', 'x')$$) AS bad_t;
SELECT try($$SELECT idem_webhook_verify_stripe('', 't=1,v1=abcd', 'x')$$) AS empty_secret;
SELECT try($$SELECT idem_webhook_sign_stripe('s', -1, 'x')$$) AS negative_t;

-- verify and receive in one call: refused deliveries write nothing
CREATE TEMP VIEW wh AS
SELECT consumer, event_id, status, attempt, event_type, convert_from(payload, 'UTF8') AS payload,
       payload_hash = sha256(convert_to('{"test": 2432232314}', 'UTF8')) AS hash_of_body
FROM idempotency.inbox WHERE consumer LIKE 'w\_%' ORDER BY consumer, event_id;
SELECT idem_webhook_receive('w_hooks', 'standard', ARRAY[:secret], :msg_id, :body, :sig, :ts,
                            now => :at) AS first;
SELECT idem_webhook_receive('w_hooks', 'standard', ARRAY[:secret], :msg_id, :body, :sig, :ts,
                            now => :at) AS again;
-- re-signed by the sender with a new timestamp (a retry): still the same event
SELECT idem_webhook_receive('w_hooks', 'standard', ARRAY[:secret], :msg_id, :body,
                            idem_webhook_sign_standard(:secret, :msg_id, '1614265400', :body),
                            '1614265400', now => :at + interval '70 s') AS resigned;
-- the same id with another (correctly signed) body: mismatch
SELECT idem_webhook_receive('w_hooks', 'standard', ARRAY[:secret], :msg_id, '{"test": 1}',
                            idem_webhook_sign_standard(:secret, :msg_id, :ts, '{"test": 1}'),
                            :ts, now => :at) AS other_body;
SELECT idem_webhook_receive('w_hooks', 'standard', ARRAY[:secret], 'msg_forged', :body, :sig,
                            :ts, now => :at) AS forged;
SELECT idem_webhook_receive('w_hooks', 'standard', ARRAY[:secret], 'msg_old', :body,
                            idem_webhook_sign_standard(:secret, 'msg_old', :ts, :body), :ts,
                            now => :at + interval '1 hour') AS too_old;
SELECT idem_webhook_receive('w_hooks', 'standard', ARRAY[:secret], 'msg_garbled', :body,
                            'garbage', :ts, now => :at) AS malformed_header,
       idem_webhook_receive('w_hooks', 'standard', ARRAY[:secret], 'msg_noheader', :body,
                            NULL, :ts, now => :at) AS missing_header,
       idem_webhook_receive('w_hooks', 'standard', ARRAY[:secret], 'msg_nots', :body,
                            :sig, NULL, now => :at) AS missing_timestamp,
       idem_webhook_receive('w_hooks', 'standard', ARRAY[:secret], 'msg_badts', :body,
                            :sig, 'yesterday', now => :at) AS malformed_timestamp;
SELECT * FROM wh;

-- fast-ack: enqueue stores the raw body and the event type for idem_inbox_next
SELECT idem_webhook_receive('w_queue', 'standard', ARRAY[:secret], :msg_id,
                            convert_to(:body, 'UTF8'), :sig, :ts, event_type => 'test.event',
                            enqueue => true, now => :at) AS queued;
SELECT idem_webhook_receive('w_queue', 'standard', ARRAY[:secret], :msg_id, :body, :sig, :ts,
                            enqueue => true, now => :at) AS queued_again;
SELECT * FROM wh WHERE consumer = 'w_queue';
SELECT event_id, event_type, convert_from(payload, 'UTF8') AS payload, attempt
FROM idem_inbox_next('w_queue');

-- Stripe: the event id comes from the (signed) body
SELECT idem_webhook_receive('w_stripe', 'stripe', ARRAY[:ssecret], 'evt_1', :sbody, :sheader,
                            now => :sat) AS stripe_first,
       idem_webhook_receive('w_stripe', 'stripe', ARRAY[:ssecret], 'evt_1', :sbody,
                            idem_webhook_sign_stripe(:ssecret, 1700000060, :sbody),
                            now => :sat + interval '1 minute') AS stripe_resigned,
       idem_webhook_receive('w_stripe', 'stripe', ARRAY['whsec_wrong'], 'evt_2', :sbody,
                            :sheader, now => :sat) AS stripe_wrong_secret;
SELECT consumer, event_id, status FROM wh WHERE consumer = 'w_stripe';

-- errors of the receiver's own arguments
SELECT try($$SELECT idem_webhook_receive('w_err', 'github', ARRAY['s'], 'e', 'x', 'h')$$)
    AS unknown_scheme;
SELECT try($$SELECT idem_webhook_receive('w_err', 'stripe', ARRAY['s'], 'e', 'x',
    't=1,v1=00', '1')$$) AS stripe_with_timestamp;
SELECT try($$SELECT idem_webhook_receive('w_err', 'standard', ARRAY['whsec_###'], 'e',
    'x', 'v1,AAAA', '1')$$) AS bad_secret;
SELECT try($$SELECT idem_webhook_receive('w_err', 'standard', ARRAY['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'],
    NULL, 'x', 'v1,AAAA', '1')$$) AS null_event_id;
SELECT try($$SELECT idem_webhook_receive(NULL, 'standard', ARRAY['s'], 'e', 'x', 'h', '1')$$)
    AS null_consumer;
SELECT count(*) AS err_rows FROM wh WHERE consumer = 'w_err';
