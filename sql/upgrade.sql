-- Upgrades: install the previous version (0.1), write records, ALTER EXTENSION ... UPDATE;
-- the records survive and the new objects appear. Runs in a database of its own so that the
-- other suites' objects in contrib_regression are not touched.
\pset null '<NULL>'
SET client_min_messages = warning;
DROP DATABASE IF EXISTS idem_upgrade_regression;
CREATE DATABASE idem_upgrade_regression;
\c idem_upgrade_regression
SET client_min_messages = warning;
\i test/regress/helpers.sql

-- the update path 0.1 -> 0.2 exists; a plain CREATE EXTENSION follows it
SELECT source, target, path FROM pg_extension_update_paths('idempotency')
WHERE source = '0.1' AND target = '0.2';
-- and on to 0.3, 0.4, 0.5, 0.6, 0.7 and 0.8
SELECT source, target, path FROM pg_extension_update_paths('idempotency')
WHERE target IN ('0.3', '0.4', '0.5', '0.6', '0.7', '0.8') AND path IS NOT NULL ORDER BY target, source;
SELECT name, version, installed FROM pg_available_extension_versions
WHERE name = 'idempotency' ORDER BY version;
SELECT default_version FROM pg_available_extensions WHERE name = 'idempotency';

CREATE EXTENSION idempotency VERSION '0.1';
SELECT extversion FROM pg_extension WHERE extname = 'idempotency';
-- 0.2 objects are absent, and in 0.1 PUBLIC may still execute idem_claim
SELECT to_regclass('idem_stats') AS idem_stats, to_regprocedure('idem_counters()') AS idem_counters;
SELECT has_function_privilege('public', 'idem_claim(text,text,bytea,interval,interval,boolean)', 'EXECUTE') AS public_claim;

-- records of every state, written by 0.1
SELECT outcome, attempt FROM idem_claim('up/a', 'done', '\x01');
SELECT idem_complete('up/a', 'done', 1, 'r1', '{"id": 1}', 201);
SELECT outcome, attempt FROM idem_claim('up/a', 'failed', '\x02');
SELECT idem_fail('up/a', 'failed', 1, false, '{"error": "declined"}', 402);
SELECT outcome, attempt FROM idem_claim('up/b', 'open', '\x03', '1 hour');
-- a role granted idem_claim under 0.1 keeps it through the update, which recreates idem_claim
DROP ROLE IF EXISTS idem_upgrade_app;
CREATE ROLE idem_upgrade_app;
GRANT EXECUTE ON FUNCTION idem_claim(text, text, bytea, interval, interval, boolean),
    idem_complete(text, text, integer, text, jsonb, integer) TO idem_upgrade_app;
SELECT pg_get_function_result('idem_claim(text,text,bytea,interval,interval,boolean)'::regprocedure) AS claim_returns_01;
CREATE TABLE before_update AS
    SELECT scope, key, status, fingerprint, attempt, resource_id, response, response_status,
           created_at, updated_at, lease_expires_at, expires_at
    FROM idempotency.records;

ALTER EXTENSION idempotency UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'idempotency';

-- the records are unchanged (no row differs either way)
SELECT count(*) AS records FROM idempotency.records;
(SELECT scope, key, status, fingerprint, attempt, resource_id, response, response_status,
        created_at, updated_at, lease_expires_at, expires_at FROM idempotency.records
 EXCEPT SELECT * FROM before_update)
UNION ALL
(SELECT * FROM before_update
 EXCEPT SELECT scope, key, status, fingerprint, attempt, resource_id, response, response_status,
        created_at, updated_at, lease_expires_at, expires_at FROM idempotency.records);

-- and keep working: replay, in_progress, mismatch, complete of the open attempt
SELECT outcome, attempt, resource_id, response, response_status FROM idem_claim('up/a', 'done', '\x01');
SELECT outcome, attempt, response, response_status FROM idem_claim('up/a', 'failed', '\x02');
SELECT outcome, attempt FROM idem_claim('up/b', 'open', '\x03', wait => false);
SELECT outcome FROM idem_claim('up/b', 'open', '\x04');
SELECT idem_complete('up/b', 'open', 1, 'r3');

