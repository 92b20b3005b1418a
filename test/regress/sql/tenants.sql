-- Tenants apart (docs/tenants.md): scope, consumer and topic prefixes bound to roles.
-- Two tenants, a and b, each an application role in a bound group role; every stateful function
-- across tenants is refused with 42501 and writes nothing, within a tenant it works; with no
-- binding nothing changes (the outbox's dedup_key hijack of the issue works there, and is
-- refused once bound); a 0.7 schema without the table is "no binding".
\set VERBOSITY default
SET client_min_messages = warning;
\i test/regress/helpers.sql
CREATE ROLE idem_ten_users NOLOGIN;
CREATE ROLE idem_ten_a NOLOGIN;
CREATE ROLE idem_ten_b NOLOGIN;
CREATE ROLE idem_ten_a_app NOLOGIN IN ROLE idem_ten_users, idem_ten_a;
CREATE ROLE idem_ten_b_app NOLOGIN IN ROLE idem_ten_users, idem_ten_b;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA idempotency TO idem_ten_users;
-- try() with the event ids of the messages masked
CREATE FUNCTION try_ev(sql text) RETURNS text LANGUAGE sql AS $$
    SELECT regexp_replace(try(sql, true), '[0-9a-f]{8}-[0-9a-f-]{27}', '<event id>', 'g')
$$;
GRANT EXECUTE ON FUNCTION try(text, boolean), try_ev(text) TO idem_ten_users;
-- What every table of the extension holds: unchanged by a refused call.
CREATE FUNCTION ten_state() RETURNS text LANGUAGE sql SECURITY DEFINER AS $$
    SELECT md5(concat_ws('|',
        (SELECT string_agg(r::text, ',' ORDER BY r.scope, r.key) FROM idempotency.records r),
        (SELECT string_agg(i::text, ',' ORDER BY i.consumer, i.event_id) FROM idempotency.inbox i),
        (SELECT string_agg(e::text, ',' ORDER BY e.consumer, e.entity_key) FROM idempotency.inbox_entities e),
        (SELECT string_agg(o::text, ',' ORDER BY o.seq) FROM idempotency.outbox o)))
$$;
GRANT EXECUTE ON FUNCTION ten_state() TO idem_ten_users;
CREATE TEMP TABLE ids (name text PRIMARY KEY, id uuid);
GRANT ALL ON ids TO idem_ten_users;

-- No binding: exactly today's behaviour, the hijack of the 0.8 review included -------------
SELECT count(*) AS bindings FROM idempotency.idem_bindings;
-- b emits first into a's topic under the dedup_key a will use ...
SET ROLE idem_ten_b_app;
INSERT INTO ids SELECT 'evil', idempotency.idem_outbox_emit('a.orders', '{"pay_to": "b"}', dedup_key => 'order:1:paid');
SELECT outcome FROM idempotency.idem_claim('a/pay', 'k-open');
RESET ROLE;
-- ... and a's own emit returns b's event id; the relay delivers b's payload
SET ROLE idem_ten_a_app;
SELECT idempotency.idem_outbox_emit('a.orders', '{"pay_to": "a"}', dedup_key => 'order:1:paid')
       = (SELECT id FROM ids WHERE name = 'evil') AS a_got_b_event;
SELECT payload FROM idempotency.idem_outbox_next('a.orders');
SELECT status, attempt FROM idempotency.idem_lookup('a/pay', 'k-open');
RESET ROLE;
DELETE FROM idempotency.outbox;
DELETE FROM idempotency.records;

-- Bindings -----------------------------------------------------------------------------------------
SELECT idempotency.idem_bind('scope', 'a/', 'idem_ten_a') AS new_a, idempotency.idem_bind('scope', 'b/', 'idem_ten_b') AS new_b;
SELECT idempotency.idem_bind('consumer', 'a-', 'idem_ten_a'), idempotency.idem_bind('consumer', 'b-', 'idem_ten_b');
SELECT idempotency.idem_bind('topic', 'a.', 'idem_ten_a'), idempotency.idem_bind('topic', 'b.', 'idem_ten_b');
-- the longest prefix wins: a/shared/ is b's
SELECT idempotency.idem_bind('scope', 'a/shared/', 'idem_ten_a') AS new_shared;
SELECT idempotency.idem_bind('scope', 'a/shared/', 'idem_ten_b') AS moved_shared;
SELECT * FROM idempotency.idem_bindings;
-- bad arguments
SELECT try($$SELECT idempotency.idem_bind('queue', 'a/', 'idem_ten_a')$$, true);
SELECT try($$SELECT idempotency.idem_bind('scope', NULL, 'idem_ten_a')$$);
SELECT try($$SELECT idempotency.idem_bind('scope', 'a/', 'idem_no_such_role')$$);
SELECT try($$SELECT idempotency.idem_unbind(NULL, 'a/')$$);
-- an application role cannot change or read the bindings, even with EXECUTE
SET ROLE idem_ten_b_app;
SELECT try($$SELECT idempotency.idem_bind('scope', 'a/', 'idem_ten_b')$$);
SELECT try($$SELECT idempotency.idem_unbind('scope', 'a/')$$);
SELECT try($$SELECT * FROM idempotency.idem_bindings$$);
SELECT try($$SELECT * FROM idempotency.bindings$$);
RESET ROLE;

