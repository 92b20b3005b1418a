-- Citus (docs/scaling.md) on a single node. idem_distribute() without Citus says what to do.
-- idem_claim's direct path never writes a table Citus lists in pg_dist_partition (its rows live
-- in shards; the relation itself is the coordinator's local copy or a worker's shell table): it
-- steps aside to the SQL path, which Citus routes. Without Citus, a stand-in
-- pg_catalog.pg_dist_partition with the one column the check reads (test/stages/citus.sh runs
-- the real thing).
\pset null '<NULL>'
SET client_min_messages = warning;
\i test/regress/helpers.sql
SELECT * FROM try($$SELECT * FROM idem_distribute()$$, true);
-- not executable by PUBLIC
SELECT has_function_privilege('public', 'idem_distribute()', 'EXECUTE') AS public_may_distribute;
-- the direct path (no DEBUG1 line) until the table is listed
SET client_min_messages = debug1;
SELECT outcome FROM idem_claim('citus', 'before');
SET client_min_messages = warning;
SET allow_system_table_mods = on;
CREATE TABLE pg_catalog.pg_dist_partition (logicalrelid regclass NOT NULL);
RESET allow_system_table_mods;
-- listed: a backend that resolved the table before (no invalidation came) reads the catalog
-- again under the lock and steps aside
INSERT INTO pg_catalog.pg_dist_partition VALUES ('idempotency.records');
SET client_min_messages = debug1;
SELECT outcome FROM idem_claim('citus', 'stale-cache');
SELECT outcome FROM idem_claim('citus', 'stale-cache');
SET client_min_messages = warning;
-- a new backend steps aside from the start
\c
SET client_min_messages = debug1;
SELECT outcome FROM idem_claim('citus', 'new-backend');
SET client_min_messages = warning;
-- the purge refuses a table Citus lists, with what to do instead (0A000)
SELECT try($$SELECT idem_purge()$$, true) AS purge;
-- another table listed, not this one: the direct path
DELETE FROM pg_catalog.pg_dist_partition;
INSERT INTO pg_catalog.pg_dist_partition VALUES ('pg_catalog.pg_class');
\c
SET client_min_messages = debug1;
SELECT outcome FROM idem_claim('citus', 'other-listed');
SET client_min_messages = warning;
SET allow_system_table_mods = on;
DROP TABLE pg_catalog.pg_dist_partition;
RESET allow_system_table_mods;
SELECT key, status, attempt FROM idempotency.records WHERE scope = 'citus' ORDER BY key;
DELETE FROM idempotency.records WHERE scope = 'citus';
