-- pgTAP: schema, privileges, function signatures, comments, search_path safety and the whole
-- flow as an application role with only the documented grants (docs/operations.md "Privileges").
-- Runs in one transaction that is rolled back: the extension, the roles and the planted
-- objects leave nothing behind.
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off
SET client_min_messages = warning;
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
DROP EXTENSION IF EXISTS idempotency CASCADE;
CREATE EXTENSION idempotency;
-- pgTAP's functions are in public; the extension's in schema idempotency
SET LOCAL search_path = public, idempotency;

SELECT plan(61);

-- Schema and storage -------------------------------------------------------------------------
SELECT has_schema('idempotency');
SELECT has_table('idempotency', 'records', 'records table');
SELECT has_table('idempotency', 'inbox', 'inbox table');
SELECT has_table('idempotency', 'bindings', 'bindings table (tenants)');
SELECT has_view('idempotency', 'idem_bindings', 'idem_bindings view');
SELECT has_view('idempotency', 'idem_stats', 'idem_stats view');
SELECT has_view('idempotency', 'idem_inbox_stats', 'idem_inbox_stats view');
SELECT is((SELECT extversion FROM pg_extension WHERE extname = 'idempotency'), '2.0.0', 'version 2.0.0');

-- PUBLIC may look names up in schema idempotency, never create there; no rights on the tables --
SELECT schema_privs_are('idempotency', 'public', ARRAY['USAGE'], 'PUBLIC: USAGE only on schema idempotency');
SELECT is((SELECT count(*)::integer FROM pg_depend d
           WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idempotency')
             AND d.deptype = 'e'
             AND d.classid <> 'pg_namespace'::regclass
             AND (pg_identify_object(d.classid, d.objid, d.objsubid)).schema IS DISTINCT FROM 'idempotency'),
          0, 'every member of the extension is in schema idempotency');
SELECT is((SELECT nspowner FROM pg_namespace WHERE nspname = 'idempotency'),
          (SELECT extowner FROM pg_extension WHERE extname = 'idempotency'),
          'schema idempotency belongs to the extension''s owner');
SELECT table_privs_are('idempotency', t.relname::name, 'public', ARRAY[]::text[],
                       'PUBLIC: no rights on idempotency.' || t.relname)
