-- Upgrades: a 0.7 database (the frozen fixture test/upgrade/idempotency--0.7.sql, which the
-- regress stage copies into the extension directory for its run: test/upgrade/scripts), rows of
-- every state written by 0.7, the module serving the 0.7 schema, then ALTER EXTENSION ...
-- UPDATE: the rows survive, 1.0.0's objects appear, the grants are kept. The catalog of the
-- result equals a fresh 1.1.0's: the upgrade stage (test/stages/upgrade.sh). Runs in a database
-- of its own so that the other suites' objects in contrib_regression are not touched.
\pset null '<NULL>'
SET client_min_messages = warning;
DROP DATABASE IF EXISTS idem_upgrade_regression;
CREATE DATABASE idem_upgrade_regression;
\c idem_upgrade_regression
SET client_min_messages = warning;
-- the calls below are unqualified: 1.x's functions are in public, 2.0.0's in schema idempotency
-- (an application that kept unqualified names adds the schema to its search path)
SET search_path = public, idempotency;
\i test/regress/helpers.sql

-- the update paths: from 0.7 and from 0.8, each one committed script to 1.0.0, and from 1.0.0 to
-- 1.1.0 (the 1.0.0 install is the frozen fixture test/upgrade/idempotency--1.0.0.sql here)
SELECT source, target, path FROM pg_extension_update_paths('idempotency')
WHERE path IS NOT NULL ORDER BY source, target;
SELECT version, installed FROM pg_available_extension_versions
WHERE name = 'idempotency' ORDER BY version;
SELECT default_version FROM pg_available_extensions WHERE name = 'idempotency';

CREATE EXTENSION idempotency VERSION '0.7';
SELECT extversion FROM pg_extension WHERE extname = 'idempotency';
-- 1.0.0's objects are absent: no tenants' bindings, idem_stuck is 0.7's SECURITY DEFINER
-- PL/pgSQL, idem_schedule_purge has no run_as
SELECT to_regclass('idempotency.bindings') AS bindings, to_regprocedure('idem_bind(text,text,regrole)') AS bind,
       to_regprocedure('idem_schedule_purge(text,name,integer,name)') AS schedule_run_as;
SELECT (SELECT lanname FROM pg_language l WHERE l.oid = prolang) AS stuck_language, prosecdef
FROM pg_proc WHERE oid = 'idem_stuck(interval)'::regprocedure;

-- a role granted functions under 0.7 keeps them through the update, which recreates
-- idem_schedule_purge with a new signature
DROP ROLE IF EXISTS idem_upgrade_app;
CREATE ROLE idem_upgrade_app;
GRANT EXECUTE ON FUNCTION idem_claim(text, text, bytea, interval, interval, boolean),
    idem_complete(text, text, integer, text, jsonb, integer, bytea, jsonb),
    idem_schedule_purge(text, name, integer) TO idem_upgrade_app;

-- records of every state, written by the module serving 0.7: completed (with the exact body and
-- headers), failed for good, failed retryably, processing with a live lease, stuck
SELECT outcome, attempt FROM idem_claim('up/a', 'done', '\x01');
SELECT idem_complete('up/a', 'done', 1, 'r1', '{"id": 1}', 201, '{"id":1}', '{"Location": "/r/1"}');
SELECT outcome, attempt FROM idem_claim('up/a', 'failed', '\x02');
SELECT idem_fail('up/a', 'failed', 1, false, '{"error": "declined"}', 402);
SELECT outcome, attempt FROM idem_claim('up/a', 'retry', '\x03');
SELECT idem_fail('up/a', 'retry', 1, true, '{"error": "timeout"}', 503);
SELECT outcome, attempt FROM idem_claim('up/b', 'open', '\x04', '1 hour');
SELECT outcome FROM idem_claim('up/stuck', 'k', NULL, '10 milliseconds');
-- inbox entries of every state: done (inline), queued, leased, dead, stale
SELECT idem_inbox_receive('up-in', 'e-done', '\x01') AS done;
SELECT idem_inbox_receive('up-in', 'e-' || i, enqueue => true) AS queued FROM generate_series(1, 3) i;
SELECT event_id, attempt FROM idem_inbox_next('up-in', 2);
SELECT idem_inbox_fail('up-in', 'e-2', 1, false, 'poison') AS dead;
SELECT idem_inbox_receive('up-in', 'e-new', NULL, false, NULL, NULL, 'order-1', 2) AS entity_new,
       idem_inbox_receive('up-in', 'e-old', NULL, false, NULL, NULL, 'order-1', 1) AS entity_stale;
