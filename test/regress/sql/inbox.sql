-- Inbox: per-consumer dedup, the leased queue, the ordering guard and argument errors.
\set VERBOSITY default
SET client_min_messages = warning;
-- a view of this file's rows without timestamps
CREATE TEMP VIEW ib AS
SELECT consumer, event_id, status, attempt, event_type, convert_from(payload, 'UTF8') AS payload,
       entity_key, entity_seq, last_error, lease_expires_at IS NOT NULL AS leased
FROM idempotency.inbox WHERE consumer LIKE 't\_%' ORDER BY consumer, event_id;
\i test/regress/helpers.sql

-- inline mode: new once per consumer, duplicate afterwards, per consumer group
SELECT idempotency.idem_inbox_receive('t_billing', 'evt-1');
SELECT idempotency.idem_inbox_receive('t_billing', 'evt-1');
SELECT idempotency.idem_inbox_receive('t_email', 'evt-1');
SELECT idempotency.idem_inbox_receive('t_email', 'evt-1');

-- payload hash: same hash duplicate, different hash mismatch (nothing changes), a missing hash
-- on either side cannot be compared and counts as duplicate
SELECT idempotency.idem_inbox_receive('t_billing', 'evt-2', sha256('{"amount":10}'));
SELECT idempotency.idem_inbox_receive('t_billing', 'evt-2', sha256('{"amount":10}'));
SELECT idempotency.idem_inbox_receive('t_billing', 'evt-2', sha256('{"amount":99}'));
SELECT idempotency.idem_inbox_receive('t_billing', 'evt-2');
SELECT idempotency.idem_inbox_receive('t_billing', 'evt-1', sha256('x'));
SELECT encode(payload_hash, 'hex') = encode(sha256('{"amount":10}'), 'hex') AS first_hash_kept
FROM idempotency.inbox WHERE consumer = 't_billing' AND event_id = 'evt-2';

-- the mark belongs to the caller's transaction: a rollback leaves the event unseen
BEGIN;
SELECT idempotency.idem_inbox_receive('t_billing', 'evt-3');
ROLLBACK;
SELECT idempotency.idem_inbox_receive('t_billing', 'evt-3');
-- a failing business effect in the same transaction also unmarks it
CREATE TEMP TABLE effects (event_id text PRIMARY KEY, amount int CHECK (amount > 0));
DO $$
BEGIN
    IF idempotency.idem_inbox_receive('t_billing', 'evt-4') = 'new' THEN
        INSERT INTO effects VALUES ('evt-4', -1); -- violates the CHECK
    END IF;
END $$;
SELECT idempotency.idem_inbox_receive('t_billing', 'evt-4');
SELECT count(*) AS effects FROM effects;

-- TTL: past it, a finished entry counts as absent and a delivery is new again
SELECT idempotency.idem_inbox_receive('t_ttl', 'evt-1', ttl => interval '1 millisecond');
SELECT pg_sleep(0.02);
SELECT idempotency.idem_inbox_receive('t_ttl', 'evt-1', sha256('other payload'));
SELECT idempotency.idem_inbox_receive('t_ttl', 'evt-1', sha256('other payload'));

-- queued mode: payload and event type stored with status received
SELECT idempotency.idem_inbox_receive('t_queue', 'q-1', sha256('{"n":1}'), enqueue => true,
                          event_type => 'order.paid', payload => convert_to('{"n":1}', 'UTF8'));
SELECT idempotency.idem_inbox_receive('t_queue', 'q-2', sha256('{"n":2}'), enqueue => true,
                          event_type => 'order.paid', payload => convert_to('{"n":2}', 'UTF8'));
SELECT idempotency.idem_inbox_receive('t_queue', 'q-3', sha256('{"n":3}'), enqueue => true,
                          event_type => 'order.paid', payload => convert_to('{"n":3}', 'UTF8'));
-- redelivery while queued: duplicate; with another payload: mismatch
SELECT idempotency.idem_inbox_receive('t_queue', 'q-1', sha256('{"n":1}'), enqueue => true,
                          payload => convert_to('{"n":1}', 'UTF8'));
SELECT idempotency.idem_inbox_receive('t_queue', 'q-1', sha256('{"n":9}'), enqueue => true,
                          payload => convert_to('{"n":9}', 'UTF8'));
