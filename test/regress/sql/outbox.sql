-- Outbox: every outcome and every error of idem_outbox_emit / _next / _done / _fail / _requeue,
-- idem_outbox_stats, the purge of done events, the counters and the privileges. The concurrent
-- cases (parallel relays, commit order, dedup races, NOTIFY) are test/isolation/specs/outbox_*.
\set VERBOSITY default
SET client_min_messages = warning;
\i test/regress/helpers.sql
-- try() with the error's detail on a line of its own (the IK002 / 55000 details say why)
CREATE FUNCTION try_detail(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    detail text;
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
    RETURN SQLSTATE || ': ' || SQLERRM || CASE WHEN detail <> '' THEN E'\nDETAIL: ' || detail ELSE '' END;
END $$;
-- this file's events (topics t_*) without ids and timestamps, in emit order; n names an event
CREATE TEMP VIEW ob AS
SELECT topic, key, coalesce(payload ->> 'n', encode(payload_bytes, 'escape')) AS n, status,
       attempt, attempt_base, last_error, lease_expires_at IS NOT NULL AS leased
FROM idempotency.outbox WHERE topic LIKE 't\_%' ORDER BY topic, seq;
-- the id of event n of a topic
CREATE FUNCTION ob_id(t text, n text) RETURNS uuid LANGUAGE sql STABLE AS $$
    SELECT event_id FROM idempotency.outbox
    WHERE topic = t AND coalesce(payload ->> 'n', encode(payload_bytes, 'escape')) = n
$$;
-- a relay's call: the events taken as n#attempt in the order returned, '-' for none
CREATE FUNCTION take(t text, batch integer DEFAULT 100, lease interval DEFAULT NULL) RETURNS text
LANGUAGE sql AS $$
    SELECT coalesce(string_agg(coalesce(payload ->> 'n', encode(payload_bytes, 'escape')) || '#' || attempt, ','), '-')
    FROM idempotency.idem_outbox_next(t, batch, lease)
$$;
-- the counters before (compared at the end; the library is preloaded in the regress cluster)
CREATE TEMP TABLE counters_before AS SELECT counter, value FROM idempotency.idem_counters();
SET idempotency.retry_backoff_base = 0; -- retries due at once until the backoff section

-- emit: a UUIDv7 id, the event pending with attempt 0 and due at once, written in the caller's
-- transaction; jsonb, JSON text (an untyped literal too) and bytea payloads
CREATE TEMP TABLE ids (name text PRIMARY KEY, id uuid);
INSERT INTO ids VALUES ('jsonb', idempotency.idem_outbox_emit('t_emit', '{"n": "jsonb", "b": [1, 2]}'::jsonb,
                                                  'order-1', 'd-1', '{"content-type": "application/json"}'));
INSERT INTO ids VALUES ('text', idempotency.idem_outbox_emit('t_emit', '{"n": "text",   "a":  1}'::text));
INSERT INTO ids VALUES ('untyped', idempotency.idem_outbox_emit('t_emit', '{"n": "untyped"}'));
INSERT INTO ids VALUES ('bytes', idempotency.idem_outbox_emit('t_emit', convert_to('bytes', 'UTF8'), 'order-1'));
SELECT i.name, substr(i.id::text, 15, 1) AS uuid_version, o.key, o.dedup_key, o.payload,
       o.payload_bytes, o.headers, o.status, o.attempt, o.attempt_base,
       o.available_at = o.emitted_at AS due_at_once, o.lease_expires_at, o.expires_at, o.last_error
FROM ids i JOIN idempotency.outbox o ON o.event_id = i.id ORDER BY o.seq;
SELECT count(DISTINCT id) AS distinct_ids, bool_and(o.updated_at = o.emitted_at) AS updated_is_emitted,
       (array_agg(o.seq ORDER BY o.seq) = array_agg(o.seq ORDER BY i.name = 'jsonb' DESC, i.name = 'text' DESC,
                                                  i.name = 'untyped' DESC)) AS seq_in_emit_order
FROM ids i JOIN idempotency.outbox o ON o.event_id = i.id;
-- a rolled-back emit leaves nothing; headers may be an empty object
BEGIN;
SELECT idempotency.idem_outbox_emit('t_emit', '{"n": "rolled back"}', headers => '{}') IS NOT NULL AS emitted;
SELECT count(*) AS inside FROM ob WHERE topic = 't_emit';
ROLLBACK;
SELECT count(*) AS after_rollback FROM ob WHERE topic = 't_emit';
SELECT idempotency.idem_outbox_emit('t_emit', '{"n": "empty headers"}', headers => '{}') IS NOT NULL AS emitted;
-- the limits: topic 255 bytes, key and dedup_key 1024 bytes (bytes, not characters)
SELECT idempotency.idem_outbox_emit(repeat('t', 255), '{}') IS NOT NULL AS topic_255,
       idempotency.idem_outbox_emit('t_emit', '{"n": "long key"}', repeat('k', 1024), repeat('d', 1024)) IS NOT NULL AS key_1024;
DELETE FROM idempotency.outbox WHERE topic = repeat('t', 255);

-- emit errors: nothing is written
SELECT try($$SELECT idempotency.idem_outbox_emit(NULL, '{}'::jsonb)$$, true);
SELECT try($$SELECT idempotency.idem_outbox_emit('t_err', NULL::jsonb)$$, true);
SELECT try($$SELECT idempotency.idem_outbox_emit('t_err', NULL::text)$$, true);
SELECT try($$SELECT idempotency.idem_outbox_emit('t_err', NULL::bytea)$$, true);
SELECT try($$SELECT idempotency.idem_outbox_emit('', '{}')$$);
SELECT try($$SELECT idempotency.idem_outbox_emit('t_err', '{}', key => '')$$);
SELECT try($$SELECT idempotency.idem_outbox_emit('t_err', '{}', dedup_key => '')$$);
SELECT try_detail($$SELECT idempotency.idem_outbox_emit(repeat('t', 256), '{}')$$);
SELECT try_detail($$SELECT idempotency.idem_outbox_emit(repeat('é', 128), '{}')$$);
SELECT try_detail($$SELECT idempotency.idem_outbox_emit('t_err', '{}', key => repeat('k', 1025))$$);
SELECT try_detail($$SELECT idempotency.idem_outbox_emit('t_err', '{}', dedup_key => repeat('d', 1025))$$);
SELECT try_detail($$SELECT idempotency.idem_outbox_emit('t_err', '{}', headers => '[]')$$);
SELECT try($$SELECT idempotency.idem_outbox_emit('t_err', '{}', headers => '"content-type"')$$);
SELECT try($$SELECT idempotency.idem_outbox_emit('t_err', '{}', headers => '1')$$);
SELECT try($$SELECT idempotency.idem_outbox_emit('t_err', '{}', headers => 'null')$$);
SELECT try($$SELECT idempotency.idem_outbox_emit('t_err', '\x01'::bytea, headers => '[{"a": 1}]')$$);
SELECT try($$SELECT idempotency.idem_outbox_emit('t_err', '{}', deliver_after => interval '-1 second')$$);
SELECT try($$SELECT idempotency.idem_outbox_emit('t_err', '{}', deliver_after => interval '-1 day 1 hour')$$);
SELECT try($$SELECT idempotency.idem_outbox_emit('t_err', '{"n": 1')$$);
SELECT try($$SELECT idempotency.idem_outbox_emit('t_err', 'not json'::text)$$);
SELECT try($$SELECT idempotency.idem_outbox_emit('t_err', '{"n": NaN}')$$);
SELECT count(*) AS err_rows FROM idempotency.outbox WHERE topic IN ('t_err', '') OR length(topic) > 255;

-- deliver_after: the event is not handed out before it is due
SELECT idempotency.idem_outbox_emit('t_later', '{"n": "later"}', deliver_after => interval '1 hour') IS NOT NULL AS emitted;
SELECT idempotency.idem_outbox_emit('t_later', '{"n": "zero"}', deliver_after => interval '0') IS NOT NULL AS emitted;
SELECT payload ->> 'n' AS n, available_at - emitted_at AS delay FROM idempotency.outbox
WHERE topic = 't_later' ORDER BY seq;
SELECT payload ->> 'n' AS n, attempt FROM idempotency.idem_outbox_next('t_later');
SELECT count(*) AS taken_before_due FROM idempotency.idem_outbox_next('t_later');
UPDATE idempotency.outbox SET available_at = available_at - interval '1 hour' WHERE topic = 't_later';
SELECT payload ->> 'n' AS n, attempt FROM idempotency.idem_outbox_next('t_later');

-- dedup_key: a second emit of (topic, dedup_key) writes nothing and returns the first id while
-- the first event is kept (pending, leased, done); another topic is another key space; once
-- the first event is purged the key is free again
INSERT INTO ids VALUES ('d1', idempotency.idem_outbox_emit('t_dedup', '{"n": "first"}', dedup_key => 'order-7:paid'));
SELECT idempotency.idem_outbox_emit('t_dedup', '{"n": "second"}', dedup_key => 'order-7:paid') = (SELECT id FROM ids WHERE name = 'd1') AS same_id_pending;
SELECT idempotency.idem_outbox_emit('t_dedup', '\x00'::bytea, key => 'k', dedup_key => 'order-7:paid') = (SELECT id FROM ids WHERE name = 'd1') AS same_id_bytea;
SELECT idempotency.idem_outbox_emit('t_dedup2', '{"n": "other topic"}', dedup_key => 'order-7:paid') = (SELECT id FROM ids WHERE name = 'd1') AS same_id_other_topic;
BEGIN; -- twice in one transaction: one event
SELECT idempotency.idem_outbox_emit('t_dedup', '{"n": "tx-1"}', dedup_key => 'tx') = idempotency.idem_outbox_emit('t_dedup', '{"n": "tx-2"}', dedup_key => 'tx') AS same_id_in_tx;
COMMIT;
SELECT payload ->> 'n' AS n, attempt FROM idempotency.idem_outbox_next('t_dedup');
SELECT idempotency.idem_outbox_emit('t_dedup', '{"n": "third"}', dedup_key => 'order-7:paid') = (SELECT id FROM ids WHERE name = 'd1') AS same_id_leased;
SELECT idempotency.idem_outbox_done((SELECT id FROM ids WHERE name = 'd1'), 1);
SELECT idempotency.idem_outbox_emit('t_dedup', '{"n": "fourth"}', dedup_key => 'order-7:paid') = (SELECT id FROM ids WHERE name = 'd1') AS same_id_done;
SELECT * FROM ob WHERE topic LIKE 't\_dedup%';
UPDATE idempotency.outbox SET expires_at = now() - interval '1 second' WHERE event_id = (SELECT id FROM ids WHERE name = 'd1');
SELECT deleted FROM idempotency.idem_purge_batch('outbox', 100);
SELECT idempotency.idem_outbox_emit('t_dedup', '{"n": "after purge"}', dedup_key => 'order-7:paid') = (SELECT id FROM ids WHERE name = 'd1') AS same_id_after_purge;
SELECT n, status, attempt FROM ob WHERE topic = 't_dedup';

-- next: batches in emit order, attempt 1, the lease; the arguments
SELECT count(idempotency.idem_outbox_emit('t_batch', jsonb_build_object('n', i::text))) AS emitted
FROM generate_series(1, 5) i;
SELECT string_agg(payload ->> 'n', ',' ORDER BY emitted_at) AS first_two, max(attempt) AS attempt
FROM idempotency.idem_outbox_next('t_batch', 2);
SELECT string_agg(payload ->> 'n', ',') AS in_order FROM idempotency.idem_outbox_next('t_batch', 10);
SELECT count(*) AS empty FROM idempotency.idem_outbox_next('t_batch', 10);
SELECT count(*) AS unknown_topic FROM idempotency.idem_outbox_next('t_no_such_topic');
-- every column of a taken event
SELECT idempotency.idem_outbox_emit('t_cols', '{"n": "cols"}', 'acct-1', 'cols-1', '{"x-trace": "abc"}') IS NOT NULL AS emitted;
CREATE TEMP TABLE taken AS SELECT * FROM idempotency.idem_outbox_next('t_cols');
SELECT n.event_id = o.event_id AS event_id, n.key, n.payload, n.headers, n.attempt,
       n.emitted_at = o.emitted_at AS emitted_at, n.lease_expires_at = o.lease_expires_at AS lease_expires_at,
       n.payload_bytes, n.dedup_key, o.status, o.attempt AS stored_attempt
FROM taken n JOIN idempotency.outbox o ON o.event_id = n.event_id;
DROP TABLE taken;
SELECT idempotency.idem_outbox_emit('t_cols', '\xdeadbeef'::bytea) IS NOT NULL AS emitted;
SELECT key, payload, headers, payload_bytes, dedup_key FROM idempotency.idem_outbox_next('t_cols');
-- the lease: idempotency.outbox_lease (1 minute) when none is passed, else the argument
SELECT count(idempotency.idem_outbox_emit('t_lease', jsonb_build_object('n', i::text))) AS emitted
FROM generate_series(1, 3) i;
SELECT take('t_lease', 1) AS default_lease;
SET idempotency.outbox_lease = '10s';
SELECT take('t_lease', 1) AS setting_lease;
SELECT take('t_lease', 1, interval '5 minutes') AS argument_lease;
SELECT payload ->> 'n' AS n, lease_expires_at - updated_at AS lease FROM idempotency.outbox
WHERE topic = 't_lease' ORDER BY seq;
RESET idempotency.outbox_lease;
SELECT try($$SELECT * FROM idempotency.idem_outbox_next(NULL)$$);
SELECT try($$SELECT * FROM idempotency.idem_outbox_next('')$$);
SELECT try($$SELECT * FROM idempotency.idem_outbox_next(repeat('t', 256))$$);
SELECT try($$SELECT * FROM idempotency.idem_outbox_next('t_lease', 0)$$);
SELECT try($$SELECT * FROM idempotency.idem_outbox_next('t_lease', -1)$$);
SELECT try($$SELECT * FROM idempotency.idem_outbox_next('t_lease', 10001)$$);
SELECT try($$SELECT * FROM idempotency.idem_outbox_next('t_lease', 10, interval '0')$$, true);
SELECT try($$SELECT * FROM idempotency.idem_outbox_next('t_lease', 10, interval '-1 minute')$$, true);
SELECT count(*) AS batch_10000 FROM idempotency.idem_outbox_next('t_no_such_topic', 10000);
SELECT count(*) AS batch_null FROM idempotency.idem_outbox_next('t_no_such_topic', NULL);


-- the saved statements never scan the outbox sequentially, however small it was when they were
-- planned (ANALYZE of a small outbox invalidates the plans): 20 cycles of emit (also with a
-- dedup_key, new and duplicate), next, done, fail and requeue, 0 sequential scans
SELECT count(idempotency.idem_outbox_emit('t_plan', jsonb_build_object('n', i::text), 'k' || (i % 3))) AS emitted
FROM generate_series(1, 30) i;
ANALYZE idempotency.outbox;
SELECT pg_stat_force_next_flush();
CREATE TEMP TABLE scans_before AS
    SELECT seq_scan FROM pg_stat_user_tables WHERE relid = 'idempotency.outbox'::regclass;
DO $$
DECLARE r record;
BEGIN
    FOR i IN 1..20 LOOP
        PERFORM idempotency.idem_outbox_emit('t_plan', jsonb_build_object('n', 'e' || i), dedup_key => 'plan-' || i);
        PERFORM idempotency.idem_outbox_emit('t_plan', jsonb_build_object('n', 'e' || i), dedup_key => 'plan-' || i);
        SELECT * INTO r FROM idempotency.idem_outbox_next('t_plan', 1);
        PERFORM idempotency.idem_outbox_fail(r.event_id, r.attempt, false);
        PERFORM idempotency.idem_outbox_requeue(r.event_id);
        SELECT * INTO r FROM idempotency.idem_outbox_next('t_plan', 1);
        PERFORM idempotency.idem_outbox_done(r.event_id, r.attempt);
    END LOOP;
END $$;
SELECT pg_stat_force_next_flush();
SELECT s.seq_scan - b.seq_scan AS seq_scans,
       (SELECT count(*) FROM idempotency.outbox WHERE topic = 't_plan' AND status = 'done' AND attempt = 2) AS done
FROM pg_stat_user_tables s, scans_before b WHERE s.relid = 'idempotency.outbox'::regclass;
DROP TABLE scans_before;

-- per-key order: an event of a key is handed out only when every earlier event of its key is
-- done; keyless events and the events of other keys keep flowing (no head-of-line block)
SELECT count(idempotency.idem_outbox_emit('t_order', jsonb_build_object('n', n), k)) AS emitted
FROM (VALUES ('a1', 'a'), ('a2', 'a'), ('b1', 'b'), ('x1', NULL), ('a3', 'a'), ('x2', NULL),
             ('b2', 'b')) v(n, k);
SELECT string_agg(n, ',') AS emit_order FROM ob WHERE topic = 't_order';
SELECT take('t_order') AS first_of_each_key;
SELECT take('t_order') AS while_leased; -- a2 waits for a1, b2 for b1
SELECT idempotency.idem_outbox_done(ob_id('t_order', 'a1'), 1);
SELECT take('t_order') AS after_a1_done; -- a2; a3 waits for a2
SELECT idempotency.idem_outbox_done(ob_id('t_order', 'b1'), 1, 't_order');
SELECT take('t_order') AS after_b1_done;
-- a retried event keeps its place: a2 again before a3
SELECT idempotency.idem_outbox_fail(ob_id('t_order', 'a2'), 1, error => 'timeout');
SELECT take('t_order') AS after_a2_retry;
-- while a2 backs off, a3 waits
SET idempotency.retry_backoff_base = '1h';
SELECT idempotency.idem_outbox_fail(ob_id('t_order', 'a2'), 2, error => 'timeout');
SELECT take('t_order') AS a2_backing_off;
UPDATE idempotency.outbox SET available_at = now() - interval '1 second' WHERE event_id = ob_id('t_order', 'a2');
SELECT take('t_order') AS a2_due;
-- a dead event blocks its key (idempotency.outbox_dead_blocks_key on, the default) ...
SELECT idempotency.idem_outbox_fail(ob_id('t_order', 'a2'), 3, retryable => false, error => 'rejected');
SHOW idempotency.outbox_dead_blocks_key;
SELECT take('t_order') AS a2_dead_blocks;
-- ... and with it off the later events of its key pass
SET idempotency.outbox_dead_blocks_key = off;
SELECT take('t_order') AS a2_dead_passed;
SELECT idempotency.idem_outbox_done(ob_id('t_order', 'a3'), 1);
RESET idempotency.outbox_dead_blocks_key;
SELECT idempotency.idem_outbox_emit('t_order', '{"n": "a4"}', 'a') IS NOT NULL AS emitted;
SELECT take('t_order') AS a4_behind_dead_a2;
-- requeued, a2 comes first again with a new attempt budget, then a4
SELECT idempotency.idem_outbox_requeue(ob_id('t_order', 'a2'));
SELECT take('t_order') AS after_requeue;
SELECT idempotency.idem_outbox_done(ob_id('t_order', 'a2'), 4);
SELECT take('t_order') AS after_a2_done;
SELECT * FROM ob WHERE topic = 't_order';
RESET idempotency.retry_backoff_base;
SET idempotency.retry_backoff_base = 0;

-- an expired lease: the event is handed out again with attempt + 1 (its key still waits); the
-- old attempt is fenced
SELECT count(idempotency.idem_outbox_emit('t_expire', jsonb_build_object('n', n), 'k')) AS emitted
FROM (VALUES ('e1'), ('e2')) v(n);
SELECT take('t_expire', 10, interval '1 millisecond') AS first;
SELECT pg_sleep(0.02);
SELECT take('t_expire', 10, interval '1 minute') AS after_expiry;
SELECT try_detail(format('SELECT idempotency.idem_outbox_done(%L, 1)', ob_id('t_expire', 'e1')));
SELECT try_detail(format('SELECT idempotency.idem_outbox_fail(%L, 1)', ob_id('t_expire', 'e1')));
SELECT idempotency.idem_outbox_done(ob_id('t_expire', 'e1'), 2);
SELECT take('t_expire') AS next_of_key;
-- the lease of the last attempt expires: dead with last_error (the later event of its key waits)
SET idempotency.max_attempts = 2;
SELECT count(idempotency.idem_outbox_emit('t_maxlease', jsonb_build_object('n', n), k)) AS emitted
FROM (VALUES ('m1', 'k'), ('m2', 'k')) v(n, k);
SELECT take('t_maxlease', 10, interval '1 millisecond') AS attempt_1;
SELECT pg_sleep(0.02);
SELECT take('t_maxlease', 10, interval '1 millisecond') AS attempt_2;
SELECT pg_sleep(0.02);
SELECT take('t_maxlease') AS budget_used;
SELECT * FROM ob WHERE topic = 't_maxlease';
SELECT try_detail(format('SELECT idempotency.idem_outbox_done(%L, 2)', ob_id('t_maxlease', 'm1')));
-- an event that turns dead gives its place in the batch to the next due one: a batch of 1 is
-- not empty while a due event waits behind two dead ones
SET idempotency.max_attempts = 1;
SELECT count(idempotency.idem_outbox_emit('t_deadslot', jsonb_build_object('n', n), k)) AS emitted
FROM (VALUES ('d1', 'k1'), ('d2', 'k2'), ('x1', NULL)) v(n, k);
SELECT take('t_deadslot', 2, interval '1 millisecond') AS leased;
SELECT pg_sleep(0.02);
SELECT take('t_deadslot', 1) AS batch_of_1;
SELECT n, status, attempt, last_error FROM ob WHERE topic = 't_deadslot';
-- idempotency.max_attempts = 0: no limit
SET idempotency.max_attempts = 0;
SELECT idempotency.idem_outbox_emit('t_nolimit', '{"n": "n1"}') IS NOT NULL AS emitted;
UPDATE idempotency.outbox SET status = 'leased', attempt = 1000, lease_expires_at = now() - interval '1 second'
WHERE event_id = ob_id('t_nolimit', 'n1');
SELECT take('t_nolimit') AS attempt_1001;
SELECT idempotency.idem_outbox_fail(ob_id('t_nolimit', 'n1'), 1001);
RESET idempotency.max_attempts;

-- done: the event is done, kept for idempotency.outbox_ttl (7 days) after it, then purged
SELECT count(idempotency.idem_outbox_emit('t_done', jsonb_build_object('n', n))) AS emitted
FROM (VALUES ('d1'), ('d2'), ('d3')) v(n);
SELECT take('t_done') AS taken;
SELECT idempotency.idem_outbox_done(ob_id('t_done', 'd1'), 1);
SET idempotency.outbox_ttl = '1h';
SELECT idempotency.idem_outbox_done(ob_id('t_done', 'd2'), 1, topic => 't_done');
RESET idempotency.outbox_ttl;
SELECT payload ->> 'n' AS n, status, attempt, expires_at - updated_at AS kept_for, lease_expires_at IS NOT NULL AS leased, last_error
FROM idempotency.outbox WHERE topic = 't_done' ORDER BY seq;
-- done refused: IK001 unknown (also under another topic), IK002 stale, IK003 finished
SELECT try_detail($$SELECT idempotency.idem_outbox_done('00000000-0000-7000-8000-000000000000', 1)$$);
SELECT try_detail(format('SELECT idempotency.idem_outbox_done(%L, 1, %L)', ob_id('t_done', 'd3'), 't_other'));
SELECT try_detail(format('SELECT idempotency.idem_outbox_done(%L, 2)', ob_id('t_done', 'd3')));
SELECT try_detail(format('SELECT idempotency.idem_outbox_done(%L, 1)', ob_id('t_done', 'd1')));
SELECT try_detail(format('SELECT idempotency.idem_outbox_done(%L, 2)', ob_id('t_done', 'd1')));
SELECT try_detail(format('SELECT idempotency.idem_outbox_fail(%L, 1)', ob_id('t_done', 'd1')));
SELECT idempotency.idem_outbox_emit('t_done', '{"n": "never taken"}') IS NOT NULL AS emitted;
SELECT try_detail(format('SELECT idempotency.idem_outbox_done(%L, 1)', ob_id('t_done', 'never taken')));
SELECT try(format('SELECT idempotency.idem_outbox_done(%L, 1)', ob_id('t_done', 'never taken')), true);
SELECT try($$SELECT idempotency.idem_outbox_done(NULL, 1)$$);
SELECT try(format('SELECT idempotency.idem_outbox_done(%L, NULL)', ob_id('t_done', 'd3')));
SELECT try(format('SELECT idempotency.idem_outbox_done(%L, 0)', ob_id('t_done', 'd3')));
SELECT try(format('SELECT idempotency.idem_outbox_done(%L, -1)', ob_id('t_done', 'd3')));
SELECT try(format('SELECT idempotency.idem_outbox_done(%L, 1, %L)', ob_id('t_done', 'd3'), ''));
SELECT try(format('SELECT idempotency.idem_outbox_done(%L, 1, %L)', ob_id('t_done', 'd3'), repeat('t', 256)));
SELECT n, status, attempt FROM ob WHERE topic = 't_done';
-- a rolled-back done leaves the lease in place
BEGIN;
SELECT idempotency.idem_outbox_done(ob_id('t_done', 'd3'), 1);
ROLLBACK;
SELECT n, status, attempt, leased FROM ob WHERE topic = 't_done' AND n = 'd3';
SELECT idempotency.idem_outbox_done(ob_id('t_done', 'd3'), 1, NULL);

-- the batch form of done: one call over arrays of ids and attempts, each event fenced by its
-- own attempt; returns the ids it finished, leaves out (never raises for) an event leased under
-- another attempt, already done, unknown, under another topic, or named twice
SELECT count(idempotency.idem_outbox_emit('t_dbatch', jsonb_build_object('n', n), k)) AS emitted
FROM (VALUES ('b1', NULL), ('b2', NULL), ('b3', 'k'), ('b4', 'k'), ('b5', NULL)) v(n, k);
SELECT take('t_dbatch') AS taken;
SELECT string_agg(coalesce(o.payload ->> 'n', 'unknown'), ',' ORDER BY d.ord) AS finished
FROM idempotency.idem_outbox_done_batch(
         ARRAY[ob_id('t_dbatch', 'b1'), ob_id('t_dbatch', 'b2'), ob_id('t_dbatch', 'b3'),
               ob_id('t_dbatch', 'b3'), '00000000-0000-7000-8000-000000000000', ob_id('t_done', 'd1')],
         ARRAY[1, 2, 1, 1, 1, 1]) WITH ORDINALITY d(event_id, ord)
LEFT JOIN idempotency.outbox o USING (event_id);
SELECT n, status, attempt, leased FROM ob WHERE topic = 't_dbatch';
-- what was left out, the single form explains: b2 was handed out as attempt 1
SELECT try_detail(format('SELECT idempotency.idem_outbox_done(%L, 2)', ob_id('t_dbatch', 'b2')));
-- b3 done: b4 of its key comes next
SELECT take('t_dbatch') AS after_b3;
-- topic: another topic finishes nothing, the event's own topic finishes it
SELECT count(*) AS other_topic
FROM idempotency.idem_outbox_done_batch(ARRAY[ob_id('t_dbatch', 'b2')], ARRAY[1], 't_other');
SELECT payload ->> 'n' AS n
FROM idempotency.idem_outbox_done_batch(ARRAY[ob_id('t_dbatch', 'b2')], ARRAY[1], 't_dbatch') d
JOIN idempotency.outbox USING (event_id);
-- an expired lease: the old attempt is fenced per event, the rest of its batch is done
SELECT count(idempotency.idem_outbox_emit('t_dbatch', jsonb_build_object('n', n))) AS emitted
FROM (VALUES ('e1'), ('e2')) v(n);
SELECT take('t_dbatch', 2, interval '1 millisecond') AS short_lease;
SELECT pg_sleep(0.02);
SELECT take('t_dbatch', 10, interval '1 minute') AS after_expiry;
SELECT string_agg(payload ->> 'n', ',' ORDER BY seq) AS finished
FROM idempotency.idem_outbox_done_batch(ARRAY[ob_id('t_dbatch', 'e1'), ob_id('t_dbatch', 'e2')], ARRAY[1, 2]) d
JOIN idempotency.outbox USING (event_id);
SELECT n, status, attempt FROM ob WHERE topic = 't_dbatch' AND status <> 'done';
-- a rolled-back batch leaves the leases in place
BEGIN;
SELECT count(*) FROM idempotency.idem_outbox_done_batch(ARRAY[ob_id('t_dbatch', 'b4'), ob_id('t_dbatch', 'b5')],
                                            ARRAY[1, 1]);
ROLLBACK;
SELECT n, status, attempt, leased FROM ob WHERE topic = 't_dbatch' AND n IN ('b4', 'b5');
SELECT count(*) AS finished
FROM idempotency.idem_outbox_done_batch(ARRAY[ob_id('t_dbatch', 'b4'), ob_id('t_dbatch', 'b5'), ob_id('t_dbatch', 'e1')],
                            ARRAY[1, 1, 2]);
SELECT n, status, attempt FROM ob WHERE topic = 't_dbatch' AND status <> 'done';
-- empty arrays finish nothing; the arguments' errors
SELECT count(*) AS empty FROM idempotency.idem_outbox_done_batch('{}', '{}');
SELECT try($$SELECT idempotency.idem_outbox_done_batch(NULL, '{1}')$$);
SELECT try($$SELECT idempotency.idem_outbox_done_batch('{00000000-0000-7000-8000-000000000000}', NULL)$$);
SELECT try_detail($$SELECT idempotency.idem_outbox_done_batch('{00000000-0000-7000-8000-000000000000}', '{1,1}')$$);
SELECT try_detail($$SELECT idempotency.idem_outbox_done_batch('{NULL, 00000000-0000-7000-8000-000000000000}', '{1,1}')$$);
SELECT try_detail($$SELECT idempotency.idem_outbox_done_batch('{00000000-0000-7000-8000-000000000000}', '{NULL}')$$);
SELECT try_detail($$SELECT idempotency.idem_outbox_done_batch('{00000000-0000-7000-8000-000000000000}', '{0}')$$);
SELECT try($$SELECT idempotency.idem_outbox_done_batch('{{00000000-0000-7000-8000-000000000000}}', '{{1}}')$$);
SELECT try($$SELECT idempotency.idem_outbox_done_batch(ARRAY(SELECT gen_random_uuid() FROM generate_series(1, 10001)),
                                           array_fill(1, ARRAY[10001]))$$);
SELECT try($$SELECT idempotency.idem_outbox_done_batch('{}', '{}', repeat('t', 256))$$);

-- the batch form of fail: each event fenced by its own attempt, pending again (retryable) or
-- dead (terminal, or its budget used), one error for the batch; left out: fenced, finished,
-- unknown, another topic
SELECT count(idempotency.idem_outbox_emit('t_fbatch', jsonb_build_object('n', n))) AS emitted
FROM (VALUES ('f1'), ('f2'), ('f3'), ('f4')) v(n);
SELECT take('t_fbatch') AS taken;
SELECT o.payload ->> 'n' AS n, f.status
FROM idempotency.idem_outbox_fail_batch(ARRAY[ob_id('t_fbatch', 'f1'), ob_id('t_fbatch', 'f2'),
                                  '00000000-0000-7000-8000-000000000000', ob_id('t_dbatch', 'b1')],
                            ARRAY[1, 2, 1, 1], true, 'broker down') f
JOIN idempotency.outbox o USING (event_id) ORDER BY o.seq;
SELECT n, status, attempt, last_error, leased FROM ob WHERE topic = 't_fbatch';
SELECT count(*) AS other_topic
FROM idempotency.idem_outbox_fail_batch(ARRAY[ob_id('t_fbatch', 'f2')], ARRAY[1], false, NULL, 't_other');
SELECT o.payload ->> 'n' AS n, f.status
FROM idempotency.idem_outbox_fail_batch(ARRAY[ob_id('t_fbatch', 'f2'), ob_id('t_fbatch', 'f3')], ARRAY[1, 1],
                            false, 'rejected', 't_fbatch') f
JOIN idempotency.outbox o USING (event_id) ORDER BY o.seq;
SET idempotency.max_attempts = 2;
SELECT take('t_fbatch') AS again;
SELECT o.payload ->> 'n' AS n, f.status
FROM idempotency.idem_outbox_fail_batch(ARRAY[ob_id('t_fbatch', 'f1'), ob_id('t_fbatch', 'f4')], ARRAY[2, 1]) f
JOIN idempotency.outbox o USING (event_id) ORDER BY o.seq;
RESET idempotency.max_attempts;
SELECT n, status, attempt, last_error, leased FROM ob WHERE topic = 't_fbatch';
SELECT count(*) AS empty FROM idempotency.idem_outbox_fail_batch('{}', '{}');
SELECT try_detail($$SELECT idempotency.idem_outbox_fail_batch('{00000000-0000-7000-8000-000000000000}', '{1,2}')$$);
SELECT try($$SELECT idempotency.idem_outbox_fail_batch('{00000000-0000-7000-8000-000000000000}', '{-1}')$$);
SELECT try($$SELECT idempotency.idem_outbox_fail_batch('{}', '{}', true, repeat('e', 100000))$$);

-- fail: retryable -> pending after a backoff of base * 2^(attempt - 1), capped, its second half
-- random (src/leased_queue.cpp); not handed out during it; terminal or out of attempts -> dead
RESET idempotency.retry_backoff_base; -- 1 s
SET idempotency.max_attempts = 3;
SELECT count(idempotency.idem_outbox_emit('t_fail', jsonb_build_object('n', n))) AS emitted
FROM (VALUES ('f1'), ('f2'), ('f3'), ('f4')) v(n);
SELECT take('t_fail') AS taken;
SELECT idempotency.idem_outbox_fail(ob_id('t_fail', 'f1'), 1, error => 'provider down');
SELECT n, status, attempt, leased, last_error FROM ob WHERE topic = 't_fail' AND n = 'f1';
SELECT available_at - updated_at BETWEEN interval '0.5 s' AND interval '1 s' AS first_backoff
FROM idempotency.outbox WHERE event_id = ob_id('t_fail', 'f1');
SELECT take('t_fail') AS during_backoff;
SELECT pending, waiting, leased FROM idempotency.idem_outbox_stats WHERE topic = 't_fail';
SELECT try_detail(format('SELECT idempotency.idem_outbox_fail(%L, 1)', ob_id('t_fail', 'f1')));
UPDATE idempotency.outbox SET available_at = available_at - interval '1 s' WHERE event_id = ob_id('t_fail', 'f1');
SELECT take('t_fail') AS after_backoff;
SELECT idempotency.idem_outbox_fail(ob_id('t_fail', 'f1'), 2, true, 'provider down again');
SELECT available_at - updated_at BETWEEN interval '1 s' AND interval '2 s' AS second_backoff
FROM idempotency.outbox WHERE event_id = ob_id('t_fail', 'f1');
UPDATE idempotency.outbox SET available_at = available_at - interval '2 s' WHERE event_id = ob_id('t_fail', 'f1');
SELECT take('t_fail') AS third_attempt;
SELECT idempotency.idem_outbox_fail(ob_id('t_fail', 'f1'), 3, error => 'still down'); -- the third of 3: dead
-- the cap: base 10 s, max 3 s -> between 1.5 and 3 s; NULL retryable is retryable
SET idempotency.retry_backoff_base = '10s';
SET idempotency.retry_backoff_max = '3s';
SELECT idempotency.idem_outbox_fail(ob_id('t_fail', 'f2'), 1, NULL);
SELECT available_at - updated_at BETWEEN interval '1.5 s' AND interval '3 s' AS capped_backoff
FROM idempotency.outbox WHERE event_id = ob_id('t_fail', 'f2');
RESET idempotency.retry_backoff_max;
SET idempotency.retry_backoff_base = 0; -- 0: due again at once
SELECT idempotency.idem_outbox_fail(ob_id('t_fail', 'f4'), 1, topic => 't_fail');
SELECT available_at = updated_at AS due_at_once FROM idempotency.outbox WHERE event_id = ob_id('t_fail', 'f4');
-- terminal: dead at once, kept with its error
SELECT idempotency.idem_outbox_fail(ob_id('t_fail', 'f3'), 1, retryable => false, error => 'invalid address');
SELECT * FROM ob WHERE topic = 't_fail';
SELECT take('t_fail') AS dead_not_taken; -- f4 only
-- fail refused
SELECT try_detail($$SELECT idempotency.idem_outbox_fail('00000000-0000-7000-8000-000000000000', 1)$$);
SELECT try_detail(format('SELECT idempotency.idem_outbox_fail(%L, 2, topic => %L)', ob_id('t_fail', 'f4'), 't_other'));
SELECT try_detail(format('SELECT idempotency.idem_outbox_fail(%L, 3)', ob_id('t_fail', 'f1')));
SELECT try_detail(format('SELECT idempotency.idem_outbox_fail(%L, 1)', ob_id('t_fail', 'f4')));
SELECT try($$SELECT idempotency.idem_outbox_fail(NULL, 1)$$);
SELECT try(format('SELECT idempotency.idem_outbox_fail(%L, NULL)', ob_id('t_fail', 'f4')));
SELECT try(format('SELECT idempotency.idem_outbox_fail(%L, 0)', ob_id('t_fail', 'f4')));
SELECT try(format('SELECT idempotency.idem_outbox_fail(%L, 2, topic => %L)', ob_id('t_fail', 'f4'), ''));
SELECT n, status, attempt, last_error FROM ob WHERE topic = 't_fail' AND n = 'f4';

-- requeue: a dead event is pending again at once with a new budget of max_attempts
SELECT idempotency.idem_outbox_requeue(ob_id('t_fail', 'f1'));
SELECT n, status, attempt, attempt_base, leased, last_error FROM ob WHERE topic = 't_fail' AND n = 'f1';
SELECT available_at = updated_at AS due_at_once FROM idempotency.outbox WHERE event_id = ob_id('t_fail', 'f1');
SELECT take('t_fail') AS after_requeue;
SELECT idempotency.idem_outbox_fail(ob_id('t_fail', 'f1'), 4); -- 1 of the new 3: pending
SELECT take('t_fail') AS again;
SELECT idempotency.idem_outbox_fail(ob_id('t_fail', 'f1'), 5);
SELECT take('t_fail') AS again;
SELECT idempotency.idem_outbox_fail(ob_id('t_fail', 'f1'), 6); -- 3 of the new 3: dead
SELECT idempotency.idem_outbox_requeue(ob_id('t_fail', 'f3'), 't_fail');
-- requeue refused: not dead (55000, the detail says what it is), unknown (IK001)
SELECT try_detail(format('SELECT idempotency.idem_outbox_requeue(%L)', ob_id('t_fail', 'f3')));
SELECT take('t_fail') AS f3_taken;
SELECT try_detail(format('SELECT idempotency.idem_outbox_requeue(%L)', ob_id('t_fail', 'f3')));
SELECT idempotency.idem_outbox_done(ob_id('t_fail', 'f3'), 2);
SELECT try_detail(format('SELECT idempotency.idem_outbox_requeue(%L)', ob_id('t_fail', 'f3')));
SELECT try_detail($$SELECT idempotency.idem_outbox_requeue('00000000-0000-7000-8000-000000000000')$$);
SELECT try_detail(format('SELECT idempotency.idem_outbox_requeue(%L, %L)', ob_id('t_fail', 'f1'), 't_other'));
SELECT try($$SELECT idempotency.idem_outbox_requeue(NULL)$$);
SELECT try(format('SELECT idempotency.idem_outbox_requeue(%L, %L)', ob_id('t_fail', 'f1'), ''));
SELECT * FROM ob WHERE topic = 't_fail';
RESET idempotency.max_attempts;

-- idem_outbox_stats: per topic pending (waiting included), waiting, leased, dead, done and the
-- age of the oldest pending or leased event
SELECT count(idempotency.idem_outbox_emit('t_stats', jsonb_build_object('n', n), deliver_after => d)) AS emitted
FROM (VALUES ('s1', NULL), ('s2', interval '1 hour'), ('s3', NULL), ('s4', NULL), ('s5', NULL)) v(n, d);
SELECT take('t_stats', 2) AS taken;
SELECT idempotency.idem_outbox_done(ob_id('t_stats', 's1'), 1);
SELECT idempotency.idem_outbox_fail(ob_id('t_stats', 's3'), 1, false);
SELECT take('t_stats', 1) AS taken;
UPDATE idempotency.outbox SET emitted_at = emitted_at - interval '1 hour' WHERE event_id = ob_id('t_stats', 's4');
SELECT topic, pending, waiting, leased, dead, done,
       oldest_pending_age BETWEEN interval '1 hour' AND interval '1 hour 1 minute' AS oldest_pending_age
FROM idempotency.idem_outbox_stats WHERE topic = 't_stats';
SELECT idempotency.idem_outbox_done(ob_id('t_stats', 's4'), 1);
SELECT oldest_pending_age < interval '1 minute' AS oldest_pending_age FROM idempotency.idem_outbox_stats WHERE topic = 't_stats';
SELECT count(*) AS topics FROM idempotency.idem_outbox_stats WHERE topic LIKE 't\_%';

-- the purge: done events past their expires_at go; done events still kept and pending, leased
-- and dead ones stay, whatever their expires_at
SELECT idempotency.idem_purge() >= 0 AS flushed;
SELECT count(idempotency.idem_outbox_emit('t_purge', jsonb_build_object('n', n))) AS emitted
FROM (VALUES ('p1'), ('p2'), ('p3'), ('p4'), ('p5')) v(n);
SELECT take('t_purge', 3) AS taken;
SELECT idempotency.idem_outbox_done(ob_id('t_purge', 'p1'), 1), idempotency.idem_outbox_done(ob_id('t_purge', 'p2'), 1),
       idempotency.idem_outbox_fail(ob_id('t_purge', 'p3'), 1, false);
SELECT take('t_purge', 1) AS taken;
UPDATE idempotency.outbox SET expires_at = now() - interval '1 second'
WHERE topic = 't_purge' AND payload ->> 'n' <> 'p2';
SELECT idempotency.idem_purge() AS purged;
SELECT n, status FROM ob WHERE topic = 't_purge';
SELECT idempotency.idem_purge() AS purged_again;

-- privileges: PUBLIC cannot execute the functions nor read the view; a role granted EXECUTE
-- uses every function without rights on the table
SELECT p.oid::regprocedure AS function, has_function_privilege('public', p.oid, 'EXECUTE') AS public_execute
FROM pg_proc p WHERE p.proname LIKE 'idem\_outbox\_%' ORDER BY p.oid::regprocedure::text COLLATE "C";
CREATE ROLE outbox_regress_user;
SET ROLE outbox_regress_user;
SELECT try($$SELECT idempotency.idem_outbox_emit('t_role', '{"n": "r0"}')$$);
SELECT try($$SELECT * FROM idempotency.idem_outbox_next('t_role')$$);
SELECT try($$SELECT * FROM idempotency.idem_outbox_stats$$);
RESET ROLE;
GRANT EXECUTE ON FUNCTION idempotency.idem_outbox_emit(text, jsonb, text, text, jsonb, interval),
    idempotency.idem_outbox_emit(text, bytea, text, text, jsonb, interval),
    idempotency.idem_outbox_emit(text, text, text, text, jsonb, interval),
    idempotency.idem_outbox_next(text, integer, interval), idempotency.idem_outbox_done(uuid, integer, text),
    idempotency.idem_outbox_done_batch(uuid[], integer[], text),
    idempotency.idem_outbox_fail(uuid, integer, boolean, text, text),
    idempotency.idem_outbox_fail_batch(uuid[], integer[], boolean, text, text), idempotency.idem_outbox_requeue(uuid, text)
TO outbox_regress_user;
SET ROLE outbox_regress_user;
CREATE TEMP TABLE role_ids (n text, id uuid, attempt integer);
INSERT INTO role_ids SELECT 'r1', idempotency.idem_outbox_emit('t_role', '{"n": "r1"}'::jsonb, 'k', 'role-1');
INSERT INTO role_ids SELECT 'r2', idempotency.idem_outbox_emit('t_role', '{"n": "r2"}'::text);
INSERT INTO role_ids SELECT 'r3', idempotency.idem_outbox_emit('t_role', '\x7233'::bytea);
SELECT idempotency.idem_outbox_emit('t_role', '{"n": "dup"}'::jsonb, 'k', 'role-1') = (SELECT id FROM role_ids WHERE n = 'r1') AS dedup_as_role;
UPDATE role_ids r SET attempt = n.attempt FROM idempotency.idem_outbox_next('t_role') n WHERE n.event_id = r.id;
SELECT n, attempt FROM role_ids ORDER BY n;
SELECT idempotency.idem_outbox_done_batch(array_agg(id), array_agg(attempt)) IS NOT NULL AS done_batch FROM role_ids WHERE n = 'r1';
SELECT idempotency.idem_outbox_fail(id, attempt, false, 'as role') FROM role_ids WHERE n = 'r2';
SELECT idempotency.idem_outbox_requeue(id) FROM role_ids WHERE n = 'r2';
SELECT f.status FROM role_ids r, idempotency.idem_outbox_fail_batch(ARRAY[r.id], ARRAY[r.attempt], true, NULL, 't_role') f
WHERE r.n = 'r3';
SELECT try($$SELECT count(*) FROM idempotency.outbox$$);
SELECT try($$SELECT * FROM idempotency.idem_outbox_stats$$);
SELECT try($$SELECT idempotency.idem_purge()$$);
RESET ROLE;
DROP TABLE role_ids;
REVOKE EXECUTE ON FUNCTION idempotency.idem_outbox_emit(text, jsonb, text, text, jsonb, interval),
    idempotency.idem_outbox_emit(text, bytea, text, text, jsonb, interval),
    idempotency.idem_outbox_emit(text, text, text, text, jsonb, interval),
    idempotency.idem_outbox_next(text, integer, interval), idempotency.idem_outbox_done(uuid, integer, text),
    idempotency.idem_outbox_done_batch(uuid[], integer[], text),
    idempotency.idem_outbox_fail(uuid, integer, boolean, text, text),
    idempotency.idem_outbox_fail_batch(uuid[], integer[], boolean, text, text), idempotency.idem_outbox_requeue(uuid, text)
FROM outbox_regress_user;
DROP ROLE outbox_regress_user;
SELECT n, status, attempt, last_error FROM ob WHERE topic = 't_role';

-- a lease changes no column an index reads (they read the life stage from expires_at: NULL
-- while pending or leased, infinity once dead): each leased event's new row version is HOT, no
-- index entry; the done that follows is not (expires_at set). Dead: expires_at infinity.
BEGIN;
SELECT count(idempotency.idem_outbox_emit('t_hot', jsonb_build_object('n', i), 'k' || (i % 3)))
       + count(idempotency.idem_outbox_emit('t_hot', jsonb_build_object('n', -i)))
FROM generate_series(1, 6) i;
SELECT pg_stat_get_xact_tuples_hot_updated('idempotency.outbox'::regclass) AS hot_before,
       pg_stat_get_xact_tuples_updated('idempotency.outbox'::regclass) AS updated_before \gset
SELECT count(*) AS leased FROM idempotency.idem_outbox_next('t_hot', 100);
SELECT pg_stat_get_xact_tuples_updated('idempotency.outbox'::regclass) - :updated_before AS updated,
       pg_stat_get_xact_tuples_hot_updated('idempotency.outbox'::regclass) - :hot_before AS hot;
SELECT count(*) AS done FROM idempotency.idem_outbox_done_batch(
    ARRAY(SELECT event_id FROM idempotency.outbox WHERE topic = 't_hot' AND status = 'leased'),
    ARRAY(SELECT attempt FROM idempotency.outbox WHERE topic = 't_hot' AND status = 'leased'));
SELECT pg_stat_get_xact_tuples_updated('idempotency.outbox'::regclass) - :updated_before AS updated,
       pg_stat_get_xact_tuples_hot_updated('idempotency.outbox'::regclass) - :hot_before AS hot;
COMMIT;
SELECT status, expires_at = 'infinity' AS expires_never, count(*) FROM idempotency.outbox
WHERE topic LIKE 't\_%' AND topic <> 't_purge' AND status IN ('dead', 'pending', 'leased')
GROUP BY 1, 2 ORDER BY 1, 2; -- t_purge's were given a past expires_at by hand above

-- the counters this file moved (src/counters.hpp): emitted, deduplicated, done, retried
-- (retryable failures), dead (terminal failures, budgets used, and the expired last lease)
SELECT c.counter, c.value - b.value AS moved
FROM idempotency.idem_counters() c JOIN counters_before b USING (counter)
WHERE c.counter LIKE 'outbox\_%' ORDER BY c.counter;

-- a call examines a bounded stretch of the queue (src/outbox_next.cpp, lease_in_rounds): of
-- 3,000 events over 3 keys, a batch of 10 takes the keys' first events after 81 per-key probes
-- (rounds of 42 and 39 candidates), not one probe per event of the queue
SELECT count(idempotency.idem_outbox_emit('t_walk', jsonb_build_object('n', 'w' || i), 'k' || (i % 3)))
    AS emitted FROM generate_series(1, 3000) i;
BEGIN;
SELECT pg_stat_get_xact_numscans('idempotency.outbox_key'::regclass) AS probes_before \gset
SELECT take('t_walk', 10);
SELECT pg_stat_get_xact_numscans('idempotency.outbox_key'::regclass) - :probes_before AS probes;
COMMIT;
-- events queued behind a long run of one key's waiting events are reached in a few calls: 2,500
-- events of key hot, then one of each of 5 other keys. The first call takes h1 and stops (no
-- other event free in its next round); the second finds none in two stretches of 1,024 events
-- and keeps where it stopped; the third walks the first stretch, goes on from there and takes
-- the five
SELECT count(idempotency.idem_outbox_emit('t_burst', jsonb_build_object('n', 'h' || i), 'hot')) AS emitted
FROM generate_series(1, 2500) i;
SELECT count(idempotency.idem_outbox_emit('t_burst', jsonb_build_object('n', 'o' || i), 'other' || i))
    AS emitted FROM generate_series(1, 5) i;
SELECT take('t_burst', 10) AS first, take('t_burst', 10) AS second, take('t_burst', 10) AS third;

-- the per-key lock's tag in pg_locks: the first 8 bytes of HMAC-SHA256(secret, topic NUL key)
-- under the installation's secret, not 1.1.0's plain hash of topic and key (which any role that
-- reads pg_locks could compute for a guess)
BEGIN;
SELECT idempotency.idem_outbox_emit('t_tag', '{}', 'order-42') IS NOT NULL AS emitted;
WITH lk AS (SELECT classid::bigint AS hi, objid::bigint AS lo FROM pg_locks
            WHERE locktype = 'advisory' AND objsubid = 18756 AND pid = pg_backend_pid()),
     mac AS (SELECT idempotency.idem_hmac_sha256(s.secret, convert_to('t_tag', 'UTF8') || '\x00'::bytea
                                                          || convert_to('order-42', 'UTF8')) AS m
             FROM idempotency.outbox_key_lock s),
     plain AS (SELECT hashtextextended('order-42', hashtextextended('t_tag', x'6f7574626f78'::bigint)) AS h)
SELECT count(*) AS key_locks,
       bool_and(lk.hi = ('x' || encode(substring(mac.m FROM 1 FOR 4), 'hex'))::bit(32)::bigint
                AND lk.lo = ('x' || encode(substring(mac.m FROM 5 FOR 4), 'hex'))::bit(32)::bigint) AS keyed_with_secret,
       bool_or(lk.hi = (plain.h >> 32) & 4294967295 AND lk.lo = plain.h & 4294967295) AS plain_hash
FROM lk, mac, plain;
ROLLBACK;
-- the secret: 32 bytes, one row, readable by the extension's owner only
SELECT octet_length(secret) AS secret_bytes, (SELECT count(*) FROM idempotency.outbox_key_lock) AS rows,
       has_table_privilege('public', 'idempotency.outbox_key_lock', 'SELECT') AS public_reads
FROM idempotency.outbox_key_lock;

-- every object of the outbox is documented
SELECT p.oid::regprocedure AS undocumented FROM pg_proc p
WHERE p.proname LIKE 'idem\_outbox%' AND obj_description(p.oid, 'pg_proc') IS NULL;
SELECT c.oid::regclass AS undocumented FROM pg_class c
WHERE c.relnamespace = 'idempotency'::regnamespace AND c.relname LIKE 'outbox%'
  AND c.relkind IN ('r', 'i', 'S') AND obj_description(c.oid, 'pg_class') IS NULL
  AND c.relname NOT LIKE '%pkey';
SELECT obj_description('idempotency.idem_outbox_stats'::regclass, 'pg_class') IS NOT NULL AS stats_documented;

-- leave nothing behind for the suites that follow
DELETE FROM idempotency.outbox WHERE topic LIKE 't\_%';
DROP FUNCTION take(text, integer, interval), ob_id(text, text), try_detail(text);
RESET idempotency.retry_backoff_base;