-- a's state, written by a within its own names ------------------------------------------------------
SET ROLE idem_ten_a_app;
SELECT outcome, attempt FROM idempotency.idem_claim('a/pay', 'k1', '\x01', lease => '1 ms');
SELECT outcome FROM idempotency.idem_claim('a/pay', 'k2', '\x02');
SELECT idempotency.idem_complete('a/pay', 'k2', 1, 'r2', '{"ok": true}', 201);
SELECT idempotency.idem_inbox_receive('a-billing', 'e1', '\x01', true);
SELECT idempotency.idem_inbox_receive('a-billing', 'e2', '\x02', true);
SELECT event_id, attempt FROM idempotency.idem_inbox_next('a-billing', 1);
INSERT INTO ids SELECT 'a1', idempotency.idem_outbox_emit('a.orders', '{"n": 1}', dedup_key => 'order:1:paid');
INSERT INTO ids SELECT 'a2', idempotency.idem_outbox_emit('a.orders', '{"n": 2}');
SELECT payload, attempt FROM idempotency.idem_outbox_next('a.orders', 1);
SELECT pg_sleep(0.01);
RESET ROLE;
SELECT ten_state() AS before \gset

-- b against a's names: every function refused, nothing written -----------------------------------
SET ROLE idem_ten_b_app;
SET idempotency.claim_scan = on;
SET idempotency.direct_access = on;
SELECT try($$SELECT * FROM idempotency.idem_claim('a/pay', 'k3')$$);
EXPLAIN (COSTS OFF) SELECT * FROM idempotency.idem_claim('a/pay', 'k3');
SELECT try($$SELECT * FROM idempotency.idem_claim('a/pay', 'k2', '\x02')$$);
SELECT try($$SELECT idempotency.idem_claim('a/pay', 'k3')$$);
SET idempotency.claim_scan = off;
SELECT try($$SELECT * FROM idempotency.idem_claim('a/pay', 'k3')$$);
EXPLAIN (COSTS OFF) SELECT * FROM idempotency.idem_claim('a/pay', 'k3');
SET idempotency.direct_access = off;
SELECT try($$SELECT * FROM idempotency.idem_claim('a/pay', 'k3')$$);
SELECT try($$SELECT * FROM idempotency.idem_claim('a/pay', 'k3', wait => false)$$);
SET idempotency.claim_scan = on;
SELECT try($$SELECT * FROM idempotency.idem_claim('a/pay', 'k3')$$);
RESET idempotency.claim_scan;
RESET idempotency.direct_access;
SELECT try($$SELECT idempotency.idem_complete('a/pay', 'k1', 1, 'forged')$$, true);
SELECT try($$SELECT idempotency.idem_fail('a/pay', 'k1', 1, false)$$);
SELECT try($$SELECT idempotency.idem_heartbeat('a/pay', 'k1', 1)$$);
SELECT try($$SELECT * FROM idempotency.idem_lookup('a/pay', 'k2')$$);
-- one refusal in full
SELECT * FROM idempotency.idem_lookup('a/pay', 'k2');
SELECT try($$SELECT idempotency.idem_inbox_receive('a-billing', 'e9', '\x09', true)$$);
SELECT try($$SELECT idempotency.idem_inbox_receive('a-billing', 'e9', '\x09', false)$$);
SET idempotency.direct_access = off;
SELECT try($$SELECT idempotency.idem_inbox_receive('a-billing', 'e9')$$);
RESET idempotency.direct_access;
SELECT try($$SELECT * FROM idempotency.idem_inbox_next('a-billing')$$);
SELECT try($$SELECT idempotency.idem_inbox_done('a-billing', 'e1', 1)$$);
SELECT try($$SELECT idempotency.idem_inbox_fail('a-billing', 'e1', 1, false)$$);
-- idem_webhook_receive refuses before it looks at the delivery (forged here)
SELECT try($$SELECT idempotency.idem_webhook_receive('a-billing', 'standard',
    ARRAY['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'], 'msg_1', '{}'::text, 'v1,forged', '1614265330')$$);
SELECT try($$SELECT idempotency.idem_webhook_receive('a-billing', 'standard',
    ARRAY['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'], 'msg_p5jXN8AQM9LWM0D4loKWxJek',
    '{"test": 2432232314}'::text, 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=', '1614265330',
    now => to_timestamp(1614265330))$$);