SELECT * FROM ib WHERE consumer = 't_queue';

-- a worker takes a batch of two, oldest first, attempt 1
SELECT event_id, event_type, convert_from(payload, 'UTF8') AS payload, attempt,
       lease_expires_at > received_at AS leased
FROM idempotency.idem_inbox_next('t_queue', 2);
-- redelivery while processing: duplicate
SELECT idempotency.idem_inbox_receive('t_queue', 'q-1', sha256('{"n":1}'), enqueue => true,
                          payload => convert_to('{"n":1}', 'UTF8'));
-- the next batch skips leased events
SELECT event_id, attempt FROM idempotency.idem_inbox_next('t_queue', 10);
SELECT event_id, attempt FROM idempotency.idem_inbox_next('t_queue', 10);
-- done in the worker's transaction
SELECT idempotency.idem_inbox_done('t_queue', 'q-1', 1);
-- redelivery once done: duplicate
SELECT idempotency.idem_inbox_receive('t_queue', 'q-1', sha256('{"n":1}'), enqueue => true,
                          payload => convert_to('{"n":1}', 'UTF8'));
-- a failing handler: retryable puts it back (never lost, never done); with no backoff it is due
-- again at once (the backoff is tested below)
SET idempotency.retry_backoff_base = 0;
SELECT idempotency.idem_inbox_fail('t_queue', 'q-2', 1, error => 'timeout calling the mailer');
SELECT * FROM ib WHERE consumer = 't_queue';
SELECT event_id, attempt FROM idempotency.idem_inbox_next('t_queue', 10);
-- a rolled-back done leaves the lease in place
BEGIN;
SELECT idempotency.idem_inbox_done('t_queue', 'q-2', 2);
ROLLBACK;
SELECT status, attempt FROM ib WHERE consumer = 't_queue' AND event_id = 'q-2';
-- not retryable: failed (dead), kept for inspection, not taken again
SELECT idempotency.idem_inbox_fail('t_queue', 'q-2', 2, retryable => false, error => 'invalid address');
-- retryable but at max_attempts: failed as well
SELECT idempotency.idem_inbox_fail('t_queue', 'q-3', 1, max_attempts => 1);
SELECT * FROM ib WHERE consumer = 't_queue';
SELECT count(*) AS taken FROM idempotency.idem_inbox_next('t_queue');
-- a dead event redelivered is still a duplicate
SELECT idempotency.idem_inbox_receive('t_queue', 'q-2', sha256('{"n":2}'), enqueue => true,
                          payload => convert_to('{"n":2}', 'UTF8'));

