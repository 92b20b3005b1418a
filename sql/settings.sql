-- Settings out of their range: 22023 and the setting unchanged. PostgreSQL 17 and later print
-- the range with its unit ("1 s .. 2147483647 s"): expected/settings_1.out.
SET client_min_messages = warning;

-- settings_try(sql): 'ok' or 'SQLSTATE: message'.
CREATE FUNCTION settings_try(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

SELECT settings_try($$SET idempotency.default_ttl = -1$$);
SELECT settings_try($$SET idempotency.default_lease = 0$$);
SELECT settings_try($$SET idempotency.default_lease = '100 years'$$);
SELECT settings_try($$SET idempotency.inbox_ttl = '-5 min'$$);
SELECT settings_try($$SET idempotency.webhook_tolerance = -1$$);
SHOW idempotency.default_ttl;
SHOW idempotency.default_lease;
SHOW idempotency.inbox_ttl;
SHOW idempotency.webhook_tolerance;

DROP FUNCTION settings_try(text);