-- the hijack: b's emit under a's dedup_key is refused
SELECT try($$SELECT idempotency.idem_outbox_emit('a.orders', '{"pay_to": "b"}'::jsonb, dedup_key => 'order:1:paid')$$, true);
SELECT try($$SELECT idempotency.idem_outbox_emit('a.orders', '\x00'::bytea)$$);
SELECT try($$SELECT * FROM idempotency.idem_outbox_next('a.orders')$$);
-- done / fail / requeue by event id: the event's own topic decides, whatever topic is named
SELECT try_ev(format('SELECT idempotency.idem_outbox_done(%L, 1)', id)) FROM ids WHERE name = 'a1';
SELECT try_ev(format('SELECT idempotency.idem_outbox_done(%L, 1, %L)', id, 'b.orders')) FROM ids WHERE name = 'a1';
SELECT try_ev(format('SELECT idempotency.idem_outbox_done(%L, 1, %L)', id, 'a.orders')) FROM ids WHERE name = 'a1';
SELECT try_ev(format('SELECT idempotency.idem_outbox_fail(%L, 1, false)', id)) FROM ids WHERE name = 'a1';
SELECT try_ev(format('SELECT idempotency.idem_outbox_fail(%L, 1, false, NULL, %L)', id, 'c.any')) FROM ids WHERE name = 'a1';
SELECT try_ev(format('SELECT idempotency.idem_outbox_requeue(%L)', id)) FROM ids WHERE name = 'a2';
-- an unknown event id is not refused: the call's own error
SELECT try($$SELECT idempotency.idem_outbox_done('00000000-0000-7000-8000-000000000000', 1)$$);
-- idem_stuck lists only the stuck records of scopes b may use: none of a's
SELECT count(*) AS b_sees_stuck FROM idempotency.idem_stuck();
SELECT ten_state() = :'before' AS nothing_written;
RESET ROLE;
SELECT ten_state() = :'before' AS nothing_written;

-- a within its own names: everything works ---------------------------------------------------------
SET ROLE idem_ten_a_app;
SELECT scope, key, attempt FROM idempotency.idem_stuck();
SELECT outcome, attempt FROM idempotency.idem_claim('a/pay', 'k1', '\x01');
SELECT (idempotency.idem_heartbeat('a/pay', 'k1', 2) > now()) AS extended;
SELECT idempotency.idem_complete('a/pay', 'k1', 2, 'r1');
SELECT idempotency.idem_fail('a/pay', 'k4', 1) FROM idempotency.idem_claim('a/pay', 'k4') WHERE outcome = 'claimed';
SELECT outcome, resource_id FROM idempotency.idem_claim('a/pay', 'k2', '\x02');
SELECT status, resource_id FROM idempotency.idem_lookup('a/pay', 'k2');
SELECT idempotency.idem_inbox_done('a-billing', 'e1', 1);
SELECT event_id, attempt FROM idempotency.idem_inbox_next('a-billing');
SELECT idempotency.idem_inbox_fail('a-billing', 'e2', 1, false);
SELECT idempotency.idem_outbox_done(id, 1) FROM ids WHERE name = 'a1';
SELECT payload, attempt FROM idempotency.idem_outbox_next('a.orders');
SELECT idempotency.idem_outbox_fail(id, 1, false, 'gave up', 'a.orders') FROM ids WHERE name = 'a2';
SELECT idempotency.idem_outbox_requeue(id) FROM ids WHERE name = 'a2';
-- a's dedup_key is a's: the same id again
SELECT idempotency.idem_outbox_emit('a.orders', '{"n": 1}', dedup_key => 'order:1:paid') = id AS same_event
FROM ids WHERE name = 'a1';
-- a/shared/ is b's (the longer prefix)
SELECT try($$SELECT * FROM idempotency.idem_claim('a/shared/x', 'k')$$) AS a_in_a_shared;
RESET ROLE;

-- b within its own names, and unbound names stay open to both ---------------------------------------
SET ROLE idem_ten_b_app;
SELECT outcome FROM idempotency.idem_claim('b/pay', 'k1');
SELECT outcome FROM idempotency.idem_claim('a/shared/x', 'k');
SELECT idempotency.idem_inbox_receive('b-mail', 'e1');
SELECT idempotency.idem_outbox_emit('b.mail', '{}') IS NOT NULL AS emitted;
SELECT outcome FROM idempotency.idem_claim('c/open', 'k1');
SELECT idempotency.idem_inbox_receive('c-open', 'e1');
SELECT idempotency.idem_outbox_emit('c.open', '{}') IS NOT NULL AS emitted;
RESET ROLE;
SET ROLE idem_ten_a_app;
SELECT outcome FROM idempotency.idem_claim('c/open', 'k1');
SELECT try($$SELECT outcome FROM idempotency.idem_claim('b/pay', 'k1')$$);
RESET ROLE;
-- a superuser has the privileges of every role
SELECT outcome FROM idempotency.idem_claim('b/pay', 'k1');

