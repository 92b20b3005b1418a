-- The head of a battery session (psql -v tag=... -v direct=on|off -v scan=on|off): settings, the
-- temporary table the outbox calls keep their event ids in.
SET client_min_messages = warning;
SELECT pg_catalog.set_config('attack.tag', :'tag', false) \g /dev/null
SELECT pg_catalog.set_config('idempotency.direct_access', :'direct', false) \g /dev/null
SELECT pg_catalog.set_config('idempotency.claim_scan', :'scan', false) \g /dev/null
-- retries are due at once (the battery takes them again)
SET idempotency.retry_backoff_base = 0;
CREATE TEMP TABLE attack_ev (event_id pg_catalog.uuid, attempt pg_catalog.int4, key pg_catalog.text);
