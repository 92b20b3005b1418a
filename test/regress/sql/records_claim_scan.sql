-- idem_claim's custom scan (src/records_claim_scan.cpp): which calls it plans, and that it
-- answers as the function scan it replaces, in every outcome, rescan, cursor and error.
\pset null '<NULL>'
SET client_min_messages = warning;
\i test/regress/helpers.sql

-- plan_of(q): the plan's first line (the node that runs the claim is the top one here).
CREATE FUNCTION pg_temp.plan_of(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    l text;
BEGIN
    FOR l IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
        IF l ~ 'idem_claim|IdemClaim|Function Scan' THEN
            RETURN trim(regexp_replace(l, '^\s*->\s*', ''));
        END IF;
    END LOOP;
    RETURN NULL;
END $$;

-- which calls it takes: a lone call in FROM, also with an expression or a qual above it; not
-- WITH ORDINALITY, a whole-row reference, a LATERAL argument, another function of the name, or
-- idem_claim changed to run under fmgr's wrapper (SET, SECURITY DEFINER)
CREATE FUNCTION pg_temp.idem_claim(scope text, key text) RETURNS TABLE (outcome text)
LANGUAGE sql AS $$ SELECT 'not the extension''s' $$;
SELECT q AS query, pg_temp.plan_of(q) AS plan FROM (VALUES
    ($$SELECT * FROM idempotency.idem_claim('cs', 'k')$$),
    ($$SELECT outcome, attempt FROM idempotency.idem_claim('cs', 'k', '\x01', '5 min', '1 day', true)$$),
    ($$SELECT length(outcome) FROM idempotency.idem_claim('cs', 'k')$$),
    ($$SELECT count(*) FROM idempotency.idem_claim('cs', 'k')$$),
    ($$SELECT outcome FROM idempotency.idem_claim('cs', 'k') WHERE attempt > 1$$),
    ($$SELECT outcome FROM idempotency.idem_claim('cs', 'k') UNION ALL SELECT outcome FROM idempotency.idem_claim('cs', 'l')$$),
    ($$SELECT * FROM idempotency.idem_claim('cs', 'k') WITH ORDINALITY$$),
    ($$SELECT c FROM idempotency.idem_claim('cs', 'k') c$$),
    ($$SELECT c.outcome FROM (VALUES ('a'), ('b')) v(k), LATERAL idempotency.idem_claim('cs', v.k) c$$),
    ($$SELECT * FROM pg_temp.idem_claim('cs', 'k')$$)) v(q);
SELECT * FROM pg_temp.idem_claim('cs', 'k');
BEGIN;
ALTER FUNCTION idempotency.idem_claim(text, text, bytea, interval, interval, boolean) SET work_mem = '4MB';
SELECT pg_temp.plan_of($$SELECT * FROM idempotency.idem_claim('cs', 'k')$$) AS with_set;
ALTER FUNCTION idempotency.idem_claim(text, text, bytea, interval, interval, boolean) RESET ALL;
ALTER FUNCTION idempotency.idem_claim(text, text, bytea, interval, interval, boolean) SECURITY DEFINER;
SELECT pg_temp.plan_of($$SELECT * FROM idempotency.idem_claim('cs', 'k')$$) AS security_definer;
ROLLBACK;
-- idempotency.claim_scan = off plans the function scan; a value that is no Boolean is refused
SET idempotency.claim_scan = off;
SELECT pg_temp.plan_of($$SELECT * FROM idempotency.idem_claim('cs', 'k')$$) AS off;
RESET idempotency.claim_scan;
SELECT try($$SET idempotency.claim_scan = 'sometimes'$$) AS not_boolean;
SHOW idempotency.claim_scan;
-- EXPLAIN VERBOSE shows the call, as for the function scan
EXPLAIN (VERBOSE, COSTS OFF) SELECT outcome, attempt FROM idempotency.idem_claim('cs', 'k', '\x01');

-- every outcome, through the custom scan (on) and the function scan (off), the same; the
-- statements are run by EXECUTE, so each is planned with the setting in effect
CREATE FUNCTION pg_temp.claim_as(scan text, key text, fp bytea, lease interval DEFAULT NULL)
RETURNS TABLE (outcome text, attempt int, resource_id text, response jsonb,
               response_status int, leased boolean, live boolean, plan text)
LANGUAGE plpgsql AS $$
DECLARE
    q text := format('SELECT outcome, attempt, resource_id, response, response_status, '
                     'lease_expires_at IS NOT NULL, expires_at > now() FROM idempotency.idem_claim(%L, %L, %L, %L)',
                     'cs/' || scan, key, fp, lease);
    p text;
BEGIN
    PERFORM set_config('idempotency.claim_scan', scan, true);
    p := split_part(pg_temp.plan_of(q), ' on ', 1);
    RETURN QUERY EXECUTE 'SELECT *, $1 FROM (' || q || ') s' USING p;
END $$;
CREATE TEMP TABLE answers (scan text, step int, outcome text, attempt int, resource_id text,
                           response jsonb, response_status int, leased boolean, live boolean,
                           plan text);
DO $$
DECLARE
    scan text;
BEGIN
    FOREACH scan IN ARRAY ARRAY['on', 'off'] LOOP
        INSERT INTO answers SELECT scan, 1, * FROM pg_temp.claim_as(scan, 'a', '\x01');
        INSERT INTO answers SELECT scan, 2, * FROM pg_temp.claim_as(scan, 'a', '\x01');
        PERFORM idempotency.idem_complete('cs/' || scan, 'a', 1, 'r-a', '{"id": "a"}', 201);
        INSERT INTO answers SELECT scan, 3, * FROM pg_temp.claim_as(scan, 'a', '\x01');
        INSERT INTO answers SELECT scan, 4, * FROM pg_temp.claim_as(scan, 'a', '\x02');
        INSERT INTO answers SELECT scan, 5, * FROM pg_temp.claim_as(scan, 'b', NULL, '1 ms');
        PERFORM pg_sleep(0.01);
        INSERT INTO answers SELECT scan, 6, * FROM pg_temp.claim_as(scan, 'b', NULL);
        PERFORM idempotency.idem_fail('cs/' || scan, 'b', 2, true);
        INSERT INTO answers SELECT scan, 7, * FROM pg_temp.claim_as(scan, 'b', NULL);
    END LOOP;
END $$;
SELECT a.step, a.outcome, a.attempt, a.resource_id, a.response, a.response_status, a.leased,
       a.live, a.plan AS plan_on, b.plan AS plan_off,
       (a.outcome, a.attempt, a.resource_id, a.response, a.response_status, a.leased, a.live)
           IS NOT DISTINCT FROM
       (b.outcome, b.attempt, b.resource_id, b.response, b.response_status, b.leased, b.live) AS same
FROM answers a JOIN answers b ON b.step = a.step AND b.scan = 'off'
WHERE a.scan = 'on' ORDER BY a.step;

-- a qual on the row, and an expression above it
SELECT outcome FROM idempotency.idem_claim('cs/on', 'a', '\x01') WHERE outcome = 'claimed';
SELECT outcome, response ->> 'id' AS id, attempt + 1 AS next FROM idempotency.idem_claim('cs/on', 'a', '\x01')
WHERE outcome = 'replayed';
-- each branch of a UNION ALL claims its key
SELECT outcome, attempt FROM idempotency.idem_claim('cs/union', 'u1')
UNION ALL SELECT outcome, attempt FROM idempotency.idem_claim('cs/union', 'u2')
UNION ALL SELECT outcome, attempt FROM idempotency.idem_claim('cs/union', 'u1');
SELECT key, attempt FROM idempotency.records WHERE scope = 'cs/union' ORDER BY key;
-- no column used: the claim still runs, once
SELECT count(*) FROM idempotency.idem_claim('cs/count', 'c');
SELECT status, attempt FROM idempotency.records WHERE scope = 'cs/count';

-- rescans: a claim whose arguments do not change runs once, its row returned for every row of
-- the other side (as the function scan's tuplestore does: claimed three times, not in_progress)
SELECT pg_temp.plan_of($$SELECT g, c.outcome FROM generate_series(1, 3) g, idempotency.idem_claim('cs/join', 'j') c$$) AS join_plan;
SELECT g, c.outcome, c.attempt FROM generate_series(1, 3) g, idempotency.idem_claim('cs/join', 'j') c ORDER BY g;
SELECT count(*) AS records FROM idempotency.records WHERE scope = 'cs/join';
-- a parameter that changes in a qual or the target list only, not in the arguments: the same
-- row again (claimed three times), as the function scan answers (below, with the setting off)
SELECT t.id,
       (SELECT outcome || '/' || attempt FROM idempotency.idem_claim('cs/qual', 'q') WHERE attempt <= t.id) AS qual,
       (SELECT outcome || '/' || t.id FROM idempotency.idem_claim('cs/tlist', 't')) AS tlist
FROM (VALUES (1), (2), (3)) t(id) ORDER BY t.id;
SET idempotency.claim_scan = off;
SELECT t.id,
       (SELECT outcome || '/' || attempt FROM idempotency.idem_claim('cs/qual-off', 'q') WHERE attempt <= t.id) AS qual,
       (SELECT outcome || '/' || t.id FROM idempotency.idem_claim('cs/tlist-off', 't')) AS tlist
FROM (VALUES (1), (2), (3)) t(id) ORDER BY t.id;
RESET idempotency.claim_scan;
-- a correlated subquery claims again for each changed argument (the second 'a' is this
-- transaction's own processing record)
SELECT v.n, v.k, (SELECT outcome FROM idempotency.idem_claim('cs/sub', v.k)) AS outcome
FROM (VALUES (1, 'a'), (2, 'b'), (3, 'a')) v(n, k) ORDER BY v.n;
-- an argument from an initplan
SELECT outcome, attempt FROM idempotency.idem_claim('cs/init', (SELECT 'i' || 1));
-- a prepared statement's generic plan, parameters evaluated at each execution
PREPARE claim_p(text) AS SELECT outcome, attempt FROM idempotency.idem_claim('cs/prep', $1);
SET plan_cache_mode = force_generic_plan;
EXECUTE claim_p('p1');
EXECUTE claim_p('p1');
EXECUTE claim_p('p2');
RESET plan_cache_mode;
DEALLOCATE claim_p;

-- a cursor: forward, past the end, backward onto the row and before it, forward again; the
-- claim runs once
BEGIN;
DECLARE cur SCROLL CURSOR FOR SELECT outcome, attempt FROM idempotency.idem_claim('cs/cursor', 'c');
FETCH NEXT FROM cur;
FETCH NEXT FROM cur;
FETCH PRIOR FROM cur;
FETCH PRIOR FROM cur;
FETCH NEXT FROM cur;
CLOSE cur;
SELECT count(*) AS records, max(attempt) AS attempt FROM idempotency.records WHERE scope = 'cs/cursor';
COMMIT;

-- EXECUTE on idem_claim is checked as for the function scan (the extension grants it to
-- nobody): 42501 both ways, nothing written
CREATE ROLE idem_cs_nobody;
SET ROLE idem_cs_nobody;
SELECT try($$SELECT * FROM idempotency.idem_claim('cs/acl', 'k')$$) AS custom_scan;
SET idempotency.claim_scan = off;
SELECT try($$SELECT * FROM idempotency.idem_claim('cs/acl', 'k')$$) AS function_scan;
RESET idempotency.claim_scan;
RESET ROLE;
DROP ROLE idem_cs_nobody;
SELECT count(*) AS written FROM idempotency.records WHERE scope = 'cs/acl';

-- errors are the function's, and write nothing
SELECT try($$SELECT * FROM idempotency.idem_claim(NULL, 'k')$$) AS null_scope;
SELECT try($$SELECT * FROM idempotency.idem_claim('cs/err', 'k', '\x')$$) AS empty_fingerprint;
SELECT try($$SELECT * FROM idempotency.idem_claim('cs/err', 'k', lease => '-1 s')$$) AS negative_lease;
SELECT count(*) AS written FROM idempotency.records WHERE scope = 'cs/err';

-- track_functions = all counts the calls the custom scan makes, as fmgr would
BEGIN;
SET LOCAL track_functions = 'all';
SELECT outcome FROM idempotency.idem_claim('cs/stats', 's1');
SELECT outcome FROM idempotency.idem_claim('cs/stats', 's2');
SELECT calls FROM pg_stat_xact_user_functions WHERE funcname = 'idem_claim';
COMMIT;