-- the new objects are there, members of the extension
SELECT pg_describe_object(classid, objid, 0) AS member
FROM pg_depend
WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
  AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idempotency')
  AND pg_describe_object(classid, objid, 0) ~ '(idem_stats|idem_inbox_stats|idem_counters|idem_stats_reset)'
  -- from PostgreSQL 17 on, a view's row type and its array type are listed as members too:
  -- they come with the view, so they are left out here (the comparison below keeps them)
  AND NOT EXISTS (SELECT FROM pg_type t JOIN pg_class c ON c.reltype IN (t.oid, t.typelem)
                  WHERE classid = 'pg_type'::regclass AND t.oid = objid AND c.relkind = 'v')
ORDER BY 1;
SELECT scope, processing, stuck, completed, failed, expired FROM idem_stats ORDER BY scope;
-- a stuck record past its TTL is still stuck (its outcome is unknown), as idem_stuck() lists it
SELECT outcome FROM idem_claim('up/stuck', 'k', NULL, '10 milliseconds', '10 milliseconds');
SELECT pg_sleep(0.05);
SELECT scope, processing, stuck, expired FROM idem_stats WHERE scope = 'up/stuck';
SELECT scope, key FROM idem_stuck() WHERE scope = 'up/stuck';
SELECT count(*) AS counters FROM idem_counters();
-- 0.2's idem_claim returns the row type idem_claim_result (same columns), keeps its comment and
-- the grant made under 0.1
SELECT pg_get_function_result('idem_claim(text,text,bytea,interval,interval,boolean)'::regprocedure) AS claim_returns_02,
       obj_description('idem_claim(text,text,bytea,interval,interval,boolean)'::regprocedure, 'pg_proc') IS NOT NULL AS has_comment,
       has_function_privilege('idem_upgrade_app', 'idem_claim(text,text,bytea,interval,interval,boolean)', 'EXECUTE') AS app_keeps_claim;
SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute
WHERE attrelid = 'idem_claim_result'::regclass AND attnum > 0 ORDER BY attnum;
-- pg_init_privs records only the extension's own grants (the owner's), not the grant made under
-- 0.1, so pg_dump still dumps that grant (test/stages/dump.sh restores it)
SELECT p.proname, i.initprivs = ARRAY[makeaclitem(p.proowner, p.proowner, 'EXECUTE', false)] AS owner_only,
       has_function_privilege('idem_upgrade_app', p.oid, 'EXECUTE') AS app_has_it
FROM pg_proc p JOIN pg_init_privs i ON i.objoid = p.oid AND i.classoid = 'pg_proc'::regclass
WHERE p.proname IN ('idem_claim', 'idem_complete', 'idem_fail') ORDER BY 1;
-- 0.2 took EXECUTE on stateful functions away from PUBLIC; pure functions stay PUBLIC
SELECT has_function_privilege('public', 'idem_claim(text,text,bytea,interval,interval,boolean)', 'EXECUTE') AS public_claim,
       has_function_privilege('public', 'idem_fingerprint(text,text[],text[],boolean)', 'EXECUTE') AS public_fingerprint;

-- a fresh install (no VERSION) has the same version and the same member objects as the upgrade
CREATE TABLE upgraded_members AS
    SELECT pg_describe_object(classid, objid, 0) AS member FROM pg_depend
    WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
      AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idempotency');
