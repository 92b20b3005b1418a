-- idem_stuck / idem_purge / idem_purge_batch / idem_purge_loop / idem_schedule_purge: exact counts.
\pset null '<NULL>'
SET client_min_messages = warning;

\i test/regress/helpers.sql
-- lc_put(key, status, lease from now, expires from now): a record with the given times.
CREATE FUNCTION lc_put(k text, st text, lease interval, expires interval) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO idempotency.records (scope, key, status, attempt, created_at, updated_at,
                                     lease_expires_at, expires_at)
    VALUES ('lc', k, st, 1, clock_timestamp() - interval '1 day', clock_timestamp() - interval '1 day',
            clock_timestamp() + lease, clock_timestamp() + expires)
$$;
CREATE VIEW lc_rec AS SELECT key, status FROM idempotency.records WHERE scope = 'lc' ORDER BY key;
DELETE FROM idempotency.records;
DELETE FROM idempotency.inbox;

-- finished and expired: 5 completed, 2 failed (deleted by purge)
SELECT lc_put('done-' || i, 'completed', NULL, '-1 hour') FROM generate_series(1, 5) i;
SELECT lc_put('fail-' || i, 'failed', NULL, '-1 minute') FROM generate_series(1, 2) i;
-- finished and live (kept)
SELECT lc_put('live-' || i, 'completed', NULL, '1 hour') FROM generate_series(1, 3) i;
-- processing with a live lease (never deleted)
SELECT lc_put('leased', 'processing', '1 minute', '1 day');
-- stuck: lease ended, TTL still running (never deleted, not even with include_stuck)
SELECT lc_put('stuck-ttl-running', 'processing', '-5 minutes', '1 hour');
-- stuck and past the TTL: lease ended 2 hours / 10 minutes ago
SELECT lc_put('stuck-old', 'processing', '-2 hours', '-1 hour');
SELECT lc_put('stuck-new', 'processing', '-10 minutes', '-5 minutes');
-- an inconsistent row (expired, but its lease is live): the lease wins, never deleted
SELECT lc_put('lease-beats-ttl', 'processing', '1 hour', '-1 hour');
SELECT count(*) AS records FROM idempotency.records;

-- idem_stuck: processing records whose lease ended, oldest first
SELECT key, attempt, fingerprint, lease_expires_at < now() AS lease_ended, expires_at < now() AS expired
FROM idempotency.idem_stuck();
SELECT key FROM idempotency.idem_stuck('30 minutes');
SELECT key FROM idempotency.idem_stuck('1 day');
SELECT try($$SELECT * FROM idempotency.idem_stuck(NULL)$$, with_hint => true);
SELECT try($$SELECT * FROM idempotency.idem_stuck('-1 second')$$, with_hint => true);

-- the batch bound: one iteration of at most 2 rows per table
SELECT idempotency.idem_purge(batch_size => 2, max_batches => 1);
SELECT count(*) AS records FROM idempotency.records;
SELECT idempotency.idem_purge(batch_size => 2, max_batches => 2);
SELECT count(*) AS records FROM idempotency.records;
-- the rest, then nothing
SELECT idempotency.idem_purge();
SELECT idempotency.idem_purge();
SELECT idempotency.idem_purge(max_batches => 0);
-- only the live, leased and stuck records are left
SELECT * FROM lc_rec;

-- stuck records only when asked, and only those whose lease ended stuck_older_than ago
SELECT idempotency.idem_purge(include_stuck => true, stuck_older_than => '1 day');
SELECT idempotency.idem_purge(include_stuck => true, stuck_older_than => '30 minutes');
SELECT key FROM idempotency.idem_stuck();
SELECT idempotency.idem_purge(include_stuck => true);
SELECT * FROM lc_rec;

-- a purged key is new again: claimed with attempt 1
SELECT lc_put('again', 'completed', NULL, '-1 second');
SELECT idempotency.idem_purge();
SELECT outcome, attempt FROM idempotency.idem_claim('lc', 'again');

-- idem_purge_batch: the step, continuing after the last deleted row; last is NULL at the end
SELECT lc_put('step-' || i, 'completed', NULL, '-1 hour') FROM generate_series(1, 5) i;
CREATE TEMP TABLE lc_pos AS SELECT * FROM idempotency.idem_purge_batch('records', 3);
SELECT deleted, last IS NOT NULL AS more FROM lc_pos;
SELECT deleted, last FROM idempotency.idem_purge_batch('records', 3, (SELECT last FROM lc_pos));
SELECT deleted, last FROM idempotency.idem_purge_batch('records', 3);
SELECT try($$SELECT idempotency.idem_purge_batch('nothing', 1)$$, with_hint => true);
SELECT try($$SELECT idempotency.idem_purge_batch('records', 0)$$, with_hint => true);
SELECT try($$SELECT idempotency.idem_purge_batch('records', NULL)$$, with_hint => true);
SELECT try($$SELECT idempotency.idem_purge_batch('records', 1, NULL)$$, with_hint => true);
SELECT try($$SELECT idempotency.idem_purge_batch('records', 1, '(0,0)', NULL)$$, with_hint => true);