-- outbox events of every state: done, leased, dead, pending
SELECT idem_outbox_emit('up-topic', ('{"n": ' || i || '}')::jsonb) IS NOT NULL AS emitted
FROM generate_series(1, 4) i;
SET idempotency.max_attempts = 1;
CREATE TEMP TABLE up_leased AS SELECT event_id, payload, attempt FROM idem_outbox_next('up-topic', 3);
SELECT payload, attempt FROM up_leased ORDER BY payload->>'n';
SELECT idem_outbox_done(event_id, attempt) FROM up_leased WHERE payload->>'n' = '1';
SELECT idem_outbox_fail(event_id, attempt, true, 'gone') FROM up_leased WHERE payload->>'n' = '2';
RESET idempotency.max_attempts;

-- the module serves 0.7: replay of the exact body, mismatch, in_progress, the stored failure,
-- the retryable one reclaimed, the inbox's duplicate and queue, the outbox's order, idem_stuck
SELECT pg_sleep(0.05);
SELECT outcome, resource_id, convert_from(response_body, 'UTF8') AS body, response_headers
FROM idem_claim('up/a', 'done', '\x01');
SELECT outcome FROM idem_claim('up/a', 'done', '\x09');
SELECT outcome, attempt FROM idem_claim('up/b', 'open', '\x04', wait => false);
SELECT outcome, response, response_status FROM idem_claim('up/a', 'failed', '\x02');
SELECT idem_inbox_receive('up-in', 'e-done', '\x01') AS duplicate;
SELECT status, attempt FROM idem_lookup('up/b', 'open');
SELECT scope, key, attempt FROM idem_stuck() WHERE scope = 'up/stuck';
SELECT status, count(*) FROM idempotency.records GROUP BY status ORDER BY status;
SELECT status, count(*) FROM idempotency.inbox GROUP BY status ORDER BY status;
SELECT status, count(*) FROM idempotency.outbox GROUP BY status ORDER BY status;

-- a dead event as a module before 1.1.0 leaves it (expires_at NULL; 1.1.0's sets infinity, which
-- its partial indexes read): the update sets infinity, and changes no other row
UPDATE idempotency.outbox SET expires_at = NULL WHERE status = 'dead';
CREATE TEMP TABLE outbox_expected AS SELECT * FROM idempotency.outbox;
UPDATE outbox_expected SET expires_at = 'infinity' WHERE status = 'dead';
CREATE TABLE before_update AS
    SELECT 'records' AS t, r::text AS row FROM idempotency.records r
    UNION ALL SELECT 'inbox', i::text FROM idempotency.inbox i
    UNION ALL SELECT 'inbox_entities', e::text FROM idempotency.inbox_entities e
    UNION ALL SELECT 'outbox', o::text FROM outbox_expected o;

ALTER EXTENSION idempotency UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'idempotency';

-- every row is unchanged but the dead event's expires_at (no row differs either way)
SELECT status, expires_at FROM idempotency.outbox WHERE status = 'dead';
SELECT count(*) AS rows_before FROM before_update;
SELECT count(*) AS differences FROM (
    (TABLE before_update
     EXCEPT (SELECT 'records', r::text FROM idempotency.records r
             UNION ALL SELECT 'inbox', i::text FROM idempotency.inbox i
             UNION ALL SELECT 'inbox_entities', e::text FROM idempotency.inbox_entities e
             UNION ALL SELECT 'outbox', o::text FROM idempotency.outbox o))
    UNION ALL
    ((SELECT 'records', r::text FROM idempotency.records r
      UNION ALL SELECT 'inbox', i::text FROM idempotency.inbox i
      UNION ALL SELECT 'inbox_entities', e::text FROM idempotency.inbox_entities e
      UNION ALL SELECT 'outbox', o::text FROM idempotency.outbox o)
     EXCEPT TABLE before_update)) d;

-- 2.0.0 moved every function, procedure, view and type out of public into schema idempotency,
-- and the extension's schema is pg_catalog, as on a fresh installation
SELECT count(*) AS left_in_public FROM pg_depend d
WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idempotency') AND d.deptype = 'e'
  AND d.classid <> 'pg_namespace'::regclass
  AND (pg_identify_object(d.classid, d.objid, d.objsubid)).schema IS DISTINCT FROM 'idempotency';
