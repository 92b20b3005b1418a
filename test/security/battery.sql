-- Every entry point of the extension, in every outcome, called by the session's role under the
-- session's (hostile) search path. Each line: public.attack_run(call, sql, want): sql runs with @T@
-- replaced by the session's tag (fresh scopes, consumers and topics per session), its first
-- column as text is compared with want (a role that may not execute the call's function records
-- it as unreachable). The text of every call is written qualified (pg_catalog.x, ::pg_catalog.t,
-- OPERATOR(pg_catalog.op)) so that only the extension can reach a decoy.
\pset tuples_only on
\pset format unaligned
-- records -------------------------------------------------------------------------------------
SELECT public.attack_run('idem_claim claimed', $$SELECT outcome FROM idempotency.idem_claim('@T@', 'k1', '\x01')$$, 'claimed');
SELECT public.attack_run('idem_claim in_progress', $$SELECT outcome FROM idempotency.idem_claim('@T@', 'k1', '\x01', wait => false)$$, 'in_progress');
SELECT public.attack_run('idem_heartbeat', $$SELECT idempotency.idem_heartbeat('@T@', 'k1', 1, '1 minute') IS NOT NULL$$, 'true');
SELECT public.attack_run('idem_heartbeat IK002', $$SELECT idempotency.idem_heartbeat('@T@', 'k1', 7)$$, 'ERROR IK002');
SELECT public.attack_run('idem_lookup processing', $$SELECT status FROM idempotency.idem_lookup('@T@', 'k1')$$, 'processing');
SELECT public.attack_run('idem_complete', $$SELECT idempotency.idem_complete('@T@', 'k1', 1, 'res-1', '{"ok": true}', 201, '\x7b7d', '{"Location": "/x"}')$$, 'true');
SELECT public.attack_run('idem_claim replayed', $$SELECT pg_catalog.concat_ws(' ', outcome, resource_id, response_status) FROM idempotency.idem_claim('@T@', 'k1', '\x01')$$, 'replayed res-1 201');
SELECT public.attack_run('idem_claim mismatch', $$SELECT outcome FROM idempotency.idem_claim('@T@', 'k1', '\x02')$$, 'mismatch');
SELECT public.attack_run('idem_http_answer replayed', $$SELECT pg_catalog.concat_ws(' ', a.status, a.headers OPERATOR(pg_catalog.->>) 'Idempotent-Replayed', pg_catalog.encode(a.body, 'escape')) FROM idempotency.idem_claim('@T@', 'k1', '\x01') c, idempotency.idem_http_answer(c) a$$, '201 true {}', 'idem_claim');
SELECT public.attack_run('idem_http_answer of the key', $$SELECT pg_catalog.concat_ws(' ', a.status, a.headers OPERATOR(pg_catalog.->>) 'Location') FROM idempotency.idem_http_answer('@T@', 'k1') a$$, '201 /x', 'idempotency.idem_http_answer(text,text)');
SELECT public.attack_run('idem_lookup completed', $$SELECT pg_catalog.concat_ws(' ', status, resource_id) FROM idempotency.idem_lookup('@T@', 'k1')$$, 'completed res-1');
SELECT public.attack_run('idem_complete IK003', $$SELECT idempotency.idem_complete('@T@', 'k1', 1)$$, 'ERROR IK003');
SELECT public.attack_run('idem_complete IK001', $$SELECT idempotency.idem_complete('@T@', 'nope', 1)$$, 'ERROR IK001');
SELECT public.attack_run('idem_claim claimed k2', $$SELECT outcome FROM idempotency.idem_claim('@T@', 'k2')$$, 'claimed');
SELECT public.attack_run('idem_complete IK002', $$SELECT idempotency.idem_complete('@T@', 'k2', 2)$$, 'ERROR IK002');
SELECT public.attack_run('idem_fail retryable', $$SELECT idempotency.idem_fail('@T@', 'k2', 1)$$, 'true');
SELECT public.attack_run('idem_claim after a retryable failure', $$SELECT pg_catalog.concat_ws(' ', outcome, attempt) FROM idempotency.idem_claim('@T@', 'k2')$$, 'claimed 2');
SELECT public.attack_run('idem_fail final', $$SELECT idempotency.idem_fail('@T@', 'k2', 2, false, '{"declined": true}', 402)$$, 'true');
SELECT public.attack_run('idem_claim replays a failure', $$SELECT pg_catalog.concat_ws(' ', outcome, response_status) FROM idempotency.idem_claim('@T@', 'k2')$$, 'replayed 402');
SELECT public.attack_run('idem_fail IK003', $$SELECT idempotency.idem_fail('@T@', 'k2', 2)$$, 'ERROR IK003');
SELECT public.attack_run('idem_claim short lease', $$SELECT outcome FROM idempotency.idem_claim('@T@', 'k3', NULL, '1 millisecond', '1 hour')$$, 'claimed');
SELECT public.attack_run('idem_claim short ttl', $$SELECT outcome FROM idempotency.idem_claim('@T@', 'k4', NULL, '1 millisecond', '2 milliseconds')$$, 'claimed');
SELECT public.attack_run('idem_complete k4', $$SELECT idempotency.idem_complete('@T@', 'k4', 1, 'r4')$$, 'true');
SELECT public.attack_run('pg_sleep', $$SELECT 'slept' FROM pg_catalog.pg_sleep(0.05)$$, 'slept');
SELECT public.attack_run('idem_stuck', $$SELECT pg_catalog.string_agg(s.key, ',') FROM idempotency.idem_stuck() s WHERE s.scope OPERATOR(pg_catalog.=) '@T@'$$, 'k3', 'idem_claim');
SELECT public.attack_run('idem_claim reclaimed', $$SELECT pg_catalog.concat_ws(' ', outcome, attempt) FROM idempotency.idem_claim('@T@', 'k3')$$, 'reclaimed 2');
SELECT public.attack_run('idem_complete fenced', $$SELECT idempotency.idem_complete('@T@', 'k3', 1, 'r3')$$, 'ERROR IK002');
SELECT public.attack_run('idem_complete reclaimed', $$SELECT idempotency.idem_complete('@T@', 'k3', 2, 'r3')$$, 'true');
SELECT public.attack_run('idem_lookup expired', $$SELECT pg_catalog.count(*)::pg_catalog.text FROM idempotency.idem_lookup('@T@', 'k4')$$, '0');
SELECT public.attack_run('idem_claim expired', $$SELECT pg_catalog.concat_ws(' ', outcome, attempt) FROM idempotency.idem_claim('@T@', 'k4')$$, 'claimed 2');
SELECT public.attack_run('idem_claim in a FROM list', $$SELECT pg_catalog.string_agg(c.outcome, ',') FROM (VALUES ('k5'), ('k6')) v(k), LATERAL idempotency.idem_claim('@T@', v.k, wait => false) c$$, 'claimed,claimed');
SELECT public.attack_run('idem_claim 22023', $$SELECT outcome FROM idempotency.idem_claim('', 'k')$$, 'ERROR 22023');
SELECT public.attack_run('idem_claim 22004', $$SELECT outcome FROM idempotency.idem_claim(NULL, 'k')$$, 'ERROR 22004');
SELECT public.attack_run('idem_key_from_header', $$SELECT idempotency.idem_key_from_header('"abc"')$$, 'abc');
-- fingerprints and utilities (PUBLIC)
SELECT public.attack_run('idem_fingerprint', $$SELECT pg_catalog.length(idempotency.idem_fingerprint('{"b": 1, "a": [1.0, "x"]}'::pg_catalog.jsonb))::pg_catalog.text$$, '32');
SELECT public.attack_run('idem_fingerprint bytea', $$SELECT idempotency.idem_fingerprint('{"a": 1.0}'::pg_catalog.bytea) OPERATOR(pg_catalog.=) idempotency.idem_fingerprint('{"a":1}'::pg_catalog.text)$$, 'true');
SELECT public.attack_run('idem_canonical_json', $$SELECT idempotency.idem_canonical_json('{"b": 1, "a": 2}'::pg_catalog.text)$$, '{"a":2,"b":1}');
SELECT public.attack_run('idem_uuid_v7_time', $$SELECT idempotency.idem_uuid_v7_time(idempotency.idem_uuid_v7()) IS NOT NULL$$, 'true');
SELECT public.attack_run('idem_hmac_sha256', $$SELECT pg_catalog.length(idempotency.idem_hmac_sha256('\x01'::pg_catalog.bytea, '\x02'::pg_catalog.bytea))::pg_catalog.text$$, '32');
SELECT public.attack_run('idem_secure_equal', $$SELECT idempotency.idem_secure_equal('\x0102'::pg_catalog.bytea, '\x0102'::pg_catalog.bytea)$$, 'true');
-- inbox ---------------------------------------------------------------------------------------
SELECT public.attack_run('idem_inbox_receive new', $$SELECT idempotency.idem_inbox_receive('@T@/c', 'e1', '\x01')$$, 'new');
SELECT public.attack_run('idem_inbox_receive duplicate', $$SELECT idempotency.idem_inbox_receive('@T@/c', 'e1', '\x01')$$, 'duplicate');
SELECT public.attack_run('idem_inbox_receive mismatch', $$SELECT idempotency.idem_inbox_receive('@T@/c', 'e1', '\x02')$$, 'mismatch');
SELECT public.attack_run('idem_inbox_receive entity', $$SELECT idempotency.idem_inbox_receive('@T@/c', 'e2', '\x01', entity_key => 'a', entity_seq => 2)$$, 'new');
SELECT public.attack_run('idem_inbox_receive stale', $$SELECT idempotency.idem_inbox_receive('@T@/c', 'e3', '\x01', entity_key => 'a', entity_seq => 1)$$, 'stale');
SELECT public.attack_run('idem_inbox_receive 22023', $$SELECT idempotency.idem_inbox_receive('', 'e1')$$, 'ERROR 22023');
SELECT public.attack_run('idem_inbox_receive queued q1', $$SELECT idempotency.idem_inbox_receive('@T@/q', 'q1', '\x01', true, 'order.paid', '\x7b7d')$$, 'new');
SELECT public.attack_run('idem_inbox_receive queued q2', $$SELECT idempotency.idem_inbox_receive('@T@/q', 'q2', '\x02', true, 'order.paid', '\x7b7d')$$, 'new');
SELECT public.attack_run('idem_inbox_receive queued q3', $$SELECT idempotency.idem_inbox_receive('@T@/q', 'q3', '\x03', true)$$, 'new');
SELECT public.attack_run('idem_inbox_receive queued x1', $$SELECT idempotency.idem_inbox_receive('@T@/q', 'x1', NULL, true, entity_key => 'x', entity_seq => 1)$$, 'new');
SELECT public.attack_run('idem_inbox_receive queued x2', $$SELECT idempotency.idem_inbox_receive('@T@/q', 'x2', NULL, true, entity_key => 'x', entity_seq => 2)$$, 'new');
SELECT public.attack_run('idem_inbox_receive queued duplicate', $$SELECT idempotency.idem_inbox_receive('@T@/q', 'q1', '\x01', true)$$, 'duplicate');
SELECT public.attack_run('idem_inbox_next', $$SELECT pg_catalog.string_agg(pg_catalog.concat(n.event_id, ':', n.attempt), ',') FROM idempotency.idem_inbox_next('@T@/q', 10) n$$, 'q1:1,q2:1,q3:1,x1:1,x2:1');
SELECT public.attack_run('idem_inbox_next empty', $$SELECT pg_catalog.count(*)::pg_catalog.text FROM idempotency.idem_inbox_next('@T@/q', 10)$$, '0');
SELECT public.attack_run('idem_inbox_done', $$SELECT idempotency.idem_inbox_done('@T@/q', 'q1', 1)$$, 'done');
SELECT public.attack_run('idem_inbox_done IK003', $$SELECT idempotency.idem_inbox_done('@T@/q', 'q1', 1)$$, 'ERROR IK003');
SELECT public.attack_run('idem_inbox_done IK002', $$SELECT idempotency.idem_inbox_done('@T@/q', 'q2', 5)$$, 'ERROR IK002');
SELECT public.attack_run('idem_inbox_done IK001', $$SELECT idempotency.idem_inbox_done('@T@/q', 'nope', 1)$$, 'ERROR IK001');
SELECT public.attack_run('idem_inbox_done x2', $$SELECT idempotency.idem_inbox_done('@T@/q', 'x2', 1)$$, 'done');
SELECT public.attack_run('idem_inbox_done stale', $$SELECT idempotency.idem_inbox_done('@T@/q', 'x1', 1)$$, 'stale');
SELECT public.attack_run('idem_inbox_done_batch left out', $$SELECT pg_catalog.count(*)::pg_catalog.text FROM idempotency.idem_inbox_done_batch('@T@/q', ARRAY['q1', 'q2', 'nope'], ARRAY[1, 5, 1])$$, '0');
SELECT public.attack_run('idem_inbox_fail retryable', $$SELECT idempotency.idem_inbox_fail('@T@/q', 'q2', 1, true, 'boom')$$, 'received');
SELECT public.attack_run('idem_inbox_fail dead', $$SELECT idempotency.idem_inbox_fail('@T@/q', 'q3', 1, false, 'bad')$$, 'failed');
SELECT public.attack_run('idem_inbox_next again', $$SELECT pg_catalog.string_agg(pg_catalog.concat(n.event_id, ':', n.attempt), ',') FROM idempotency.idem_inbox_next('@T@/q', 10, '1 minute') n$$, 'q2:2');
SELECT public.attack_run('idem_inbox_fail budget', $$SELECT idempotency.idem_inbox_fail('@T@/q', 'q2', 2, true, 'again', 2)$$, 'failed');
-- webhooks ------------------------------------------------------------------------------------
SELECT public.attack_run('idem_webhook_receive new', $$SELECT idempotency.idem_webhook_receive('@T@/w', 'standard', ARRAY['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'], 'msg_1', '{"a": 1}'::pg_catalog.text, idempotency.idem_webhook_sign_standard('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'msg_1', '1700000000', '{"a": 1}'::pg_catalog.text), '1700000000', now => pg_catalog.to_timestamp(1700000000))$$, 'new');
SELECT public.attack_run('idem_webhook_receive duplicate', $$SELECT idempotency.idem_webhook_receive('@T@/w', 'standard', ARRAY['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'], 'msg_1', '\x7b2261223a20317d'::pg_catalog.bytea, idempotency.idem_webhook_sign_standard('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'msg_1', '1700000000', '{"a": 1}'::pg_catalog.text), '1700000000', now => pg_catalog.to_timestamp(1700000000))$$, 'duplicate');
SELECT public.attack_run('idem_webhook_receive queued', $$SELECT idempotency.idem_webhook_receive('@T@/w', 'standard', ARRAY['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'], 'msg_2', '{"a": 2}'::pg_catalog.text, idempotency.idem_webhook_sign_standard('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'msg_2', '1700000000', '{"a": 2}'::pg_catalog.text), '1700000000', 'ping', true, now => pg_catalog.to_timestamp(1700000000))$$, 'new');
SELECT public.attack_run('idem_webhook_receive invalid_signature', $$SELECT idempotency.idem_webhook_receive('@T@/w', 'standard', ARRAY['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'], 'msg_3', '{"a": 3}'::pg_catalog.text, 'v1,AAAA', '1700000000', now => pg_catalog.to_timestamp(1700000000))$$, 'invalid_signature');
SELECT public.attack_run('idem_webhook_receive stale_timestamp', $$SELECT idempotency.idem_webhook_receive('@T@/w', 'standard', ARRAY['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'], 'msg_1', '{"a": 1}'::pg_catalog.text, idempotency.idem_webhook_sign_standard('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'msg_1', '1700000000', '{"a": 1}'::pg_catalog.text), '1700000000', now => pg_catalog.to_timestamp(1800000000))$$, 'stale_timestamp');
SELECT public.attack_run('idem_webhook_receive stripe', $$SELECT idempotency.idem_webhook_receive('@T@/w', 'stripe', ARRAY['whsec_test_secret_0123456789abcdefghij'], 'evt_1', '{"id": "evt_1"}'::pg_catalog.text, idempotency.idem_webhook_sign_stripe('whsec_test_secret_0123456789abcdefghij', 1700000000, '{"id": "evt_1"}'::pg_catalog.text), now => pg_catalog.to_timestamp(1700000000))$$, 'new');
SELECT public.attack_run('idem_webhook_receive invalid_event_id', $$SELECT idempotency.idem_webhook_receive('@T@/w', 'stripe', ARRAY['whsec_test_secret_0123456789abcdefghij'], NULL, '{}'::pg_catalog.text, idempotency.idem_webhook_sign_stripe('whsec_test_secret_0123456789abcdefghij', 1700000000, '{}'::pg_catalog.text), now => pg_catalog.to_timestamp(1700000000))$$, 'invalid_event_id');
SELECT public.attack_run('idem_webhook_verify_standard', $$SELECT idempotency.idem_webhook_verify_standard('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'msg_1', '1700000000', '{"a": 1}'::pg_catalog.text, idempotency.idem_webhook_sign_standard('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'msg_1', '1700000000', '{"a": 1}'::pg_catalog.text), now => pg_catalog.to_timestamp(1700000000))$$, 'true');
SELECT public.attack_run('idem_webhook_verify_standard false', $$SELECT idempotency.idem_webhook_verify_standard(ARRAY['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'], 'msg_1', '1700000000', '\x00'::pg_catalog.bytea, 'v1,AAAA', now => pg_catalog.to_timestamp(1700000000))$$, 'false');
SELECT public.attack_run('idem_webhook_verify_stripe', $$SELECT idempotency.idem_webhook_verify_stripe('whsec_test_secret_0123456789abcdefghij', idempotency.idem_webhook_sign_stripe('whsec_test_secret_0123456789abcdefghij', 1700000000, '{}'::pg_catalog.text), '{}'::pg_catalog.text, now => pg_catalog.to_timestamp(1700000000))$$, 'true');
-- outbox --------------------------------------------------------------------------------------
SELECT public.attack_run('idem_outbox_emit jsonb', $$SELECT idempotency.idem_outbox_emit('@T@/o', '{"n": 1}'::pg_catalog.jsonb, 'key1') IS NOT NULL$$, 'true');
SELECT public.attack_run('idem_outbox_emit text', $$SELECT idempotency.idem_outbox_emit('@T@/o', '{"n": 2}'::pg_catalog.text, 'key1', headers => '{"h": "v"}') IS NOT NULL$$, 'true');
SELECT public.attack_run('idem_outbox_emit bytea', $$SELECT idempotency.idem_outbox_emit('@T@/o', '\x01'::pg_catalog.bytea) IS NOT NULL$$, 'true');
SELECT public.attack_run('idem_outbox_emit dedup', $$SELECT idempotency.idem_outbox_emit('@T@/o', '{"n": 4}'::pg_catalog.jsonb, NULL, 'd1') OPERATOR(pg_catalog.=) idempotency.idem_outbox_emit('@T@/o', '{"n": 5}'::pg_catalog.jsonb, NULL, 'd1')$$, 'true');
SELECT public.attack_run('idem_outbox_emit delayed', $$SELECT idempotency.idem_outbox_emit('@T@/o', '{"n": 6}'::pg_catalog.jsonb, deliver_after => '1 hour') IS NOT NULL$$, 'true');
SELECT public.attack_run('idem_outbox_emit 22023', $$SELECT idempotency.idem_outbox_emit('@T@/o', '{}'::pg_catalog.jsonb, headers => '[]')$$, 'ERROR 22023');
SELECT public.attack_run('idem_outbox_next', $$WITH n AS (SELECT * FROM idempotency.idem_outbox_next('@T@/o', 10)), s AS (INSERT INTO pg_temp.attack_ev SELECT n.event_id, n.attempt, COALESCE(n.key, n.dedup_key, 'bytes') FROM n RETURNING 1) SELECT pg_catalog.count(*)::pg_catalog.text FROM s$$, '3');
SELECT public.attack_run('idem_outbox_done', $$SELECT idempotency.idem_outbox_done(e.event_id, e.attempt) FROM pg_temp.attack_ev e WHERE e.key OPERATOR(pg_catalog.=) 'key1'$$, 'done', 'idem_outbox_next');
SELECT public.attack_run('idem_outbox_done IK003', $$SELECT idempotency.idem_outbox_done(e.event_id, e.attempt, '@T@/o') FROM pg_temp.attack_ev e WHERE e.key OPERATOR(pg_catalog.=) 'key1'$$, 'ERROR IK003', 'idem_outbox_next');
SELECT public.attack_run('idem_outbox_done IK001', $$SELECT idempotency.idem_outbox_done('00000000-0000-0000-0000-000000000000', 1)$$, 'ERROR IK001');
SELECT public.attack_run('idem_outbox_fail retryable', $$SELECT idempotency.idem_outbox_fail(e.event_id, e.attempt, true, 'timeout') FROM pg_temp.attack_ev e WHERE e.key OPERATOR(pg_catalog.=) 'bytes'$$, 'pending', 'idem_outbox_next');
SELECT public.attack_run('idem_outbox_done IK002', $$SELECT idempotency.idem_outbox_done(e.event_id, e.attempt) FROM pg_temp.attack_ev e WHERE e.key OPERATOR(pg_catalog.=) 'bytes'$$, 'ERROR IK002', 'idem_outbox_next');
SELECT public.attack_run('idem_outbox_done_batch left out', $$SELECT pg_catalog.count(*)::pg_catalog.text FROM idempotency.idem_outbox_done_batch(ARRAY(SELECT e.event_id FROM pg_temp.attack_ev e WHERE e.key OPERATOR(pg_catalog.<>) 'd1' ORDER BY e.key), ARRAY(SELECT e.attempt FROM pg_temp.attack_ev e WHERE e.key OPERATOR(pg_catalog.<>) 'd1' ORDER BY e.key))$$, '0', 'idem_outbox_next');
SELECT public.attack_run('idem_outbox_fail_batch left out', $$SELECT pg_catalog.count(*)::pg_catalog.text FROM idempotency.idem_outbox_fail_batch(ARRAY(SELECT e.event_id FROM pg_temp.attack_ev e WHERE e.key OPERATOR(pg_catalog.<>) 'd1' ORDER BY e.key), ARRAY(SELECT e.attempt FROM pg_temp.attack_ev e WHERE e.key OPERATOR(pg_catalog.<>) 'd1' ORDER BY e.key), true, 'x', '@T@/o')$$, '0', 'idem_outbox_next');
SELECT public.attack_run('idem_outbox_fail dead', $$SELECT idempotency.idem_outbox_fail(e.event_id, e.attempt, false, '410 gone', '@T@/o') FROM pg_temp.attack_ev e WHERE e.key OPERATOR(pg_catalog.=) 'd1'$$, 'dead', 'idem_outbox_next');
SELECT public.attack_run('idem_outbox_requeue', $$SELECT idempotency.idem_outbox_requeue(e.event_id) FROM pg_temp.attack_ev e WHERE e.key OPERATOR(pg_catalog.=) 'd1'$$, 'pending', 'idem_outbox_next,idem_outbox_fail');
SELECT public.attack_run('idem_outbox_requeue 55000', $$SELECT idempotency.idem_outbox_requeue(e.event_id, '@T@/o') FROM pg_temp.attack_ev e WHERE e.key OPERATOR(pg_catalog.=) 'bytes'$$, 'ERROR 55000', 'idem_outbox_next,idem_outbox_fail');
SELECT public.attack_run('idem_outbox_requeue IK001', $$SELECT idempotency.idem_outbox_requeue('00000000-0000-0000-0000-000000000000')$$, 'ERROR IK001');
SELECT public.attack_run('idem_outbox_next again', $$SELECT pg_catalog.string_agg(pg_catalog.concat(n.key, ':', n.dedup_key, ':', n.attempt), ',' ORDER BY pg_catalog.concat(n.key, ':', n.dedup_key, ':', n.attempt)) FROM idempotency.idem_outbox_next('@T@/o', 10, '1 minute') n$$, '::2,:d1:2,key1::1', 'idem_outbox_requeue,idem_outbox_done,idem_outbox_fail');
-- a dead event of the seed (the operations role may read idempotency.outbox)
SELECT public.attack_run('idem_outbox_requeue seeded', $$SELECT idempotency.idem_outbox_requeue(o.event_id) FROM idempotency.outbox o WHERE o.topic OPERATOR(pg_catalog.=) 'seed/dead' AND o.status OPERATOR(pg_catalog.=) 'dead' ORDER BY o.seq LIMIT 1$$, 'pending', 'idempotency.outbox');
-- lifecycle -----------------------------------------------------------------------------------
SELECT public.attack_run('idem_purge_batch records', $$SELECT (idempotency.idem_purge_batch('records', 1000)).deleted OPERATOR(pg_catalog.>=) 0$$, 'true');
SELECT public.attack_run('idem_purge_batch inbox', $$SELECT (idempotency.idem_purge_batch('inbox', 1000)).deleted OPERATOR(pg_catalog.>=) 0$$, 'true');
SELECT public.attack_run('idem_purge_batch outbox', $$SELECT (idempotency.idem_purge_batch('outbox', 1000)).deleted OPERATOR(pg_catalog.>=) 0$$, 'true');
SELECT public.attack_run('idem_purge_batch stuck', $$SELECT (idempotency.idem_purge_batch('records', 1, '(0,0)', true, '0')).deleted OPERATOR(pg_catalog.>=) 0$$, 'true');
SELECT public.attack_run('idem_purge_batch 22023', $$SELECT (idempotency.idem_purge_batch('nope', 1)).deleted$$, 'ERROR 22023');
SELECT public.attack_run('idem_purge', $$SELECT idempotency.idem_purge() OPERATOR(pg_catalog.>=) 0$$, 'true');
SELECT public.attack_run('idem_purge with stuck', $$SELECT idempotency.idem_purge(10, 2, true, '1 hour') OPERATOR(pg_catalog.>=) 0$$, 'true');
SELECT public.attack_run('idem_schedule_purge', $$SELECT idempotency.idem_schedule_purge('* * * * *')$$, 'ERROR 55000');
SELECT public.attack_run('idem_unschedule_purge', $$SELECT idempotency.idem_unschedule_purge()$$, 'ERROR 55000');
-- operations ----------------------------------------------------------------------------------
SELECT public.attack_run('idem_stats', $$SELECT pg_catalog.count(*) OPERATOR(pg_catalog.>=) 0 FROM idempotency.idem_stats$$, 'true');
SELECT public.attack_run('idem_inbox_stats', $$SELECT pg_catalog.count(*) OPERATOR(pg_catalog.>=) 0 FROM idempotency.idem_inbox_stats$$, 'true');
SELECT public.attack_run('idem_outbox_stats', $$SELECT pg_catalog.count(*) OPERATOR(pg_catalog.>=) 0 FROM idempotency.idem_outbox_stats$$, 'true');
SELECT public.attack_run('idem_counters', $$SELECT pg_catalog.count(*) OPERATOR(pg_catalog.>) 0 FROM idempotency.idem_counters()$$, 'true');
SELECT public.attack_run('idem_stats_reset', $$SELECT idempotency.idem_stats_reset() IS NOT NULL$$, 'true');
SELECT public.attack_run('idem_counters_enabled', $$SELECT idempotency.idem_counters_enabled()$$, 'true');
-- tenants (0.8): binding needs the owner's rights on idempotency.bindings (42501 for others)
SELECT public.attack_run('idem_bind', $$SELECT idempotency.idem_bind('scope', '@T@/bound/', pg_catalog.to_regrole(current_user))$$, 'true|ERROR 42501');
SELECT public.attack_run('idem_bindings', $$SELECT pg_catalog.count(*) OPERATOR(pg_catalog.>) 0 FROM idempotency.idem_bindings$$, 'true');
SELECT public.attack_run('idem_claim bound scope', $$SELECT outcome FROM idempotency.idem_claim('@T@/bound/1', 'k1')$$, 'claimed');
SELECT public.attack_run('idem_unbind', $$SELECT idempotency.idem_unbind('scope', '@T@/bound/')$$, 'true|ERROR 42501');
-- the procedure commits: not inside attack_run's exception block
SELECT pg_catalog.set_config('attack.call', 'idem_purge_loop', false) \g /dev/null
CALL idempotency.idem_purge_loop(max_duration => '1 minute');
SELECT public.attack_record('idem_purge_loop', CASE WHEN :'SQLSTATE' OPERATOR(pg_catalog.=) '00000' THEN 'ok' ELSE pg_catalog.concat('ERROR ', :'SQLSTATE') END, 'ok', :'LAST_ERROR_MESSAGE');
SELECT pg_catalog.set_config('attack.call', 'idem_purge_loop include_stuck', false) \g /dev/null
CALL idempotency.idem_purge_loop(500, '1 minute', true, '1 hour', '0');
SELECT public.attack_record('idem_purge_loop include_stuck', CASE WHEN :'SQLSTATE' OPERATOR(pg_catalog.=) '00000' THEN 'ok' ELSE pg_catalog.concat('ERROR ', :'SQLSTATE') END, 'ok', :'LAST_ERROR_MESSAGE');