-- The empty prefix closes every name that no longer prefix binds ------------------------------------
SELECT idempotency.idem_bind('scope', '', 'idem_ten_a');
SET ROLE idem_ten_b_app;
SELECT try($$SELECT outcome FROM idempotency.idem_claim('c/open', 'k2')$$);
SELECT outcome FROM idempotency.idem_claim('b/pay', 'k2');
RESET ROLE;
SET ROLE idem_ten_a_app;
SELECT outcome FROM idempotency.idem_claim('c/open', 'k2');
RESET ROLE;
SELECT idempotency.idem_unbind('scope', ''), idempotency.idem_unbind('scope', '');

-- A binding counts from the next statement, and a rolled-back one never ----------------------------
BEGIN;
SELECT idempotency.idem_bind('scope', 'c/', 'idem_ten_a');
SET LOCAL ROLE idem_ten_b_app;
SELECT try($$SELECT outcome FROM idempotency.idem_claim('c/open', 'k3')$$);
ROLLBACK;
SET ROLE idem_ten_b_app;
SELECT outcome FROM idempotency.idem_claim('c/open', 'k3');
RESET ROLE;
-- unbound again: a's names open to b
SELECT idempotency.idem_unbind('scope', 'a/');
SET ROLE idem_ten_b_app;
SELECT outcome, resource_id FROM idempotency.idem_claim('a/pay', 'k2', '\x02');
RESET ROLE;
-- direct changes of the table count as well (its trigger)
DELETE FROM idempotency.bindings;
SELECT count(*) AS bindings FROM idempotency.idem_bindings;
SET ROLE idem_ten_b_app;
SELECT idempotency.idem_inbox_receive('a-billing', 'e7');
RESET ROLE;
INSERT INTO idempotency.bindings VALUES ('consumer', 'a-', 'idem_ten_a');
SET ROLE idem_ten_b_app;
SELECT try($$SELECT idempotency.idem_inbox_receive('a-billing', 'e8')$$);
RESET ROLE;
TRUNCATE idempotency.bindings;
SET ROLE idem_ten_b_app;
SELECT idempotency.idem_inbox_receive('a-billing', 'e8');
RESET ROLE;

-- A 0.7 schema has no bindings table: no binding, until ALTER EXTENSION UPDATE ----------------------
CREATE DATABASE idem_tenants_07;
\c idem_tenants_07
SET client_min_messages = warning;
-- 0.7's functions are in public (1.x's were), found unqualified
SET search_path = public, idempotency;
\i test/regress/helpers.sql
CREATE EXTENSION idempotency VERSION '0.7';
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO idem_ten_users;
SET ROLE idem_ten_b_app;
SELECT outcome FROM idem_claim('a/pay', 'k1');
SELECT idem_inbox_receive('a-billing', 'e1');
SELECT idem_outbox_emit('a.orders', '{}') IS NOT NULL AS emitted;
RESET ROLE;
SELECT to_regclass('idempotency.bindings') AS bindings_table;
SELECT (SELECT lanname FROM pg_language l WHERE l.oid = prolang) AS language, prosecdef FROM pg_proc WHERE oid = 'idem_stuck(interval)'::regprocedure;
ALTER EXTENSION idempotency UPDATE TO '1.0.0';
-- idem_stuck checks as its caller from 0.8 on: C, not SECURITY DEFINER; its grants are kept
SELECT (SELECT lanname FROM pg_language l WHERE l.oid = prolang) AS language, prosecdef, proconfig,
       has_function_privilege('idem_ten_users', oid, 'EXECUTE') AS users_execute,
       has_function_privilege('public', oid, 'EXECUTE') AS public_execute
FROM pg_proc WHERE oid = 'idem_stuck(interval)'::regprocedure;
SELECT idem_bind('scope', 'a/', 'idem_ten_a');
-- the same backend sees the new table and its binding
SET ROLE idem_ten_b_app;
SELECT try($$SELECT outcome FROM idem_claim('a/pay', 'k1')$$);
SELECT idem_inbox_receive('a-billing', 'e1');
RESET ROLE;
\c contrib_regression
SET client_min_messages = warning;
DROP DATABASE idem_tenants_07;

DELETE FROM idempotency.records;
DELETE FROM idempotency.inbox;
DELETE FROM idempotency.outbox;
DROP FUNCTION ten_state(), try_ev(text);
DROP OWNED BY idem_ten_users;
DROP ROLE idem_ten_a_app, idem_ten_b_app, idem_ten_a, idem_ten_b, idem_ten_users;