-- argument errors
SELECT try($$SELECT idempotency.idem_purge(0)$$, with_hint => true);
SELECT try($$SELECT idempotency.idem_purge(NULL)$$, with_hint => true);
SELECT try($$SELECT idempotency.idem_purge(max_batches => -1)$$, with_hint => true);
SELECT try($$SELECT idempotency.idem_purge(include_stuck => NULL)$$, with_hint => true);
SELECT try($$SELECT idempotency.idem_purge(stuck_older_than => '-1 minute')$$, with_hint => true);
SELECT try($$SELECT idempotency.idem_purge(stuck_older_than => NULL)$$, with_hint => true);

-- idem_purge_loop: commits per batch, returns the count
SELECT lc_put('loop-' || i, 'failed', NULL, '-1 hour') FROM generate_series(1, 7) i;
CALL idempotency.idem_purge_loop(batch_size => 2);
CALL idempotency.idem_purge_loop();
SELECT try($$CALL idempotency.idem_purge_loop(max_duration => NULL)$$, with_hint => true);
-- inside a transaction block it cannot commit
BEGIN;
SELECT try($$CALL idempotency.idem_purge_loop()$$, with_hint => true);
ROLLBACK;

-- the inbox: only settled entries (done, failed, stale) past their retention
DELETE FROM idempotency.inbox;
INSERT INTO idempotency.inbox (consumer, event_id, status, attempt, received_at, updated_at, expires_at)
SELECT 'lc', s || '-' || e, s, 1, now() - interval '8 days', now() - interval '8 days',
       CASE e WHEN 'expired' THEN now() - interval '1 hour' ELSE now() + interval '1 hour' END
FROM unnest(ARRAY['received', 'processing', 'done', 'failed', 'stale']) s,
     unnest(ARRAY['expired', 'kept']) e;
SELECT idempotency.idem_purge(batch_size => 1, max_batches => 1);
SELECT idempotency.idem_purge(include_stuck => true);
SELECT event_id FROM idempotency.inbox ORDER BY event_id;
DELETE FROM idempotency.inbox;

-- a caller without rights on the internal tables can purge and list stuck records once granted
-- EXECUTE (the functions are not executable by PUBLIC, see README "Privileges")
CREATE ROLE regress_idem_lifecycle;
GRANT EXECUTE ON FUNCTION idempotency.idem_purge(integer, integer, boolean, interval),
    idempotency.idem_purge_batch(text, integer, tid, boolean, interval), idempotency.idem_stuck(interval)
    TO regress_idem_lifecycle;
SELECT lc_put('role', 'completed', NULL, '-1 hour');
SELECT lc_put('role-stuck', 'processing', '-1 hour', '1 hour');
SET ROLE regress_idem_lifecycle;
SELECT idempotency.idem_purge();
SELECT key FROM idempotency.idem_stuck();
SELECT try($$SELECT count(*) FROM idempotency.records$$, with_hint => true);
RESET ROLE;
SELECT key FROM lc_rec WHERE key LIKE 'role%';
REVOKE ALL ON FUNCTION idempotency.idem_purge(integer, integer, boolean, interval),
    idempotency.idem_purge_batch(text, integer, tid, boolean, interval), idempotency.idem_stuck(interval)
    FROM regress_idem_lifecycle;
DROP ROLE regress_idem_lifecycle;

-- scheduling: the regression database is not the cron database (cron.database_name); the hint
-- is the exact SQL to run there
SHOW cron.database_name;
SELECT try($$SELECT idempotency.idem_schedule_purge()$$, with_hint => true);
SELECT try($$SELECT idempotency.idem_schedule_purge('0 * * * *', 'shop', 500)$$, with_hint => true);
SELECT try($$SELECT idempotency.idem_unschedule_purge()$$, with_hint => true);
SELECT try($$SELECT idempotency.idem_schedule_purge(NULL)$$, with_hint => true);
SELECT try($$SELECT idempotency.idem_schedule_purge(batch_size => 0)$$, with_hint => true);

DELETE FROM idempotency.records;
DELETE FROM idempotency.inbox;
DROP VIEW lc_rec;
DROP FUNCTION lc_put(text, text, interval, interval);
DROP FUNCTION try(text, boolean);
