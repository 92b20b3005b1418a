-- Every documented state of an Idempotency-Key record and of an inbox entry, inside and past its
-- TTL, against the table of docs/operations.md "Which state is counted where": every column of
-- idem_stats and idem_inbox_stats, what idempotency.idem_stuck() lists, what idem_inbox_next hands out, what
-- the purge deletes, and the answer of each call a client makes next with the counters of
-- idempotency.idem_counters() it moves. Each such call runs in a subtransaction that is rolled back, so every
-- call sees the state as built; the counters count it all the same (they count calls).
-- The nopreload stage (test/stages/nopreload.sh) runs this file on a cluster without
-- shared_preload_libraries against test/regress/expected/lifecycle_states_nopreload.out: the same answers,
-- with the counters off (NULL, not zero).
\pset null '<NULL>'
SET client_min_messages = warning;
-- a requeued inbox event is due at once (the retry backoff is test/regress/sql/inbox.sql's)
SET idempotency.retry_backoff_base = 0;

\i test/regress/helpers.sql

-- preloaded or not: the counters are on exactly when the library is preloaded; idempotency.idem_counters()
-- has its fifteen rows either way, with NULL values when off
SELECT current_setting('shared_preload_libraries') ~ '\midempotency\M' AS preloaded,
       idempotency.idem_counters_enabled() AS counters_on, count(*) AS counters, count(value) AS values,
       count(stats_reset) AS stats_reset
FROM idempotency.idem_counters();

-- ls_probe(steps): runs the statements of steps in order (each answers one text) inside a
-- subtransaction that is rolled back at the end. answer: what each said (its text, 'none' for
-- NULL, or its SQLSTATE), joined by '; '. counted: the counters that moved meanwhile, in
-- idempotency.idem_counters() order ('none'; NULL when the counters are off).
CREATE FUNCTION ls_probe(steps text[], OUT answer text, OUT counted text)
LANGUAGE plpgsql AS $$
DECLARE
    before jsonb := (SELECT jsonb_object_agg(counter, value) FROM idempotency.idem_counters());
    step text;
    got text;
BEGIN
    BEGIN
        FOREACH step IN ARRAY steps LOOP
            BEGIN
                EXECUTE step INTO got;
            EXCEPTION WHEN OTHERS THEN
                got := SQLSTATE;
            END;
            answer := concat_ws('; ', answer, coalesce(got, 'none'));
        END LOOP;
        RAISE EXCEPTION 'ls_probe: roll back';
    EXCEPTION WHEN raise_exception THEN
        IF SQLERRM <> 'ls_probe: roll back' THEN
            RAISE;
        END IF;
    END;
    IF idempotency.idem_counters_enabled() THEN
        SELECT coalesce(string_agg(c.counter || '+' || (c.value - (before ->> c.counter)::bigint), ' '
                                   ORDER BY c.n)
                            FILTER (WHERE c.value <> (before ->> c.counter)::bigint), 'none')
        INTO counted
        FROM idempotency.idem_counters() WITH ORDINALITY AS c(counter, value, stats_reset, n);
    END IF;
END $$;

-- ls_purged(include_stuck): the scopes (records) and consumers (inbox) of this file whose rows
-- idem_purge would delete; the purge is rolled back.
CREATE FUNCTION ls_purged(include_stuck boolean) RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
    before text[] := ARRAY(SELECT scope FROM idempotency.records WHERE scope LIKE 'ls/%'
                           UNION ALL
                           SELECT consumer FROM idempotency.inbox WHERE consumer LIKE 'ls-%');
    gone text[];
BEGIN
    BEGIN
        PERFORM idempotency.idem_purge(include_stuck => include_stuck);
        gone := ARRAY(SELECT x FROM unnest(before) x
                      WHERE NOT EXISTS (SELECT FROM idempotency.records WHERE scope = x)
                        AND NOT EXISTS (SELECT FROM idempotency.inbox WHERE consumer = x));
        RAISE EXCEPTION 'ls_purged: roll back';
    EXCEPTION WHEN raise_exception THEN
        IF SQLERRM <> 'ls_purged: roll back' THEN
            RAISE;
        END IF;
    END;
    RETURN gone;
END $$;

-- Idempotency-Key records ------------------------------------------------------------------------
-- One record per state and TTL, in scope ls/<state>/<ttl>, key k, fingerprint \x01; built with
-- the public functions: TTL 1 hour (inside) or 1 ms and a sleep (past), lease 1 hour (live) or
-- 1 ms (ended). A live lease past the TTL cannot be reached through the functions (they keep
-- expires_at >= lease_expires_at): that one row is written by hand, as test/regress/sql/lifecycle.sql does.
CREATE FUNCTION ls_make_record(st text, ttl text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    s text := 'ls/' || st || '/' || ttl;
    keep text := CASE ttl WHEN 'inside' THEN '1 hour' ELSE '1 ms' END;
    lease text := CASE WHEN st = 'stuck' OR ttl = 'past' THEN '1 ms' ELSE '1 hour' END;
    done text;
BEGIN
    IF st = 'processing' THEN
        PERFORM FROM idempotency.idem_claim(s, 'k', '\x01', '1 hour', '1 hour') WHERE outcome = 'claimed';
        IF NOT FOUND THEN
            RAISE EXCEPTION 'ls_make_record: % not claimed', s;
        END IF;
        IF ttl = 'inside' THEN
            RETURN 'idempotency.idem_claim(lease 1 hour, ttl 1 hour)';
        END IF;
        UPDATE idempotency.records SET expires_at = created_at WHERE scope = s;
        RETURN 'idempotency.idem_claim(lease 1 hour, ttl 1 hour), then expires_at = created_at by hand';
    END IF;
    PERFORM FROM idempotency.idem_claim(s, 'k', '\x01', lease::interval, keep::interval) WHERE outcome = 'claimed';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'ls_make_record: % not claimed', s;
    END IF;
    CASE st
    WHEN 'completed' THEN
        PERFORM idempotency.idem_complete(s, 'k', 1, 'r-1', '{"id": 1}', 201);
        done := 'idem_complete';
    WHEN 'failed-retryable' THEN
        PERFORM idempotency.idem_fail(s, 'k', 1, retryable => true);
        done := 'idempotency.idem_fail(retryable => true)';
    WHEN 'failed-terminal' THEN
        PERFORM idempotency.idem_fail(s, 'k', 1, false, '{"error": "declined"}', 402);
        done := 'idempotency.idem_fail(retryable => false)';
    ELSE -- stuck: the lease runs out
        done := 'the lease runs out';
    END CASE;
    RETURN format('idempotency.idem_claim(lease %s, ttl %s), %s', lease, keep, done);
END $$;

-- What the docs say of each record state: the idem_stats columns (oldest: the
-- oldest_processing_age, 'its age' = statement_timestamp() - created_at), idempotency.idem_stuck() lists it,
-- idem_lookup's status, idem_purge deletes it (without / with include_stuck).
CREATE TEMP TABLE ls_rec_want (
    n int PRIMARY KEY, state text, ttl text,
    processing bigint, stuck bigint, completed bigint, failed bigint, expired bigint, oldest text,
    idem_stuck boolean, lookup text, purge boolean, purge_stuck boolean);
INSERT INTO ls_rec_want VALUES
    ( 1, 'processing',       'inside', 1, 0, 0, 0, 0, 'its age', false, 'processing', false, false),
    ( 2, 'processing',       'past',   1, 0, 0, 0, 0, 'its age', false, 'processing', false, false),
    ( 3, 'stuck',            'inside', 1, 1, 0, 0, 0, 'its age', true,  'processing', false, false),
    ( 4, 'stuck',            'past',   1, 1, 0, 0, 0, 'its age', true,  'processing', false, true),
    ( 5, 'completed',        'inside', 0, 0, 1, 0, 0, 'NULL',    false, 'completed',  false, false),
    ( 6, 'completed',        'past',   0, 0, 0, 0, 1, 'NULL',    false, 'none',       true,  true),
    ( 7, 'failed-retryable', 'inside', 0, 0, 0, 1, 0, 'NULL',    false, 'failed',     false, false),
    ( 8, 'failed-retryable', 'past',   0, 0, 0, 0, 1, 'NULL',    false, 'none',       true,  true),
    ( 9, 'failed-terminal',  'inside', 0, 0, 0, 1, 0, 'NULL',    false, 'failed',     false, false),
    (10, 'failed-terminal',  'past',   0, 0, 0, 0, 1, 'NULL',    false, 'none',       true,  true);

-- The calls a client makes next, and what each answers and counts (ttl '*': inside and past).
-- claim: idem_claim with the same fingerprint; claim other: another fingerprint; complete,
-- heartbeat: by attempt 1, the first owner; late complete: a claim, then attempt 1 completes.
CREATE TEMP TABLE ls_rec_calls (call text PRIMARY KEY, n int, steps text[]);
INSERT INTO ls_rec_calls VALUES
    ('claim', 1, ARRAY[$$SELECT outcome || coalesce(' ' || attempt, '') FROM idempotency.idem_claim(%1$L, 'k', '\x01')$$]),
    ('claim other', 2, ARRAY[$$SELECT outcome || coalesce(' ' || attempt, '') FROM idempotency.idem_claim(%1$L, 'k', '\x02')$$]),
    ('complete', 3, ARRAY[$$SELECT idempotency.idem_complete(%1$L, 'k', 1, 'r-probe')::text$$]),
    ('heartbeat', 4, ARRAY[$$SELECT CASE WHEN idempotency.idem_heartbeat(%1$L, 'k', 1, '1 hour') > clock_timestamp() THEN 'extended' END$$]),
    ('late complete', 5, ARRAY[$$SELECT outcome || coalesce(' ' || attempt, '') FROM idempotency.idem_claim(%1$L, 'k', '\x01')$$,
                               $$SELECT idempotency.idem_complete(%1$L, 'k', 1, 'r-probe')::text$$]);
CREATE TEMP TABLE ls_rec_calls_want (state text, ttl text, call text, answer text, counted text);
INSERT INTO ls_rec_calls_want VALUES
    ('processing', '*', 'claim', 'in_progress 1', 'in_progress+1'),
    ('processing', '*', 'claim other', 'mismatch', 'mismatch+1'),
    ('processing', '*', 'complete', 'true', 'none'),
    ('processing', '*', 'heartbeat', 'extended', 'none'),
    ('processing', '*', 'late complete', 'in_progress 1; true', 'in_progress+1'),
    ('stuck', '*', 'claim', 'reclaimed 2', 'reclaimed+1'),
    ('stuck', '*', 'claim other', 'mismatch', 'mismatch+1'),
    ('stuck', '*', 'complete', 'true', 'none'),
    ('stuck', '*', 'heartbeat', 'extended', 'none'),
    ('stuck', '*', 'late complete', 'reclaimed 2; IK002', 'reclaimed+1 refused_fenced+1'),
    ('completed', 'inside', 'claim', 'replayed 1', 'replayed+1'),
    ('completed', 'inside', 'claim other', 'mismatch', 'mismatch+1'),
    ('completed', 'inside', 'late complete', 'replayed 1; IK003', 'replayed+1 refused_finished+1'),
    ('failed-retryable', 'inside', 'claim', 'claimed 2', 'claimed+1'),
    ('failed-retryable', 'inside', 'claim other', 'mismatch', 'mismatch+1'),
    ('failed-retryable', 'inside', 'late complete', 'claimed 2; IK002', 'claimed+1 refused_fenced+1'),
    ('failed-terminal', 'inside', 'claim', 'replayed 1', 'replayed+1'),
    ('failed-terminal', 'inside', 'claim other', 'mismatch', 'mismatch+1'),
    ('failed-terminal', 'inside', 'late complete', 'replayed 1; IK003', 'replayed+1 refused_finished+1');
-- every finished record: complete and heartbeat are refused with IK003 (the TTL does not matter:
-- the record is there until it is purged); past its TTL it counts as absent for a claim
INSERT INTO ls_rec_calls_want
SELECT st, '*', c.call, c.answer, c.counted
FROM unnest(ARRAY['completed', 'failed-retryable', 'failed-terminal']) st,
     (VALUES ('complete', 'IK003', 'refused_finished+1'),
             ('heartbeat', 'IK003', 'refused_finished+1')) c(call, answer, counted)
UNION ALL
SELECT st, 'past', c.call, c.answer, c.counted
FROM unnest(ARRAY['completed', 'failed-retryable', 'failed-terminal']) st,
     (VALUES ('claim', 'claimed 2', 'claimed+1'),
             ('claim other', 'claimed 2', 'claimed+1'),
             ('late complete', 'claimed 2; IK002', 'claimed+1 refused_fenced+1')) c(call, answer, counted);

-- Inbox entries ----------------------------------------------------------------------------------
-- One entry per state and TTL, consumer ls-<state>-<ttl>, event e, payload hash \x01; all through
-- the public functions (an inbox lease and the TTL are independent, so every pair is reachable).
-- stale: the second delivery of an event whose first entry expired, carrying the entity sequence
-- number it set itself (docs/inbox.md "Retention"); its first delivery is made here.
SELECT idempotency.idem_inbox_receive('ls-stale-' || ttl, 'e', '\x01', entity_key => 'order-1', entity_seq => 1,
                          ttl => '1 millisecond') AS first_of_stale
FROM unnest(ARRAY['inside', 'past']) ttl;
SELECT pg_sleep(0.02);
CREATE FUNCTION ls_make_entry(st text, ttl text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    c text := 'ls-' || st || '-' || ttl;
    keep text := CASE ttl WHEN 'inside' THEN '1 hour' ELSE '1 ms' END;
    calls text[];
BEGIN
    CASE st
    WHEN 'done' THEN -- inline
        calls := ARRAY['receive ' || idempotency.idem_inbox_receive(c, 'e', '\x01', ttl => keep::interval)];
    WHEN 'stale' THEN
        calls := ARRAY['receive again ' || idempotency.idem_inbox_receive(c, 'e', '\x01', entity_key => 'order-1',
                                                             entity_seq => 1, ttl => keep::interval)];
    ELSE -- queued, then as the state needs
        calls := ARRAY['receive queued ' || idempotency.idem_inbox_receive(c, 'e', '\x01', enqueue => true, ttl => keep::interval)];
        CASE st
        WHEN 'received' THEN
        WHEN 'requeued' THEN
            calls := calls || ('next ' || (SELECT count(*) FROM idempotency.idem_inbox_next(c, 10, '1 hour')))
                           || ('fail ' || idempotency.idem_inbox_fail(c, 'e', 1, retryable => true, error => 'timeout'));
        WHEN 'processing' THEN
            calls := calls || ('next ' || (SELECT count(*) FROM idempotency.idem_inbox_next(c, 10, '1 hour')));
        WHEN 'lease-ended' THEN
            calls := calls || ('next lease 1 ms ' || (SELECT count(*) FROM idempotency.idem_inbox_next(c, 10, '1 millisecond')));
        WHEN 'failed' THEN
            calls := calls || ('next ' || (SELECT count(*) FROM idempotency.idem_inbox_next(c, 10, '1 hour')))
                           || ('fail ' || idempotency.idem_inbox_fail(c, 'e', 1, retryable => false, error => 'bad payload'));
        END CASE;
    END CASE;
    RETURN format('ttl %s: %s', keep, array_to_string(calls, ', '));
END $$;

-- What the docs say of each inbox state: the idem_inbox_stats columns (oldest: the
-- oldest_pending_age, 'its age' = statement_timestamp() - received_at), what idem_inbox_next
-- hands out, idem_purge deletes it.
CREATE TEMP TABLE ls_inbox_want (
    n int PRIMARY KEY, state text, ttl text,
    received bigint, pending bigint, processing bigint, processed bigint, failed bigint,
    stale bigint, expired bigint, oldest text, next text, purge boolean);
INSERT INTO ls_inbox_want VALUES
    ( 1, 'received',    'inside', 1, 1, 0, 0, 0, 0, 0, 'its age', 'e attempt 1', false),
    ( 2, 'received',    'past',   1, 1, 0, 0, 0, 0, 0, 'its age', 'e attempt 1', false),
    ( 3, 'requeued',    'inside', 1, 1, 0, 0, 0, 0, 0, 'its age', 'e attempt 2', false),
    ( 4, 'requeued',    'past',   1, 1, 0, 0, 0, 0, 0, 'its age', 'e attempt 2', false),
    ( 5, 'processing',  'inside', 1, 1, 1, 0, 0, 0, 0, 'its age', 'none',        false),
    ( 6, 'processing',  'past',   1, 1, 1, 0, 0, 0, 0, 'its age', 'none',        false),
    ( 7, 'lease-ended', 'inside', 1, 1, 1, 0, 0, 0, 0, 'its age', 'e attempt 2', false),
    ( 8, 'lease-ended', 'past',   1, 1, 1, 0, 0, 0, 0, 'its age', 'e attempt 2', false),
    ( 9, 'done',        'inside', 1, 0, 0, 1, 0, 0, 0, 'NULL',    'none',        false),
    (10, 'done',        'past',   0, 0, 0, 0, 0, 0, 1, 'NULL',    'none',        true),
    (11, 'failed',      'inside', 1, 0, 0, 0, 1, 0, 0, 'NULL',    'none',        false),
    (12, 'failed',      'past',   0, 0, 0, 0, 0, 0, 1, 'NULL',    'none',        true),
    (13, 'stale',       'inside', 1, 0, 0, 0, 0, 1, 0, 'NULL',    'none',        false),
    (14, 'stale',       'past',   0, 0, 0, 0, 0, 0, 1, 'NULL',    'none',        true);

-- receive: the same delivery again; receive other: another payload hash; done: by attempt 1.
-- Only a duplicate is counted (inbox_duplicate): an inbox mismatch is not idem_claim's mismatch,
-- and the inbox refusals (IK002, IK003) are not refused_fenced / refused_finished.
CREATE TEMP TABLE ls_inbox_calls (call text PRIMARY KEY, n int, steps text[]);
INSERT INTO ls_inbox_calls VALUES
    ('receive', 1, ARRAY[$$SELECT idempotency.idem_inbox_receive(%1$L, 'e', '\x01')$$]),
    ('receive other', 2, ARRAY[$$SELECT idempotency.idem_inbox_receive(%1$L, 'e', '\x02')$$]),
    ('done', 3, ARRAY[$$SELECT idempotency.idem_inbox_done(%1$L, 'e', 1)$$]);
CREATE TEMP TABLE ls_inbox_calls_want (state text, ttl text, call text, answer text, counted text);
INSERT INTO ls_inbox_calls_want
SELECT st, '*', c.call, c.answer, c.counted
FROM unnest(ARRAY['received', 'requeued', 'processing', 'lease-ended']) st,
     (VALUES ('receive', 'duplicate', 'inbox_duplicate+1'),
             ('receive other', 'mismatch', 'none')) c(call, answer, counted)
UNION ALL
SELECT st, 'inside', c.call, c.answer, c.counted
FROM unnest(ARRAY['done', 'failed', 'stale']) st,
     (VALUES ('receive', 'duplicate', 'inbox_duplicate+1'),
             ('receive other', 'mismatch', 'none')) c(call, answer, counted)
UNION ALL
SELECT st, 'past', c.call, c.answer, c.counted
FROM unnest(ARRAY['done', 'failed', 'stale']) st,
     (VALUES ('receive', 'new', 'none'),
             ('receive other', 'new', 'none')) c(call, answer, counted)
UNION ALL
SELECT st, '*', 'done', a, 'none'
FROM (VALUES ('received', 'IK002'), ('requeued', 'IK002'), ('processing', 'done'),
             ('lease-ended', 'done'), ('done', 'IK003'), ('failed', 'IK003'),
             ('stale', 'IK003')) s(st, a);

-- Build every state, then let the 1 ms TTLs and leases run out --------------------------------
SELECT n, state, ttl, ls_make_record(state, ttl) AS made_by FROM ls_rec_want ORDER BY n;
SELECT n, state, ttl, ls_make_entry(state, ttl) AS made_by FROM ls_inbox_want ORDER BY n;
SELECT pg_sleep(0.05);

-- the rows as built: status, attempt, lease and TTL are what each state's name says
SELECT w.n, w.state, w.ttl, r.status, r.retryable, r.attempt,
       CASE WHEN r.lease_expires_at IS NULL THEN 'none'
            WHEN r.lease_expires_at > now() THEN 'live' ELSE 'ended' END AS lease,
       CASE WHEN r.expires_at > now() THEN 'inside' ELSE 'past' END AS as_built
FROM ls_rec_want w JOIN idempotency.records r ON r.scope = 'ls/' || w.state || '/' || w.ttl
ORDER BY w.n;
SELECT w.n, w.state, w.ttl, i.status, i.attempt,
       CASE WHEN i.lease_expires_at IS NULL THEN 'none'
            WHEN i.lease_expires_at > now() THEN 'live' ELSE 'ended' END AS lease,
       CASE WHEN i.expires_at > now() THEN 'inside' ELSE 'past' END AS as_built
FROM ls_inbox_want w JOIN idempotency.inbox i ON i.consumer = 'ls-' || w.state || '-' || w.ttl
ORDER BY w.n;

-- idem_stats per record state, with idempotency.idem_stuck(), idem_lookup and the purge, against the docs
CREATE TEMP TABLE ls_rec_got AS
WITH stuck AS (SELECT scope FROM idempotency.idem_stuck()),
     purged AS (SELECT ls_purged(false) AS plain, ls_purged(true) AS with_stuck)
SELECT w.n, w.state, w.ttl, s.processing, s.stuck, s.completed, s.failed, s.expired,
       CASE WHEN s.oldest_processing_age IS NULL THEN 'NULL'
            WHEN s.oldest_processing_age = statement_timestamp() - r.created_at THEN 'its age'
            ELSE s.oldest_processing_age::text END AS oldest,
       s.scope IN (SELECT scope FROM stuck) AS idem_stuck,
       coalesce((SELECT l.status FROM idempotency.idem_lookup(s.scope, 'k') l), 'none') AS lookup,
       s.scope = ANY (p.plain) AS purge, s.scope = ANY (p.with_stuck) AS purge_stuck
FROM ls_rec_want w
JOIN idempotency.idem_stats s ON s.scope = 'ls/' || w.state || '/' || w.ttl
JOIN idempotency.records r ON r.scope = s.scope, purged p;
SELECT g.*, ROW(g.*) IS NOT DISTINCT FROM ROW(w.*) AS as_documented
FROM ls_rec_got g JOIN ls_rec_want w USING (n) ORDER BY n;

-- idem_inbox_stats per inbox state, with idem_inbox_next and the purge, against the docs
CREATE TEMP TABLE ls_inbox_got AS
WITH purged AS (SELECT ls_purged(false) AS plain)
SELECT w.n, w.state, w.ttl, s.received, s.pending, s.processing, s.processed, s.failed, s.stale,
       s.expired,
       CASE WHEN s.oldest_pending_age IS NULL THEN 'NULL'
            WHEN s.oldest_pending_age = statement_timestamp() - i.received_at THEN 'its age'
            ELSE s.oldest_pending_age::text END AS oldest,
       (ls_probe(ARRAY[format($$SELECT string_agg(event_id || ' attempt ' || attempt, ', ')
                                FROM idempotency.idem_inbox_next(%L, 10, '1 hour')$$, s.consumer)])).answer AS next,
       s.consumer = ANY (p.plain) AS purge
FROM ls_inbox_want w
JOIN idempotency.idem_inbox_stats s ON s.consumer = 'ls-' || w.state || '-' || w.ttl
JOIN idempotency.inbox i ON i.consumer = s.consumer, purged p;
SELECT g.*, ROW(g.*) IS NOT DISTINCT FROM ROW(w.*) AS as_documented
FROM ls_inbox_got g JOIN ls_inbox_want w USING (n) ORDER BY n;

-- the calls a client makes next: answers and counters, against the docs
CREATE TEMP TABLE ls_calls_got AS
SELECT 'record' AS kind, w.n, w.state, w.ttl, c.call, c.n AS call_n, p.answer, p.counted
FROM ls_rec_want w, ls_rec_calls c,
     ls_probe(ARRAY(SELECT format(x, 'ls/' || w.state || '/' || w.ttl) FROM unnest(c.steps) x)) p
UNION ALL
SELECT 'inbox', w.n, w.state, w.ttl, c.call, c.n, p.answer, p.counted
FROM ls_inbox_want w, ls_inbox_calls c,
     ls_probe(ARRAY(SELECT format(x, 'ls-' || w.state || '-' || w.ttl) FROM unnest(c.steps) x)) p;
CREATE TEMP VIEW ls_calls_want AS
SELECT 'record' AS kind, state, ttl, call, answer,
       CASE WHEN idempotency.idem_counters_enabled() THEN counted END AS counted FROM ls_rec_calls_want
UNION ALL
SELECT 'inbox', state, ttl, call, answer,
       CASE WHEN idempotency.idem_counters_enabled() THEN counted END FROM ls_inbox_calls_want;
SELECT g.kind, g.state, g.ttl, g.call, g.answer, g.counted,
       (SELECT count(*) FROM ls_calls_want w
        WHERE w.kind = g.kind AND w.state = g.state AND w.ttl IN (g.ttl, '*') AND w.call = g.call
          AND w.answer = g.answer AND w.counted IS NOT DISTINCT FROM g.counted) = 1 AS as_documented
FROM ls_calls_got g ORDER BY g.kind DESC, g.n, g.call_n;
-- every documented call was made (no want row left without its call)
SELECT w.kind, w.state, w.ttl, w.call FROM ls_calls_want w
WHERE NOT EXISTS (SELECT FROM ls_calls_got g WHERE g.kind = w.kind AND g.state = w.state
                  AND w.ttl IN (g.ttl, '*') AND g.call = w.call);

-- What must agree whatever the docs say ----------------------------------------------------------
-- records: each is counted in exactly one of processing, completed, failed, expired; stuck is
-- what idempotency.idem_stuck() lists; expired is what the purge deletes
-- inbox: received = pending + processed + failed + stale, and each entry is counted in exactly
-- one of received, expired; an entry is pending iff idem_inbox_next would lease it or it is
-- leased with a live lease; processing is what is leased; expired is what the purge deletes
SELECT 'records: one column each' AS rule, count(*) FILTER (
           WHERE processing + completed + failed + expired <> 1) AS disagreements FROM ls_rec_got
UNION ALL
SELECT 'records: stuck = idempotency.idem_stuck()', count(*) FILTER (WHERE (stuck = 1) <> idem_stuck) FROM ls_rec_got
UNION ALL
SELECT 'records: expired = purged', count(*) FILTER (WHERE (expired = 1) <> purge) FROM ls_rec_got
UNION ALL
SELECT 'inbox: received = pending + processed + failed + stale',
       count(*) FILTER (WHERE received <> pending + processed + failed + stale) FROM ls_inbox_got
UNION ALL
SELECT 'inbox: received or expired', count(*) FILTER (WHERE received + expired <> 1) FROM ls_inbox_got
UNION ALL
SELECT 'inbox: pending = next leases it or leased live', count(*) FILTER (
           WHERE (g.pending = 1) <> (g.next <> 'none' OR (i.status = 'processing' AND i.lease_expires_at > now())))
FROM ls_inbox_got g JOIN idempotency.inbox i ON i.consumer = 'ls-' || g.state || '-' || g.ttl
UNION ALL
SELECT 'inbox: processing = leased', count(*) FILTER (WHERE (g.processing = 1) <> (i.status = 'processing'))
FROM ls_inbox_got g JOIN idempotency.inbox i ON i.consumer = 'ls-' || g.state || '-' || g.ttl
UNION ALL
SELECT 'inbox: expired = purged', count(*) FILTER (WHERE (expired = 1) <> purge) FROM ls_inbox_got;

-- nothing changed: every call above was rolled back
SELECT count(*) AS records, count(*) FILTER (WHERE attempt = 1) AS attempt_1
FROM idempotency.records WHERE scope LIKE 'ls/%';
SELECT count(*) AS entries, count(*) FILTER (WHERE attempt <= 1) AS attempt_0_or_1
FROM idempotency.inbox WHERE consumer LIKE 'ls-%';

DELETE FROM idempotency.records WHERE scope LIKE 'ls/%';
DELETE FROM idempotency.inbox WHERE consumer LIKE 'ls-%';
DELETE FROM idempotency.inbox_entities WHERE consumer LIKE 'ls-%';
DROP FUNCTION ls_probe(text[]), ls_purged(boolean), ls_make_record(text, text),
    ls_make_entry(text, text);
