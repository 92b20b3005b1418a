-- Settings out of their range: 22023 and the setting unchanged. PostgreSQL 17 and later print
-- the range with its unit ("1 s .. 2147483647 s"): expected/settings_1.out.
SET client_min_messages = warning;

\i test/regress/helpers.sql

SELECT try($$SET idempotency.default_ttl = -1$$);
SELECT try($$SET idempotency.default_lease = 0$$);
SELECT try($$SET idempotency.default_lease = '100 years'$$);
SELECT try($$SET idempotency.inbox_ttl = '-5 min'$$);
SELECT try($$SET idempotency.webhook_tolerance = -1$$);
SHOW idempotency.default_ttl;
SHOW idempotency.default_lease;
SHOW idempotency.inbox_ttl;
SHOW idempotency.webhook_tolerance;

DROP FUNCTION try(text, boolean);