-- backoff (src/leased_queue.cpp): a retryable failure is due again after retry_backoff_base,
-- doubled per attempt (the second half of each delay random), and the attempts are counted
-- against idempotency.max_attempts when the call passes none
RESET idempotency.retry_backoff_base; -- 1 s
SELECT idempotency.idem_inbox_receive('t_backoff', 'b-1', enqueue => true);
SELECT attempt FROM idempotency.idem_inbox_next('t_backoff');
SELECT idempotency.idem_inbox_fail('t_backoff', 'b-1', 1, error => 'provider down');
SELECT status, available_at - updated_at BETWEEN interval '0.5 s' AND interval '1 s' AS first_backoff
FROM idempotency.inbox WHERE consumer = 't_backoff';
SELECT count(*) AS taken_in_backoff FROM idempotency.idem_inbox_next('t_backoff');
UPDATE idempotency.inbox SET available_at = available_at - interval '1 s' WHERE consumer = 't_backoff';
SELECT attempt FROM idempotency.idem_inbox_next('t_backoff');
SELECT idempotency.idem_inbox_fail('t_backoff', 'b-1', 2);
SELECT available_at - updated_at BETWEEN interval '1 s' AND interval '2 s' AS second_backoff
FROM idempotency.inbox WHERE consumer = 't_backoff';
SET idempotency.max_attempts = 3;
UPDATE idempotency.inbox SET available_at = available_at - interval '2 s' WHERE consumer = 't_backoff';
SELECT attempt FROM idempotency.idem_inbox_next('t_backoff');
SELECT idempotency.idem_inbox_fail('t_backoff', 'b-1', 3); -- the third of 3 attempts: failed
SELECT status, attempt, last_error, available_at IS NULL AS not_due FROM idempotency.inbox
WHERE consumer = 't_backoff';
-- a worker that dies on every attempt never calls fail: the expired lease of the last attempt
-- makes the event failed instead of handing it out again
SET idempotency.max_attempts = 2;
SELECT idempotency.idem_inbox_receive('t_backoff', 'b-2', enqueue => true);
SELECT attempt FROM idempotency.idem_inbox_next('t_backoff', 1, interval '1 millisecond');
SELECT pg_sleep(0.01);
SELECT attempt FROM idempotency.idem_inbox_next('t_backoff', 1, interval '1 millisecond');
SELECT pg_sleep(0.01);
SELECT count(*) AS taken FROM idempotency.idem_inbox_next('t_backoff');
SELECT status, attempt, last_error, lease_expires_at FROM idempotency.inbox
WHERE consumer = 't_backoff' AND event_id = 'b-2';
-- an event that turns failed gives its place in the batch to the next due one: a batch of 1 is
-- not empty while a due event waits behind two dead ones (src/leased_queue.cpp, lease_batch)
SET idempotency.max_attempts = 1;
SELECT idempotency.idem_inbox_receive('t_deadslot', e, enqueue => true) FROM unnest(ARRAY['d1', 'd2']) e;
SELECT count(*) AS leased FROM idempotency.idem_inbox_next('t_deadslot', 2, interval '1 millisecond');
SELECT idempotency.idem_inbox_receive('t_deadslot', 'x1', enqueue => true);
SELECT pg_sleep(0.01);
SELECT event_id, attempt FROM idempotency.idem_inbox_next('t_deadslot', 1);
SELECT event_id, status, attempt FROM idempotency.inbox WHERE consumer = 't_deadslot' ORDER BY 1;
-- 0: no limit
SET idempotency.max_attempts = 0;
SELECT idempotency.idem_inbox_receive('t_backoff', 'b-3', enqueue => true);
UPDATE idempotency.inbox SET attempt = 1000 WHERE consumer = 't_backoff' AND event_id = 'b-3';
SELECT attempt FROM idempotency.idem_inbox_next('t_backoff', 1, interval '1 millisecond');
SELECT idempotency.idem_inbox_fail('t_backoff', 'b-3', 1001);
RESET idempotency.max_attempts;
SELECT try($$SET idempotency.max_attempts = -1$$);
SELECT try($$SET idempotency.max_attempts = '5s'$$);

-- an expired lease lets another worker take the event with attempt n+1; the first worker is
-- fenced (IK002)
SELECT idempotency.idem_inbox_receive('t_lease', 'l-1', enqueue => true, payload => '\x01');
SELECT event_id, attempt FROM idempotency.idem_inbox_next('t_lease', 1, interval '1 millisecond');
SELECT pg_sleep(0.02);
SELECT event_id, attempt FROM idempotency.idem_inbox_next('t_lease', 1);
SELECT try($$SELECT idempotency.idem_inbox_done('t_lease', 'l-1', 1)$$);
SELECT try($$SELECT idempotency.idem_inbox_fail('t_lease', 'l-1', 1)$$);
SELECT idempotency.idem_inbox_done('t_lease', 'l-1', 1); -- with detail and hint
SELECT idempotency.idem_inbox_done('t_lease', 'l-1', 2);
-- finished: IK003, also for the attempt that finished it
SELECT try($$SELECT idempotency.idem_inbox_done('t_lease', 'l-1', 2)$$);
SELECT try($$SELECT idempotency.idem_inbox_fail('t_lease', 'l-1', 2)$$);
-- unknown event: IK001
SELECT try($$SELECT idempotency.idem_inbox_done('t_lease', 'nope', 1)$$);
-- queued, never taken: IK002
SELECT idempotency.idem_inbox_receive('t_lease', 'l-2', enqueue => true);
SELECT try($$SELECT idempotency.idem_inbox_done('t_lease', 'l-2', 1)$$);
-- batches of many: each event once, FIFO by arrival
SELECT idempotency.idem_inbox_receive('t_batch', 'b-' || lpad(i::text, 2, '0'), enqueue => true) AS outcome,
       count(*) FROM generate_series(1, 25) i GROUP BY 1;