SELECT extnamespace::regnamespace AS extension_schema FROM pg_extension WHERE extname = 'idempotency';

-- 1.0.0's objects are there, members of the extension
SELECT pg_describe_object(classid, objid, 0) AS member
FROM pg_depend
WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
  AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idempotency')
  AND pg_describe_object(classid, objid, 0) ~ '(bind|schedule_purge)'
  -- from PostgreSQL 17 on, a table's or a view's row type and its array type are listed as
  -- members too: they come with the table or view, so they are left out here
  AND NOT EXISTS (SELECT FROM pg_type t JOIN pg_class c ON c.reltype IN (t.oid, t.typelem)
                  WHERE classid = 'pg_type'::regclass AND t.oid = objid AND c.relkind IN ('r', 'v'))
ORDER BY 1;
-- idem_stuck checks as its caller: C, not SECURITY DEFINER; the grants of 0.7 are kept, on the
-- recreated idem_schedule_purge too (PUBLIC still has none), and pg_init_privs holds only the
-- extension's own (the owner's), so pg_dump keeps the users' grants
SELECT (SELECT lanname FROM pg_language l WHERE l.oid = prolang) AS stuck_language, prosecdef
FROM pg_proc WHERE oid = 'idem_stuck(interval)'::regprocedure;
SELECT p.oid::regprocedure AS function,
       has_function_privilege('idem_upgrade_app', p.oid, 'EXECUTE') AS app_execute,
       has_function_privilege('public', p.oid, 'EXECUTE') AS public_execute,
       obj_description(p.oid, 'pg_proc') IS NOT NULL AS has_comment
FROM pg_proc p WHERE p.proname IN ('idem_claim', 'idem_complete', 'idem_schedule_purge')
ORDER BY p.oid::regprocedure::text COLLATE "C";
SELECT count(*) AS app_in_init_privs FROM pg_init_privs i, aclexplode(i.initprivs) x
WHERE x.grantee = 'idem_upgrade_app'::regrole;
-- the purge procedures pin their search path in every transaction (they cannot have SET)
SELECT proname, prosrc LIKE '%pg_catalog.set_config(''search_path'', ''pg_catalog, pg_temp'', true)%' AS pins
FROM pg_proc WHERE proname IN ('idem_purge_loop', 'idem_purge_shards') ORDER BY proname;

-- and everything keeps working: the same answers as before the update, the leased work
-- finished, a binding
SELECT outcome, resource_id, convert_from(response_body, 'UTF8') AS body, response_headers
FROM idem_claim('up/a', 'done', '\x01');
SELECT outcome FROM idem_claim('up/a', 'done', '\x09');
SELECT outcome, attempt FROM idem_claim('up/b', 'open', '\x04', wait => false);
SELECT idem_complete('up/b', 'open', 1, 'r4');
SELECT outcome, response, response_status FROM idem_claim('up/a', 'failed', '\x02');
SELECT outcome, attempt FROM idem_claim('up/a', 'retry', '\x03');
SELECT scope, key, attempt FROM idem_stuck() WHERE scope = 'up/stuck';
SELECT idem_inbox_receive('up-in', 'e-done', '\x01') AS duplicate;
SELECT idem_inbox_done('up-in', 'e-1', 1) AS leased_done;
SELECT event_id, attempt FROM idem_inbox_next('up-in', 10);
SELECT idem_outbox_done(event_id, attempt) FROM up_leased WHERE payload->>'n' = '3';
SELECT payload, attempt FROM idem_outbox_next('up-topic', 10);
SELECT idem_bind('scope', 'up/', 'idem_upgrade_app') AS bound;
SELECT kind, prefix, role FROM idem_bindings;
SELECT outcome FROM idem_claim('up/a', 'new');

-- updating to the installed version is a no-op notice, an unknown version an error
SET client_min_messages = notice;
ALTER EXTENSION idempotency UPDATE TO '2.0.0';
\set VERBOSITY terse
ALTER EXTENSION idempotency UPDATE TO '9.9';
\set VERBOSITY default
SET client_min_messages = warning;

\c contrib_regression
SET client_min_messages = warning;
DROP DATABASE idem_upgrade_regression;
DROP ROLE idem_upgrade_app;