DROP EXTENSION idempotency;
CREATE EXTENSION idempotency;
SELECT extversion FROM pg_extension WHERE extname = 'idempotency';
SELECT count(*) AS differences FROM (
    (SELECT member FROM upgraded_members
     EXCEPT SELECT pg_describe_object(classid, objid, 0) FROM pg_depend
            WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
              AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idempotency'))
    UNION ALL
    (SELECT pg_describe_object(classid, objid, 0) FROM pg_depend
     WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
       AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idempotency')
     EXCEPT SELECT member FROM upgraded_members)) d;

-- 0.2 -> 0.3: idem_schedule_purge and idem_unschedule_purge check the pg_cron precondition
-- through one helper, idem_require_pg_cron; they answer as in 0.2 (here: not the cron database, NULL and
-- range errors), keep their comments and grants, and the records survive
DROP EXTENSION idempotency;
CREATE EXTENSION idempotency VERSION '0.2';
SELECT outcome, attempt FROM idem_claim('up/c', 'done', '\x05');
SELECT idem_complete('up/c', 'done', 1, 'r5', '{"id": 5}', 201);
SELECT outcome, attempt FROM idem_claim('up/c', 'open', '\x06', '1 hour');
GRANT EXECUTE ON FUNCTION idem_schedule_purge(text, name, integer),
    idem_unschedule_purge(name) TO idem_upgrade_app;
CREATE TABLE before_03 AS
    SELECT scope, key, status, fingerprint, attempt, resource_id, response, response_status,
           created_at, updated_at, lease_expires_at, expires_at
    FROM idempotency.records;
CREATE TEMP VIEW cron_answers AS
    SELECT 'schedule' AS call, try($$SELECT idem_schedule_purge()$$, with_hint => true) AS answer
    UNION ALL SELECT 'schedule shop', try($$SELECT idem_schedule_purge('0 * * * *', 'shop', 500)$$, with_hint => true)
    UNION ALL SELECT 'schedule NULL', try($$SELECT idem_schedule_purge(NULL)$$, with_hint => true)
    UNION ALL SELECT 'schedule batch 0', try($$SELECT idem_schedule_purge(batch_size => 0)$$, with_hint => true)
    UNION ALL SELECT 'unschedule', try($$SELECT idem_unschedule_purge()$$, with_hint => true)
    UNION ALL SELECT 'unschedule NULL', try($$SELECT idem_unschedule_purge(NULL)$$, with_hint => true)
    UNION ALL SELECT 'comments', obj_description('idem_schedule_purge(text,name,integer)'::regprocedure, 'pg_proc')
                                 || ' / ' || obj_description('idem_unschedule_purge(name)'::regprocedure, 'pg_proc')
    UNION ALL SELECT 'app grants', has_function_privilege('idem_upgrade_app', 'idem_schedule_purge(text,name,integer)', 'EXECUTE')::text
                                   || ' ' || has_function_privilege('idem_upgrade_app', 'idem_unschedule_purge(name)', 'EXECUTE')::text
    UNION ALL SELECT 'public grants', has_function_privilege('public', 'idem_schedule_purge(text,name,integer)', 'EXECUTE')::text
                                      || ' ' || has_function_privilege('public', 'idem_unschedule_purge(name)', 'EXECUTE')::text;
CREATE TABLE cron_answers_02 AS TABLE cron_answers;
-- what a role that was granted the two functions (and nothing else) is answered
SET ROLE idem_upgrade_app;
SELECT try($$SELECT idem_schedule_purge()$$, with_hint => true) AS app_answer_02 \gset
RESET ROLE;
SELECT to_regprocedure('idem_require_pg_cron(text)') AS helper_in_02;
ALTER EXTENSION idempotency UPDATE TO '0.3';
-- the same answer for that role under 0.3: the helper is reachable by every caller
SET ROLE idem_upgrade_app;
SELECT try($$SELECT idem_schedule_purge()$$, with_hint => true) = :'app_answer_02' AS app_answer_unchanged;
RESET ROLE;
SELECT extversion FROM pg_extension WHERE extname = 'idempotency';
SELECT call, answer FROM cron_answers_02 ORDER BY call;
-- the same answers, comments and grants under 0.3 (no row differs either way)
SELECT count(*) AS differences FROM (
    (TABLE cron_answers_02 EXCEPT TABLE cron_answers)
    UNION ALL (TABLE cron_answers EXCEPT TABLE cron_answers_02)) d;
DROP VIEW cron_answers;
SELECT count(*) AS differences FROM (
    (SELECT scope, key, status, fingerprint, attempt, resource_id, response, response_status,
            created_at, updated_at, lease_expires_at, expires_at FROM idempotency.records
     EXCEPT TABLE before_03)
    UNION ALL
    (TABLE before_03
     EXCEPT SELECT scope, key, status, fingerprint, attempt, resource_id, response, response_status,
            created_at, updated_at, lease_expires_at, expires_at FROM idempotency.records)) d;
-- the helper: a member of the extension, with a comment, executable by PUBLIC (it reads no
-- stored state, and the two functions run with their caller's rights)
SELECT p.oid::regprocedure AS helper,
       EXISTS (SELECT FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
               WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
                 AND e.extname = 'idempotency') AS member,
       obj_description(p.oid, 'pg_proc') IS NOT NULL AS has_comment,
       has_function_privilege('public', p.oid, 'EXECUTE') AS public_execute
FROM pg_proc p WHERE p.oid = to_regprocedure('idem_require_pg_cron(text)');
SELECT outcome, attempt FROM idem_claim('up/c', 'open', '\x06', wait => false);

-- 0.3 -> 0.4: idem_inbox_stats counts a queued or leased event past its TTL as pending, as it
-- does before its TTL (0.3 counted it as expired, though such an event never expires: the purge
-- never deletes it and idem_inbox_next still hands it out); a finished entry past its TTL stays
-- expired. The view keeps its grants, its membership of the extension and a comment.
SELECT idem_inbox_receive('up-queue', 'e-' || i, enqueue => true, ttl => '1 ms') AS queued
FROM generate_series(1, 2) i;
SELECT event_id AS leased FROM idem_inbox_next('up-queue', 1);
SELECT idem_inbox_receive('up-queue', 'e-done', ttl => '1 ms') AS done;
SELECT pg_sleep(0.02);
CREATE TEMP VIEW up_inbox AS
    SELECT consumer, received, pending, processing, processed, expired,
           oldest_pending_age = statement_timestamp() - (SELECT min(received_at) FROM idempotency.inbox
                                                         WHERE consumer = 'up-queue') AS oldest_is_first
    FROM idem_inbox_stats WHERE consumer = 'up-queue';
CREATE TEMP VIEW up_inbox_view AS
    SELECT c.relacl::text AS acl,
           has_table_privilege('pg_monitor', c.oid, 'SELECT') AS pg_monitor_reads,
           has_table_privilege('public', c.oid, 'SELECT') AS public_reads,
           EXISTS (SELECT FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
                   WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e'
                     AND e.extname = 'idempotency') AS member,
           obj_description(c.oid, 'pg_class') AS comment
    FROM pg_class c WHERE c.oid = 'idem_inbox_stats'::regclass;
SELECT * FROM up_inbox;
CREATE TEMP TABLE up_inbox_view_03 AS TABLE up_inbox_view;
-- and the inbox's primary key leads with the event id; the entries survive and still
-- answer duplicate
SELECT idem_inbox_receive('up-consumer', 'up-evt', '\x01');
ALTER EXTENSION idempotency UPDATE TO '0.4';
SELECT extversion FROM pg_extension WHERE extname = 'idempotency';
SELECT * FROM up_inbox;
SELECT v.acl = o.acl AS same_acl, v.pg_monitor_reads, v.public_reads, v.member,
       o.comment ~ '^Inbox events per consumer' AS comment_03,
       v.comment ~ '^Inbox events per consumer: .*pending \(queued or leased, whatever their age' AS comment_04
FROM up_inbox_view v, up_inbox_view_03 o;
SELECT pg_get_indexdef('idempotency.inbox_pkey'::regclass) AS inbox_pkey;
SELECT idem_inbox_receive('up-consumer', 'up-evt', '\x01') AS again,
       idem_inbox_receive('up-consumer', 'up-evt', '\x02') AS other_payload;

-- 0.4 -> 0.5: the outbox, and the inbox's retry backoff. Before the update the new module runs
-- the 0.4 schema's inbox queue (no available_at column: a retry is due at once) and hands the
-- event out again; after it the same calls back off, and the outbox is there with its grants.
SET idempotency.retry_backoff_base = '1h';
SELECT attempt FROM idem_inbox_next('up-queue', 1);
SELECT idem_inbox_fail('up-queue', 'e-2', 1) AS failed_04;
SELECT event_id, attempt FROM idem_inbox_next('up-queue', 1);
ALTER EXTENSION idempotency UPDATE TO '0.5';
SELECT extversion FROM pg_extension WHERE extname = 'idempotency';
SELECT idem_inbox_fail('up-queue', 'e-2', 2) AS failed_05;
SELECT count(*) AS taken_in_backoff FROM idem_inbox_next('up-queue', 1);
RESET idempotency.retry_backoff_base;
SELECT p.oid::regprocedure AS outbox_function,
       has_function_privilege('public', p.oid, 'EXECUTE') AS public_execute,
       obj_description(p.oid, 'pg_proc') IS NOT NULL AS has_comment
FROM pg_proc p WHERE p.proname LIKE 'idem\_outbox\_%' ORDER BY p.oid::regprocedure::text COLLATE "C";
SELECT idem_outbox_emit('up-topic', '{"n": 1}', 'k', 'up-dedup') IS NOT NULL AS emitted;
SELECT key, payload, attempt FROM idem_outbox_next('up-topic');

-- 0.5 -> 0.6: replays keep the exact body bytes and headers. Before the update the new module
-- serves the 0.5 schema (claims through SQL, 0.5's functions and result row); after it a record
-- completed under 0.5 replays with NULL body and headers, the recreated functions keep their
-- grants and comments, and the new arguments and columns work.
SELECT outcome, attempt FROM idem_claim('up/c', 'k05', '\x05');
SELECT idem_complete('up/c', 'k05', 1, 'r05', '{"id": 5}', 201);
SELECT outcome, resource_id, response FROM idem_claim('up/c', 'k05', '\x05');
-- the rest of 0.5's record functions under the new module, before the update: lookup (0.5's
-- ten columns), a retryable failure and its takeover, a stored failure replayed
SELECT status, attempt, resource_id, response FROM idem_lookup('up/c', 'k05');
SELECT outcome FROM idem_claim('up/c', 'r05', '\x06');
SELECT idem_fail('up/c', 'r05', 1, true, '{"error": "timeout"}', 503);
SELECT outcome, attempt FROM idem_claim('up/c', 'r05', '\x06');
SELECT idem_fail('up/c', 'r05', 2, false, '{"error": "declined"}', 402);
SELECT outcome, response, response_status FROM idem_claim('up/c', 'r05', '\x06');
SELECT pg_get_function_result('idem_lookup(text,text)'::regprocedure) ~ 'response_body' AS lookup_has_body_05;
-- grants made under 0.5 survive the recreation
GRANT EXECUTE ON FUNCTION idem_complete(text, text, integer, text, jsonb, integer),
    idem_lookup(text, text) TO idem_upgrade_app;
ALTER EXTENSION idempotency UPDATE TO '0.6';
SELECT extversion FROM pg_extension WHERE extname = 'idempotency';
SELECT outcome, resource_id, response, response_body, response_headers
FROM idem_claim('up/c', 'k05', '\x05');
SELECT p.oid::regprocedure AS recreated,
       has_function_privilege('idem_upgrade_app', p.oid, 'EXECUTE') AS app_execute,
       has_function_privilege('public', p.oid, 'EXECUTE') AS public_execute,
       obj_description(p.oid, 'pg_proc') IS NOT NULL AS has_comment
FROM pg_proc p WHERE p.proname IN ('idem_complete', 'idem_fail', 'idem_lookup', 'idem_key_from_header')
ORDER BY p.oid::regprocedure::text COLLATE "C";
-- the grant made by a user is not recorded as the extension's own (pg_dump keeps it)
SELECT count(*) AS app_in_init_privs FROM pg_init_privs i, aclexplode(i.initprivs) x
WHERE x.grantee = 'idem_upgrade_app'::regrole;
SELECT outcome FROM idem_claim('up/c', 'k06', '\x06');
SELECT idem_complete('up/c', 'k06', 1, 'r06', NULL, 201, '{"id":6}', '{"Location": "/r/6"}');
SELECT outcome, convert_from(response_body, 'UTF8') AS body, response_headers
FROM idem_claim('up/c', 'k06', '\x06');
SELECT status, convert_from(response_body, 'UTF8') AS body, response_headers FROM idem_lookup('up/c', 'k06');
SELECT idem_key_from_header('"k-6"') AS key;

-- 0.6 -> 0.7: idem_claim gains its planner support (idem_claim_support), which drops the
-- trailing arguments at their defaults from a planned call; 0.6's plan passes all six. The
-- records and grants are untouched, and the claim answers the same.
SELECT prosupport FROM pg_proc
WHERE oid = 'idem_claim(text,text,bytea,interval,interval,boolean)'::regprocedure;
EXPLAIN (VERBOSE, COSTS OFF) SELECT outcome FROM idem_claim('up/c', 'k06', '\x06');
GRANT EXECUTE ON FUNCTION idem_claim(text, text, bytea, interval, interval, boolean) TO idem_upgrade_app;
ALTER EXTENSION idempotency UPDATE TO '0.7';
SELECT extversion FROM pg_extension WHERE extname = 'idempotency';
SELECT prosupport, obj_description('idem_claim_support(internal)'::regprocedure, 'pg_proc') IS NOT NULL AS support_comment
FROM pg_proc WHERE oid = 'idem_claim(text,text,bytea,interval,interval,boolean)'::regprocedure;
EXPLAIN (VERBOSE, COSTS OFF) SELECT outcome FROM idem_claim('up/c', 'k06', '\x06');
SELECT has_function_privilege('idem_upgrade_app', 'idem_claim(text,text,bytea,interval,interval,boolean)', 'EXECUTE') AS app_claim,
       has_function_privilege('public', 'idem_claim(text,text,bytea,interval,interval,boolean)', 'EXECUTE') AS public_claim;
-- a role that may execute idem_claim (and not idem_claim_support) gets the shorter call too
SET ROLE idem_upgrade_app;
EXPLAIN (VERBOSE, COSTS OFF) SELECT outcome FROM idem_claim('up/c', 'k06', '\x06', NULL, NULL);
RESET ROLE;
SELECT outcome, resource_id, convert_from(response_body, 'UTF8') AS body FROM idem_claim('up/c', 'k06', '\x06');
SELECT outcome, resource_id, response FROM idem_claim('up/c', 'k05', '\x05');
SELECT outcome, attempt FROM idem_claim('up/c', 'k07');

-- 0.7 -> 0.8 (the security release, issue 28): the records answer the same after the update.
-- idem_schedule_purge gains run_as: recreated with the EXECUTE grants it had (PUBLIC still has
-- none) and the extension's own initial privileges only (the owner's, as a fresh install).
GRANT EXECUTE ON FUNCTION idem_schedule_purge(text, name, integer) TO idem_upgrade_app;
ALTER EXTENSION idempotency UPDATE TO '0.8';
SELECT has_function_privilege('idem_upgrade_app', 'idem_schedule_purge(text,name,integer,name)', 'EXECUTE') AS app_schedule,
       has_function_privilege('public', 'idem_schedule_purge(text,name,integer,name)', 'EXECUTE') AS public_schedule,
       to_regprocedure('idem_schedule_purge(text,name,integer)') AS old_signature;
SELECT cardinality(initprivs) AS init_privs, (aclexplode(initprivs)).grantee = p.proowner AS owner_only
FROM pg_init_privs i JOIN pg_proc p ON p.oid = i.objoid
WHERE i.objoid = 'idem_schedule_purge(text,name,integer,name)'::regprocedure;
SELECT obj_description('idem_schedule_purge(text,name,integer,name)'::regprocedure, 'pg_proc') IS NOT NULL AS commented;
-- the purge procedures pin their search path in every transaction (they cannot have SET)
SELECT proname, prosrc LIKE '%pg_catalog.set_config(''search_path'', ''pg_catalog, pg_temp'', true)%' AS pins
FROM pg_proc WHERE proname IN ('idem_purge_loop', 'idem_purge_shards') ORDER BY proname;
SELECT extversion FROM pg_extension WHERE extname = 'idempotency';
SELECT outcome, resource_id, convert_from(response_body, 'UTF8') AS body FROM idem_claim('up/c', 'k06', '\x06');
SELECT outcome, attempt FROM idem_claim('up/c', 'k08');

-- updating to the installed version is a no-op notice, an unknown version an error
SET client_min_messages = notice;
ALTER EXTENSION idempotency UPDATE TO '0.8';
\set VERBOSITY terse
ALTER EXTENSION idempotency UPDATE TO '9.9';
\set VERBOSITY default
SET client_min_messages = warning;

\c contrib_regression
SET client_min_messages = warning;
DROP DATABASE idem_upgrade_regression;
DROP ROLE idem_upgrade_app;