SELECT count(*) AS taken, count(DISTINCT event_id) AS distinct_events, min(attempt), max(attempt)
FROM idempotency.idem_inbox_next('t_batch', 10);
SELECT string_agg(event_id, ',') AS second_batch FROM idempotency.idem_inbox_next('t_batch', 10);
SELECT count(*) AS last_batch FROM idempotency.idem_inbox_next('t_batch', 10);

-- idem_inbox_next and idem_inbox_done keep one plan each, and it never scans the inbox
-- sequentially, however small the inbox was when it was planned (ANALYZE of a small inbox
-- invalidates the plans; by event id, next's batch update was a sequential scan then): 20
-- next + done cycles, 0 sequential scans
SELECT count(*) AS queued FROM (SELECT idempotency.idem_inbox_receive('t_plan', 'p-' || i, enqueue => true)
                                FROM generate_series(1, 30) i) r;
ANALYZE idempotency.inbox;
SELECT pg_stat_force_next_flush();
CREATE TEMP TABLE scans_before AS
    SELECT seq_scan FROM pg_stat_user_tables WHERE relid = 'idempotency.inbox'::regclass;
DO $$
DECLARE r record;
BEGIN
    FOR i IN 1..20 LOOP
        SELECT * INTO r FROM idempotency.idem_inbox_next('t_plan', 1);
        PERFORM idempotency.idem_inbox_done('t_plan', r.event_id, r.attempt);
    END LOOP;
END $$;
SELECT pg_stat_force_next_flush();
SELECT s.seq_scan - b.seq_scan AS seq_scans, (SELECT count(*) FROM idempotency.inbox
       WHERE consumer = 't_plan' AND status = 'done' AND attempt = 1) AS done
FROM pg_stat_user_tables s, scans_before b WHERE s.relid = 'idempotency.inbox'::regclass;

-- ordering guard, inline: an event older than the last applied one is stale and recorded as
-- seen; equal sequence numbers are stale too
SELECT idempotency.idem_inbox_receive('t_order', 'o-2', entity_key => 'order-1', entity_seq => 2);
SELECT idempotency.idem_inbox_receive('t_order', 'o-1', entity_key => 'order-1', entity_seq => 1);
SELECT idempotency.idem_inbox_receive('t_order', 'o-1', entity_key => 'order-1', entity_seq => 1);
SELECT idempotency.idem_inbox_receive('t_order', 'o-2b', entity_key => 'order-1', entity_seq => 2);
SELECT idempotency.idem_inbox_receive('t_order', 'o-3', entity_key => 'order-1', entity_seq => 3);
SELECT idempotency.idem_inbox_receive('t_order', 'x-1', entity_key => 'order-2', entity_seq => 1);
-- a rolled-back apply does not advance the entity
BEGIN;
SELECT idempotency.idem_inbox_receive('t_order', 'o-9', entity_key => 'order-1', entity_seq => 9);
ROLLBACK;
SELECT idempotency.idem_inbox_receive('t_order', 'o-4', entity_key => 'order-1', entity_seq => 4);
SELECT * FROM ib WHERE consumer = 't_order';
SELECT consumer, entity_key, last_seq, event_id FROM idempotency.inbox_entities
WHERE consumer LIKE 't\_%' ORDER BY 1, 2;
-- per consumer: another consumer has its own guard
SELECT idempotency.idem_inbox_receive('t_order_audit', 'o-1', entity_key => 'order-1', entity_seq => 1);

-- ordering guard, queued: checked at receipt (already older) and applied at done: a late
-- PENDING must not roll a SUCCEEDED back
SELECT idempotency.idem_inbox_receive('t_pay', 'p-succeeded', enqueue => true, event_type => 'SUCCEEDED',
                          entity_key => 'pay-1', entity_seq => 2);
SELECT idempotency.idem_inbox_receive('t_pay', 'p-pending', enqueue => true, event_type => 'PENDING',
                          entity_key => 'pay-1', entity_seq => 1);
SELECT event_id, event_type, entity_seq, attempt FROM idempotency.idem_inbox_next('t_pay');
SELECT idempotency.idem_inbox_done('t_pay', 'p-succeeded', 1);
SELECT idempotency.idem_inbox_done('t_pay', 'p-pending', 1);
-- a late one arriving after the apply is stale at once
SELECT idempotency.idem_inbox_receive('t_pay', 'p-created', enqueue => true, event_type => 'CREATED',
                          entity_key => 'pay-1', entity_seq => 0);
SELECT * FROM ib WHERE consumer = 't_pay';
-- a stale event redelivered: duplicate
SELECT idempotency.idem_inbox_receive('t_pay', 'p-pending', enqueue => true, event_type => 'PENDING',
                          entity_key => 'pay-1', entity_seq => 1);

-- the batch form of done: one statement, each event fenced by its own attempt, the entity guard
-- applied in the arrays' order (the later seq first makes the earlier stale); left out, never
-- raised: a stale attempt, an event never taken, an unknown id, a finished one
SELECT idempotency.idem_inbox_receive('t_dbatch', e, enqueue => true, entity_key => k, entity_seq => q)
FROM (VALUES ('d-1', NULL, NULL), ('d-2', 'acct-1', 1), ('d-3', 'acct-1', 2), ('d-4', NULL, NULL))
     v(e, k, q);
SELECT event_id, attempt FROM idempotency.idem_inbox_next('t_dbatch', 3);
SELECT d.event_id, d.outcome
FROM idempotency.idem_inbox_done_batch('t_dbatch', ARRAY['d-3', 'd-2', 'd-1', 'd-4', 'nope', 'd-3'],
                           ARRAY[1, 1, 2, 1, 1, 1]) d;
SELECT * FROM ib WHERE consumer = 't_dbatch';
SELECT try($$SELECT idempotency.idem_inbox_done('t_dbatch', 'd-1', 2)$$);
SELECT d.event_id, d.outcome FROM idempotency.idem_inbox_done_batch('t_dbatch', ARRAY['d-1'], ARRAY[1]) d;
-- a rolled-back batch leaves the lease in place
SELECT event_id, attempt FROM idempotency.idem_inbox_next('t_dbatch');
BEGIN;
SELECT count(*) FROM idempotency.idem_inbox_done_batch('t_dbatch', ARRAY['d-4'], ARRAY[1]);
ROLLBACK;
SELECT event_id, status, attempt FROM idempotency.inbox WHERE consumer = 't_dbatch' AND event_id = 'd-4';
SELECT count(*) AS empty FROM idempotency.idem_inbox_done_batch('t_dbatch', '{}', '{}');
SELECT try($$SELECT idempotency.idem_inbox_done_batch(NULL, '{a}', '{1}')$$);
SELECT try($$SELECT idempotency.idem_inbox_done_batch('t_dbatch', '{a,b}', '{1}')$$);
SELECT try($$SELECT idempotency.idem_inbox_done_batch('t_dbatch', '{a,NULL}', '{1,1}')$$);
SELECT try($$SELECT idempotency.idem_inbox_done_batch('t_dbatch', '{a}', '{0}')$$);
SELECT d.event_id, d.outcome FROM idempotency.idem_inbox_done_batch('t_dbatch', ARRAY['d-4'], ARRAY[1]) d;

-- argument errors (nothing is written)
SELECT try($$SELECT idempotency.idem_inbox_receive(NULL, 'e')$$);
SELECT try($$SELECT idempotency.idem_inbox_receive('t_err', NULL)$$);
SELECT try($$SELECT idempotency.idem_inbox_receive('', 'e')$$);
SELECT try($$SELECT idempotency.idem_inbox_receive('t_err', '')$$);
SELECT try($$SELECT idempotency.idem_inbox_receive('t_err', repeat('x', 1025))$$);
SELECT try($$SELECT idempotency.idem_inbox_receive(repeat('c', 256), 'e')$$);
SELECT try($$SELECT idempotency.idem_inbox_receive('t_err', 'e', '\x')$$);
SELECT try($$SELECT idempotency.idem_inbox_receive('t_err', 'e', decode(repeat('00', 65), 'hex'))$$);
SELECT try($$SELECT idempotency.idem_inbox_receive('t_err', 'e', entity_key => 'k')$$);
SELECT try($$SELECT idempotency.idem_inbox_receive('t_err', 'e', entity_seq => 1)$$);
SELECT try($$SELECT idempotency.idem_inbox_receive('t_err', 'e', payload => '\x01')$$);
SELECT try($$SELECT idempotency.idem_inbox_receive('t_err', 'e', ttl => interval '0')$$);
SELECT try($$SELECT idempotency.idem_inbox_receive('t_err', 'e', ttl => interval '-1 day')$$);
SELECT try($$SELECT idempotency.idem_inbox_receive('t_err', 'e', ttl => interval '300000 years')$$);
SELECT try($$SELECT * FROM idempotency.idem_inbox_next('t_err', 0)$$);
SELECT try($$SELECT * FROM idempotency.idem_inbox_next('t_err', 10001)$$);
SELECT try($$SELECT * FROM idempotency.idem_inbox_next('t_err', 10, interval '0')$$);
SELECT try($$SELECT * FROM idempotency.idem_inbox_next(NULL)$$);
SELECT try($$SELECT idempotency.idem_inbox_done('t_err', 'e', 0)$$);
SELECT try($$SELECT idempotency.idem_inbox_done('t_err', 'e', NULL)$$);
SELECT try($$SELECT idempotency.idem_inbox_fail('t_err', 'e', 1, max_attempts => 0)$$);
SELECT count(*) AS err_rows FROM ib WHERE consumer = 't_err';

-- idempotency.direct_access: a first delivery is written through the table and index access
-- methods (on, the default) or by the SQL statement (off); every answer and every row is the
-- same both ways (inline, queued with payload, hashes, entity guard, duplicates, mismatches)
CREATE TEMP TABLE deliveries (n int, event_id text, hash bytea, enqueue boolean, payload bytea,
                              entity_key text, entity_seq bigint);
INSERT INTO deliveries VALUES
    (1, 'd-inline', '\x01', false, NULL, NULL, NULL), (2, 'd-inline', '\x01', false, NULL, NULL, NULL),
    (3, 'd-inline', '\x02', false, NULL, NULL, NULL), (4, 'd-nohash', NULL, false, NULL, NULL, NULL),
    (5, 'd-queued', '\x03', true, 'body', NULL, NULL), (6, 'd-queued', '\x03', true, 'body', NULL, NULL),
    (7, 'd-queued', '\x04', true, 'other', NULL, NULL), (8, 'd-seq-2', NULL, false, NULL, 'ord-1', 2),
    (9, 'd-seq-1', NULL, false, NULL, 'ord-1', 1), (10, 'd-qseq-1', NULL, true, NULL, 'ord-1', 1);
SET idempotency.direct_access = off;
CREATE TEMP TABLE via_sql AS
    SELECT d.n, idempotency.idem_inbox_receive('t_sql', d.event_id, d.hash, d.enqueue, NULL, d.payload,
                                   d.entity_key, d.entity_seq) AS outcome
    FROM deliveries d ORDER BY d.n;
RESET idempotency.direct_access;
CREATE TEMP TABLE via_direct AS
    SELECT d.n, idempotency.idem_inbox_receive('t_direct', d.event_id, d.hash, d.enqueue, NULL, d.payload,
                                   d.entity_key, d.entity_seq) AS outcome
    FROM deliveries d ORDER BY d.n;
SELECT s.n, s.outcome AS via_sql, d.outcome AS via_direct
FROM via_sql s JOIN via_direct d USING (n) ORDER BY n;
SELECT count(*) AS differing_rows FROM (
    (SELECT event_id, status, attempt, payload, entity_key, entity_seq FROM ib WHERE consumer = 't_sql'
     EXCEPT SELECT event_id, status, attempt, payload, entity_key, entity_seq FROM ib WHERE consumer = 't_direct')
    UNION ALL
    (SELECT event_id, status, attempt, payload, entity_key, entity_seq FROM ib WHERE consumer = 't_direct'
     EXCEPT SELECT event_id, status, attempt, payload, entity_key, entity_seq FROM ib WHERE consumer = 't_sql')) x;
-- a queued event written directly is in the queue index (and an inline one is not): the worker
-- gets it, and amcheck finds every row of both indexes that should be there
SELECT event_id, attempt FROM idempotency.idem_inbox_next('t_direct', 10) ORDER BY event_id;
CREATE EXTENSION amcheck;
SELECT 'complete' AS pkey FROM (SELECT bt_index_check('idempotency.inbox_pkey', true)) c;
SELECT 'complete' AS queue FROM (SELECT bt_index_check('idempotency.inbox_queue', true)) c;
-- the table as installed takes the direct path on every supported major: the function says
-- at DEBUG1 when it steps aside, and here it does not
SET client_min_messages = debug1;
SELECT idempotency.idem_inbox_receive('t_direct', 'taken-inline');
SELECT idempotency.idem_inbox_receive('t_direct', 'taken-queued', enqueue => true);
SET client_min_messages = warning;
-- a trigger on the inbox (not supported, but not ignored either): deliveries fall back to the
-- SQL statement, so the trigger sees every first delivery
CREATE FUNCTION pg_temp.saw_event() RETURNS trigger LANGUAGE plpgsql AS
    $$BEGIN RAISE NOTICE 'trigger saw %/%', NEW.consumer, NEW.event_id; RETURN NEW; END$$;
CREATE TRIGGER saw_event BEFORE INSERT ON idempotency.inbox
    FOR EACH ROW EXECUTE FUNCTION pg_temp.saw_event();
SET client_min_messages = debug1;
SELECT idempotency.idem_inbox_receive('t_direct', 'trigger-1');
SET client_min_messages = warning;
DROP TRIGGER saw_event ON idempotency.inbox;
-- a queue index of another definition under the same name: the direct path cannot know which
-- rows belong in it, so it steps aside and the index gets what its own predicate says
BEGIN;
DROP INDEX idempotency.inbox_queue;
CREATE INDEX inbox_queue ON idempotency.inbox (consumer, received_at)
    WHERE status IN ('received', 'processing', 'done');
SET LOCAL client_min_messages = debug1;
SELECT idempotency.idem_inbox_receive('t_direct', 'other-queue-index');
RESET client_min_messages;
SELECT 'complete' AS other_queue FROM (SELECT bt_index_check('idempotency.inbox_queue', true)) c;
ROLLBACK;
SELECT count(*) AS rolled_back FROM idempotency.inbox WHERE event_id = 'other-queue-index';
SELECT idempotency.idem_inbox_receive('t_direct', 'after-rollback');
-- the direct path inserts a first delivery before it looks the event up (most deliveries are
-- first ones): each redelivery leaves one killed row version for VACUUM (n_tup_ins counts
-- them: 3 row versions for 1 entry), and the indexes stay whole
BEGIN;
SELECT n_tup_ins AS ins_before FROM pg_stat_xact_user_tables
WHERE relid = 'idempotency.inbox'::regclass \gset
SELECT idempotency.idem_inbox_receive('t_direct', 'again-1', '\x01') AS first,
       idempotency.idem_inbox_receive('t_direct', 'again-1', '\x01') AS again,
       idempotency.idem_inbox_receive('t_direct', 'again-1', '\x02') AS other_hash;
SELECT n_tup_ins - :ins_before AS row_versions_inserted FROM pg_stat_xact_user_tables
WHERE relid = 'idempotency.inbox'::regclass;
COMMIT;
SELECT count(*) AS entries FROM idempotency.inbox WHERE event_id = 'again-1';
SELECT 'complete' AS pkey FROM (SELECT bt_index_check('idempotency.inbox_pkey', true)) c;
DROP EXTENSION amcheck;

-- privileges: a role granted the function needs no rights on the tables
CREATE ROLE inbox_regress_user;
GRANT EXECUTE ON FUNCTION idempotency.idem_inbox_receive(text, text, bytea, boolean, text, bytea, text, bigint,
                                             interval) TO inbox_regress_user;
SET ROLE inbox_regress_user;
SELECT idempotency.idem_inbox_receive('t_role', 'r-1');
SELECT count(*) FROM idempotency.inbox;
RESET ROLE;
REVOKE EXECUTE ON FUNCTION idempotency.idem_inbox_receive(text, text, bytea, boolean, text, bytea, text, bigint,
                                              interval) FROM inbox_regress_user;
DROP ROLE inbox_regress_user;
SELECT consumer, event_id, status FROM ib WHERE consumer = 't_role';

-- every object of the inbox is documented
SELECT p.oid::regprocedure AS undocumented FROM pg_proc p
WHERE (p.proname LIKE 'idem\_inbox%' OR p.proname LIKE 'idem\_webhook%')
  AND obj_description(p.oid, 'pg_proc') IS NULL;
SELECT c.oid::regclass AS undocumented FROM pg_class c
WHERE c.relnamespace = 'idempotency'::regnamespace AND c.relname LIKE 'inbox%'
  AND c.relkind IN ('r', 'i') AND obj_description(c.oid, 'pg_class') IS NULL
  AND c.relname NOT LIKE '%pkey';
