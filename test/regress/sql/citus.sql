-- Citus (docs/citus.md) on a single node. idempotency.idem_distribute() without Citus says what to do.
-- idem_claim's direct path never writes a table Citus lists in pg_dist_partition (its rows live
-- in shards; the relation itself is the coordinator's local copy or a worker's shell table): it
-- steps aside to the SQL path, which Citus routes. Without Citus, a stand-in
-- pg_catalog.pg_dist_partition with the one column the check reads (test/stages/citus.sh runs
-- the real thing).
\pset null '<NULL>'
SET client_min_messages = warning;
\i test/regress/helpers.sql
SELECT * FROM try($$SELECT * FROM idempotency.idem_distribute()$$, true);
-- not executable by PUBLIC
SELECT has_function_privilege('public', 'idempotency.idem_distribute()', 'EXECUTE') AS public_may_distribute;
-- the direct path (no DEBUG1 line) until the table is listed
SET client_min_messages = debug1;
SELECT outcome FROM idempotency.idem_claim('citus', 'before');
SET client_min_messages = warning;
SET allow_system_table_mods = on;
CREATE TABLE pg_catalog.pg_dist_partition (logicalrelid regclass NOT NULL);
RESET allow_system_table_mods;
-- listed: a backend that resolved the table before (no invalidation came) reads the catalog
-- again under the lock and steps aside
INSERT INTO pg_catalog.pg_dist_partition VALUES ('idempotency.records');
SET client_min_messages = debug1;
SELECT outcome FROM idempotency.idem_claim('citus', 'stale-cache');
SELECT outcome FROM idempotency.idem_claim('citus', 'stale-cache');
SET client_min_messages = warning;
-- a new backend steps aside from the start
\c
SET client_min_messages = debug1;
SELECT outcome FROM idempotency.idem_claim('citus', 'new-backend');
SET client_min_messages = warning;
-- the purge refuses a table Citus lists, with what to do instead (0A000)
SELECT try($$SELECT idempotency.idem_purge()$$, true) AS purge;
-- another table listed, not this one: the direct path
DELETE FROM pg_catalog.pg_dist_partition;
INSERT INTO pg_catalog.pg_dist_partition VALUES ('pg_catalog.pg_class');
\c
SET client_min_messages = debug1;
SELECT outcome FROM idempotency.idem_claim('citus', 'other-listed');
SET client_min_messages = warning;
-- The outbox (0.5) listed: idem_outbox_next takes Citus's statement (no row addresses, planned
-- per call); done, fail and requeue without a topic look the event's topic up first (on Citus
-- their row locks would otherwise be a multi-shard query, which it refuses); on a worker
-- (pg_dist_local_group names a group other than the coordinator's 0) emit is refused.
DELETE FROM pg_catalog.pg_dist_partition;
INSERT INTO pg_catalog.pg_dist_partition VALUES ('idempotency.outbox');
SET allow_system_table_mods = on;
CREATE TABLE pg_catalog.pg_dist_local_group (groupid integer NOT NULL);
RESET allow_system_table_mods;
INSERT INTO pg_catalog.pg_dist_local_group VALUES (0);
SELECT idempotency.idem_outbox_emit('citus', '{"n": 1}'::jsonb, 'A') IS NOT NULL AS emitted,
       idempotency.idem_outbox_emit('citus', '{"n": 2}'::jsonb, 'A') IS NOT NULL AS emitted_too;
SELECT payload->>'n' AS n, attempt FROM idempotency.idem_outbox_next('citus', 10);
CREATE TEMP TABLE ev AS SELECT payload->>'n' AS n, event_id FROM idempotency.outbox WHERE topic = 'citus';
SELECT try(format('SELECT idempotency.idem_outbox_done(%L, 2)', event_id)) AS stale_done FROM ev WHERE n = '1';
SELECT idempotency.idem_outbox_fail(event_id, 1, retryable => false) AS failed FROM ev WHERE n = '1';
SELECT idempotency.idem_outbox_requeue(event_id) AS requeued FROM ev WHERE n = '1';
SELECT payload->>'n' AS n, attempt FROM idempotency.idem_outbox_next('citus', 10);
SELECT idempotency.idem_outbox_done(event_id, 2) AS done FROM ev WHERE n = '1';
SELECT try(format('SELECT idempotency.idem_outbox_requeue(%L)', idempotency.idem_uuid_v7())) AS unknown_requeue;
SELECT payload->>'n' AS n, attempt FROM idempotency.idem_outbox_next('citus', 10);
SELECT idempotency.idem_outbox_done(event_id, 1, 'citus') AS done FROM ev WHERE n = '2';
UPDATE pg_catalog.pg_dist_local_group SET groupid = 1;
SELECT try($$SELECT idempotency.idem_outbox_emit('citus', '{}'::jsonb)$$, true) AS emit_on_a_worker;
-- a worker whose outbox Citus does not list: emit writes (no Citus outbox to protect)
DELETE FROM pg_catalog.pg_dist_partition;
SELECT idempotency.idem_outbox_emit('citus', '{"n": 3}'::jsonb) IS NOT NULL AS emitted;
SELECT payload->>'n' AS n, status, attempt FROM idempotency.outbox WHERE topic = 'citus' ORDER BY seq;
DELETE FROM idempotency.outbox WHERE topic = 'citus';
SET allow_system_table_mods = on;
DROP TABLE pg_catalog.pg_dist_partition;
DROP TABLE pg_catalog.pg_dist_local_group;
RESET allow_system_table_mods;
SELECT key, status, attempt FROM idempotency.records WHERE scope = 'citus' ORDER BY key;
DELETE FROM idempotency.records WHERE scope = 'citus';
