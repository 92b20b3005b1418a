-- Settings. A value out of range or malformed, set where the library is loaded (it is preloaded
-- here): 22023 and the setting unchanged, in the same words on every major.
SET client_min_messages = warning;

\i test/regress/helpers.sql

SELECT try($$SET idempotency.default_ttl = -1$$);
SELECT try($$SET idempotency.default_lease = 0$$);
SELECT try($$SET idempotency.default_lease = '100 years'$$, true);
SELECT try($$SET idempotency.default_lease = 'abc'$$, true);
SELECT try($$SET idempotency.default_lease = '3000000000'$$, true);
SELECT try($$SET idempotency.inbox_ttl = '-5 min'$$);
SELECT try($$SET idempotency.webhook_tolerance = -1$$);
SELECT try($$SET idempotency.direct_access = 'maybe'$$);
SELECT try($$SELECT set_config('idempotency.inbox_lease', '0', false)$$);
SELECT try($$ALTER ROLE CURRENT_USER SET idempotency.default_lease = 'abc'$$);
SELECT try(format('ALTER DATABASE %I SET idempotency.inbox_ttl = 0', current_database()));
SHOW idempotency.default_ttl;
SHOW idempotency.default_lease;
SHOW idempotency.inbox_ttl;
SHOW idempotency.webhook_tolerance;
SHOW idempotency.direct_access;

-- SHOW prints a duration as PostgreSQL prints a setting in seconds
SET idempotency.default_lease = 90;
SHOW idempotency.default_lease;
SET idempotency.default_lease = '120';
SHOW idempotency.default_lease;
SET idempotency.default_lease = '1.5h';
SHOW idempotency.default_lease;
SET idempotency.webhook_tolerance = 0;
SHOW idempotency.webhook_tolerance;
SET idempotency.direct_access = false;
SHOW idempotency.direct_access;
RESET idempotency.default_lease;
RESET idempotency.webhook_tolerance;
RESET idempotency.direct_access;

-- The settings do not check each other when set (they may come in any order, from different
-- places); a claim that takes both and finds default_ttl shorter than default_lease names both.
SET idempotency.default_ttl = '30s';
SELECT try($$SELECT idempotency.idem_claim('settings', 'ttl-below-lease')$$, true);
SELECT outcome FROM idempotency.idem_claim('settings', 'ttl-below-lease', lease => '10 seconds');
RESET idempotency.default_ttl;

-- A value PostgreSQL could not check when it was stored (ALTER ROLE ... SET in a session that
-- had not loaded the library, before shared_preload_libraries was set; written into the catalog
-- here) is in effect from login as written, not replaced by the default: the functions that use
-- it fail with 22023, a call that passes the argument does not use it, and SET, RESET and
-- transactions work on it as on any value.
CREATE ROLE regress_idem_settings LOGIN SUPERUSER;
ALTER ROLE regress_idem_settings SET idempotency.default_lease = '30s';
UPDATE pg_db_role_setting
SET setconfig = '{idempotency.default_lease=abc,idempotency.inbox_ttl=0,idempotency.direct_access=maybe}'
WHERE setrole = 'regress_idem_settings'::regrole AND setdatabase = 0;
SELECT current_user AS regress_user \gset
\c - regress_idem_settings
SELECT name, setting, source FROM pg_settings
WHERE name IN ('idempotency.default_lease', 'idempotency.inbox_ttl') ORDER BY name;
SELECT outcome FROM idempotency.idem_claim('settings', 'stored-invalid');
SELECT outcome FROM idempotency.idem_claim('settings', 'stored-invalid', lease => '30 seconds');
SET idempotency.direct_access = on;
SELECT outcome FROM idempotency.idem_claim('settings', 'stored-invalid', lease => '30 seconds');
SELECT idempotency.idem_heartbeat('settings', 'stored-invalid', 1);
SELECT idempotency.idem_heartbeat('settings', 'stored-invalid', 1, lease => '30 seconds') IS NOT NULL AS extended;
SELECT idempotency.idem_inbox_receive('settings', 'evt-1');
SELECT idempotency.idem_inbox_receive('settings', 'evt-1', ttl => '1 day');
BEGIN;
SET LOCAL idempotency.default_lease = '45s';
SELECT extract(epoch FROM lease_expires_at - now())::int AS lease_s
FROM idempotency.idem_claim('settings', 'stored-invalid-2');
COMMIT;
SELECT outcome FROM idempotency.idem_claim('settings', 'stored-invalid-3');
SET idempotency.default_lease = '45s';
SELECT outcome FROM idempotency.idem_claim('settings', 'stored-invalid-3');
RESET idempotency.default_lease;
SHOW idempotency.default_lease;
SELECT try($$SELECT idempotency.idem_heartbeat('settings', 'stored-invalid-3', 1)$$, true);
\c - :regress_user
DROP ROLE regress_idem_settings;
DELETE FROM idempotency.records WHERE scope = 'settings';
DELETE FROM idempotency.inbox WHERE consumer = 'settings';

DROP FUNCTION try(text, boolean);