FROM pg_class t JOIN pg_namespace n ON n.oid = t.relnamespace
WHERE n.nspname = 'idempotency' AND t.relkind IN ('r', 'p') AND t.relname IN ('records', 'inbox', 'inbox_entities', 'bindings')
ORDER BY t.relname;
SELECT is_empty($$
    SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'idempotency' AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
      AND (has_table_privilege('public', c.oid, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE')
           OR c.relacl::text ~ '(^|[{,])=')
$$, 'PUBLIC: no privilege on any relation in schema idempotency');
SELECT table_privs_are('idempotency', 'idem_stats', 'public', ARRAY[]::text[], 'PUBLIC cannot read idem_stats');
SELECT table_privs_are('idempotency', 'idem_stats', 'pg_monitor', ARRAY['SELECT'], 'pg_monitor reads idem_stats');
SELECT table_privs_are('idempotency', 'idem_inbox_stats', 'pg_monitor', ARRAY['SELECT'], 'pg_monitor reads idem_inbox_stats');
SELECT table_privs_are('idempotency', 'idem_outbox_stats', 'pg_monitor', ARRAY['SELECT'], 'pg_monitor reads idem_outbox_stats');
SELECT table_privs_are('idempotency', 'idem_outbox_stats', 'public', ARRAY[]::text[], 'PUBLIC cannot read idem_outbox_stats');
SELECT table_privs_are('idempotency', 'idem_bindings', 'public', ARRAY[]::text[], 'PUBLIC cannot read idem_bindings');

-- Registered for pg_dump ---------------------------------------------------------------------------
SELECT set_eq($$SELECT n.nspname || '.' || c.relname FROM pg_extension e, unnest(e.extconfig) x
                JOIN pg_class c ON c.oid = x JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE e.extname = 'idempotency'$$,
              ARRAY['idempotency.records', 'idempotency.inbox', 'idempotency.inbox_entities',
                    'idempotency.outbox', 'idempotency.outbox_seq', 'idempotency.bindings'],
              'records, inbox, outbox and bindings tables (and the outbox sequence) are dumped by pg_dump');

-- Function signatures ----------------------------------------------------------------------------
SELECT function_returns('idem_claim', ARRAY['text', 'text', 'bytea', 'interval', 'interval', 'boolean'], 'idem_claim_result');
SELECT function_returns('idem_complete', ARRAY['text', 'text', 'integer', 'text', 'jsonb', 'integer', 'bytea', 'jsonb'], 'boolean');
SELECT function_returns('idem_fail', ARRAY['text', 'text', 'integer', 'boolean', 'jsonb', 'integer', 'bytea', 'jsonb'], 'boolean');
SELECT function_returns('idem_heartbeat', ARRAY['text', 'text', 'integer', 'interval'], 'timestamp with time zone');
SELECT function_returns('idem_lookup', ARRAY['text', 'text'], 'setof record');
SELECT function_returns('idem_fingerprint', ARRAY['jsonb', 'text[]', 'text[]', 'boolean'], 'bytea');
SELECT function_returns('idem_fingerprint', ARRAY['text', 'text[]', 'text[]', 'boolean'], 'bytea');
SELECT function_returns('idem_inbox_receive', ARRAY['text', 'text', 'bytea', 'boolean', 'text', 'bytea', 'text', 'bigint', 'interval'], 'text');
SELECT function_returns('idem_counters', ARRAY[]::text[], 'setof record');
SELECT function_returns('idem_counters_enabled', ARRAY[]::text[], 'boolean');
SELECT function_returns('idem_stats_reset', ARRAY[]::text[], 'timestamp with time zone');
SELECT function_returns('idem_bind', ARRAY['text', 'text', 'regrole'], 'boolean');
SELECT function_returns('idem_unbind', ARRAY['text', 'text'], 'boolean');

-- Every routine and view of the extension has a comment ---------------------------------------------
SELECT is_empty($$
    SELECT pg_describe_object(d.classid, d.objid, 0) FROM pg_depend d
    WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
      AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idempotency')
      AND d.classid IN ('pg_proc'::regclass, 'pg_class'::regclass, 'pg_namespace'::regclass)
      AND obj_description(d.objid, d.classid::regclass::name) IS NULL
      AND NOT (d.classid = 'pg_class'::regclass
               AND (SELECT relkind FROM pg_class WHERE oid = d.objid) IN ('S', 'i', 't'))
$$, 'every function, table, view and schema of the extension has a COMMENT');

-- SECURITY DEFINER routines pin search_path ----------------------------------------------------------
SELECT is_empty($$
    SELECT p.oid::regprocedure FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid
    WHERE d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
      AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idempotency')
      AND p.prosecdef
      AND NOT coalesce(p.proconfig @> ARRAY['search_path=pg_catalog, pg_temp'], false)
$$, 'every SECURITY DEFINER routine has SET search_path = pg_catalog, pg_temp');

-- PUBLIC may execute only the pure functions ---------------------------------------------------------
SELECT is_empty($$
    SELECT p.oid::regprocedure FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid
    WHERE d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
      AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idempotency')
      AND has_function_privilege('public', p.oid, 'EXECUTE')
      AND p.proname NOT IN ('idem_canonical_json', 'idem_fingerprint', 'idem_uuid_v7',
                            'idem_uuid_v7_time', 'idem_hmac_sha256', 'idem_secure_equal',
                            'idem_webhook_verify_standard', 'idem_webhook_verify_stripe',
                            'idem_webhook_sign_standard', 'idem_webhook_sign_stripe',
                            'idem_require_pg_cron', 'idem_key_from_header',
                            'idem_http_errors', 'idem_http_stored', 'idem_http_scope',
                            'idem_http_problem')
      AND p.oid <> 'idempotency.idem_http_answer(idempotency.idem_claim_result)'::regprocedure
$$, 'PUBLIC cannot execute any function that reads or writes stored state');
SELECT ok(has_function_privilege('public', 'idempotency.idem_http_answer(idempotency.idem_claim_result)', 'EXECUTE')
          AND NOT has_function_privilege('public', 'idempotency.idem_http_answer(text,text)', 'EXECUTE'),
          'PUBLIC can execute idem_http_answer of a claim result, not of a stored key');
SELECT ok(NOT has_function_privilege('public', 'idempotency.idem_claim(text,text,bytea,interval,interval,boolean)', 'EXECUTE'),
          'PUBLIC cannot execute idem_claim');
SELECT ok(has_function_privilege('public', 'idempotency.idem_fingerprint(jsonb,text[],text[],boolean)', 'EXECUTE'),
          'PUBLIC can execute idem_fingerprint');

-- The application role: the GRANT recipe of docs/operations.md "Privileges", nothing more ----------------------------
CREATE ROLE idempotency_user NOLOGIN;
GRANT EXECUTE ON FUNCTION
    idempotency.idem_claim(text, text, bytea, interval, interval, boolean),
    idempotency.idem_complete(text, text, integer, text, jsonb, integer, bytea, jsonb),
    idempotency.idem_fail(text, text, integer, boolean, jsonb, integer, bytea, jsonb),
    idempotency.idem_heartbeat(text, text, integer, interval),
    idempotency.idem_lookup(text, text),
    idempotency.idem_http_answer(text, text),
    idempotency.idem_inbox_receive(text, text, bytea, boolean, text, bytea, text, bigint, interval),
    idempotency.idem_inbox_next(text, integer, interval),
    idempotency.idem_inbox_done(text, text, integer),
    idempotency.idem_inbox_fail(text, text, integer, boolean, text, integer),
    idempotency.idem_webhook_receive(text, text, text[], text, bytea, text, text, text, boolean, text, bigint, interval, interval, timestamptz),
    idempotency.idem_webhook_receive(text, text, text[], text, text, text, text, text, boolean, text, bigint, interval, interval, timestamptz)
TO idempotency_user;
CREATE ROLE idem_tap_app NOLOGIN;
GRANT idempotency_user TO idem_tap_app;
CREATE TEMP TABLE flow (step text, result text);
GRANT ALL ON flow TO idem_tap_app;

SET ROLE idem_tap_app;
INSERT INTO flow SELECT 'claim', outcome || ' ' || attempt FROM idempotency.idem_claim('tap/app', 'k1', idempotency.idem_fingerprint('{"a": 1}'::jsonb));
INSERT INTO flow SELECT 'complete', idempotency.idem_complete('tap/app', 'k1', 1, 'r1', '{"ok": true}', 201)::text;
INSERT INTO flow SELECT 'replay', outcome || ' ' || response::text FROM idempotency.idem_claim('tap/app', 'k1', idempotency.idem_fingerprint('{ "a" : 1.0 }'));
INSERT INTO flow SELECT 'lookup', status || ' ' || resource_id FROM idempotency.idem_lookup('tap/app', 'k1');
INSERT INTO flow SELECT 'claim2', outcome FROM idempotency.idem_claim('tap/app', 'k2', NULL, '1 minute');
INSERT INTO flow SELECT 'heartbeat', (idempotency.idem_heartbeat('tap/app', 'k2', 1, '2 minutes') > now())::text;
INSERT INTO flow SELECT 'fail', idempotency.idem_fail('tap/app', 'k2', 1)::text;
INSERT INTO flow SELECT 'inbox', idempotency.idem_inbox_receive('tap-consumer', 'e1', '\x01', true);
INSERT INTO flow SELECT 'inbox-dup', idempotency.idem_inbox_receive('tap-consumer', 'e1', '\x01', true);
INSERT INTO flow SELECT 'inbox-next', event_id || ' ' || attempt FROM idempotency.idem_inbox_next('tap-consumer');
INSERT INTO flow SELECT 'inbox-done', idempotency.idem_inbox_done('tap-consumer', 'e1', 1);
RESET ROLE;
SELECT results_eq($$SELECT step, result FROM flow ORDER BY step$$,
    $$VALUES ('claim', 'claimed 1'), ('claim2', 'claimed'), ('complete', 'true'), ('fail', 'true'),
             ('heartbeat', 'true'), ('inbox', 'new'), ('inbox-done', 'done'), ('inbox-dup', 'duplicate'),
             ('inbox-next', 'e1 1'), ('lookup', 'completed r1'), ('replay', 'replayed {"ok": true}')$$,
    'the application role runs claim/complete/fail/heartbeat/lookup and the inbox with only the recipe grants');

SET ROLE idem_tap_app;
SELECT throws_ok($$SELECT * FROM idempotency.records$$, '42501', NULL, 'app role cannot SELECT idempotency.records');
SELECT throws_ok($$INSERT INTO idempotency.records (scope, key, status, attempt, created_at, updated_at, expires_at)
                   VALUES ('tap/app', 'forged', 'completed', 1, now(), now(), now() + '1 day')$$,
                 '42501', NULL, 'app role cannot INSERT into idempotency.records');
SELECT throws_ok($$UPDATE idempotency.records SET response = '{"forged": true}'$$, '42501', NULL,
                 'app role cannot UPDATE idempotency.records');
SELECT throws_ok($$DELETE FROM idempotency.records$$, '42501', NULL, 'app role cannot DELETE from idempotency.records');
SELECT throws_ok($$SELECT * FROM idempotency.inbox$$, '42501', NULL, 'app role cannot SELECT idempotency.inbox');
SELECT throws_ok($$SELECT * FROM idempotency.idem_stats$$, '42501', NULL, 'app role cannot read idem_stats');
SELECT throws_ok($$SELECT idempotency.idem_stats_reset()$$, '42501', NULL, 'app role cannot reset the counters');
SELECT throws_ok($$SELECT idempotency.idem_purge()$$, '42501', NULL, 'app role cannot purge');
SELECT throws_ok($$SELECT idempotency.idem_bind('scope', 'tap/', 'idem_tap_app')$$, '42501', NULL, 'app role cannot bind');
RESET ROLE;
-- a role without the grant cannot claim
CREATE ROLE idem_tap_stranger NOLOGIN;
SET ROLE idem_tap_stranger;
SELECT throws_ok($$SELECT idempotency.idem_claim('tap/app', 'k3')$$, '42501', NULL, 'a role without the grant cannot claim');
RESET ROLE;

-- Monitoring through pg_monitor, counters on or off as preloaded ------------------------------------------
CREATE ROLE idem_tap_monitor NOLOGIN IN ROLE pg_monitor;
SET ROLE idem_tap_monitor;
SELECT results_eq($$SELECT processing::int, completed::int, failed::int FROM idempotency.idem_stats WHERE scope = 'tap/app'$$,
                  $$VALUES (0, 1, 1)$$, 'pg_monitor member reads idem_stats');
SELECT results_eq($$SELECT received::int, pending::int, processed::int FROM idempotency.idem_inbox_stats WHERE consumer = 'tap-consumer'$$,
                  $$VALUES (1, 0, 1)$$, 'pg_monitor member reads idem_inbox_stats');
SELECT is(idempotency.idem_counters_enabled(), current_setting('shared_preload_libraries') ~ '(^|,)\s*idempotency\s*(,|$)',
          'counters are enabled exactly when the library is preloaded');
SELECT is((SELECT count(*)::int FROM idempotency.idem_counters() WHERE (value IS NULL) = idempotency.idem_counters_enabled()), 0,
          'idem_counters: values when enabled, NULL when off');
RESET ROLE;
CREATE TEMP TABLE counters_before AS SELECT counter, value FROM idempotency.idem_counters();
SELECT outcome FROM idempotency.idem_claim('tap/count', 'k', '\x01');
SELECT outcome FROM idempotency.idem_claim('tap/count', 'k', '\x02');
SELECT results_eq($$SELECT c.counter, c.value - b.value FROM idempotency.idem_counters() c JOIN counters_before b USING (counter)
                    WHERE counter IN ('claimed', 'mismatch') AND idempotency.idem_counters_enabled() ORDER BY 1$$,
                  CASE WHEN idempotency.idem_counters_enabled()
                       THEN $$VALUES ('claimed'::text, 1::bigint), ('mismatch', 1)$$
                       ELSE $$SELECT 'x'::text, 0::bigint WHERE false$$ END,
                  'a claim and a mismatch are counted (when enabled)');

-- Hostile objects in public are never called -------------------------------------------------------------
CREATE TABLE public.idem_tap_hijack_log (what text);
CREATE FUNCTION public.now() RETURNS timestamptz LANGUAGE plpgsql AS $$
BEGIN INSERT INTO public.idem_tap_hijack_log VALUES ('now'); RETURN '2000-01-01'; END $$;
CREATE FUNCTION public.idem_tap_eq(text, text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN INSERT INTO public.idem_tap_hijack_log VALUES ('text = text'); RETURN true; END $$;
CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.idem_tap_eq);
CREATE FUNCTION public.idem_tap_eq_bytea(bytea, bytea) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN INSERT INTO public.idem_tap_hijack_log VALUES ('bytea = bytea'); RETURN true; END $$;
CREATE OPERATOR public.= (LEFTARG = bytea, RIGHTARG = bytea, FUNCTION = public.idem_tap_eq_bytea);
CREATE FUNCTION public.idem_tap_gt(timestamptz, timestamptz) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN INSERT INTO public.idem_tap_hijack_log VALUES ('timestamptz > timestamptz'); RETURN false; END $$;
CREATE OPERATOR public.> (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = public.idem_tap_gt);
CREATE FUNCTION public.count(anyelement) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN INSERT INTO public.idem_tap_hijack_log VALUES ('count'); RETURN 0; END $$;
CREATE TEMP TABLE hostile_flow (step text, result text);

SET search_path = public, pg_catalog;
INSERT INTO hostile_flow SELECT 'claim', outcome FROM idempotency.idem_claim('tap/hostile', 'k1', '\x01');
INSERT INTO hostile_flow SELECT 'dup', outcome FROM idempotency.idem_claim('tap/hostile', 'k1', '\x01', wait => false);
INSERT INTO hostile_flow SELECT 'mismatch', outcome FROM idempotency.idem_claim('tap/hostile', 'k1', '\x02');
INSERT INTO hostile_flow SELECT 'complete', idempotency.idem_complete('tap/hostile', 'k1', 1, 'r1')::text;
INSERT INTO hostile_flow SELECT 'replay', outcome || ' ' || resource_id FROM idempotency.idem_claim('tap/hostile', 'k1', '\x01');
INSERT INTO hostile_flow SELECT 'lookup', status FROM idempotency.idem_lookup('tap/hostile', 'k1');
INSERT INTO hostile_flow SELECT 'unknown', count(*)::text FROM idempotency.idem_lookup('tap/hostile', 'nope');
INSERT INTO hostile_flow SELECT 'stats', completed::text FROM idempotency.idem_stats WHERE scope OPERATOR(pg_catalog.=) 'tap/hostile';
INSERT INTO hostile_flow SELECT 'inbox', idempotency.idem_inbox_receive('tap-hostile', 'e1', '\x01');
INSERT INTO hostile_flow SELECT 'inbox-dup', idempotency.idem_inbox_receive('tap-hostile', 'e1', '\x01');
INSERT INTO hostile_flow SELECT 'inbox-mismatch', idempotency.idem_inbox_receive('tap-hostile', 'e1', '\x02');
INSERT INTO hostile_flow SELECT 'purge', idempotency.idem_purge()::text;
RESET search_path;
SELECT is_empty($$SELECT * FROM public.idem_tap_hijack_log$$,
                'hostile now(), =, > and count() in public were never called by the extension');
SET search_path = public, pg_catalog;
SELECT 'control' FROM pg_class WHERE relname = 'pg_class' AND now() > now();
RESET search_path;
SELECT ok((SELECT count(*) FROM public.idem_tap_hijack_log WHERE what IN ('now', 'text = text')) > 0,
          'control: the planted objects do capture unqualified SQL on that search_path');
SELECT results_eq($$SELECT step, result FROM hostile_flow ORDER BY step$$,
    $$VALUES ('claim', 'claimed'), ('complete', 'true'), ('dup', 'in_progress'), ('inbox', 'new'),
             ('inbox-dup', 'duplicate'), ('inbox-mismatch', 'mismatch'), ('lookup', 'completed'),
             ('mismatch', 'mismatch'), ('purge', '0'), ('replay', 'replayed r1'), ('stats', '1'), ('unknown', '0')$$,
    'outcomes are right with hostile objects first on the search_path');

SELECT * FROM finish();
ROLLBACK;
