
-- Lifecycle (0.5): idem_purge and idem_purge_loop also purge the outbox: done events past their
-- retention (expires_at, idempotency.outbox_ttl after the event was done). Pending, leased and
-- dead events are never purged: a dead event stays until it is requeued or deleted. The bodies
-- are 0.1's and 0.3's with the third target (CREATE OR REPLACE keeps their grants).
CREATE OR REPLACE FUNCTION idem_purge(
    batch_size integer DEFAULT 1000, max_batches integer DEFAULT NULL,
    include_stuck boolean DEFAULT false, stuck_older_than interval DEFAULT '0')
RETURNS bigint
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    targets constant text[] := ARRAY['records', 'inbox', 'outbox'];
    pos tid[] := ARRAY['(0,0)', '(0,0)', '(0,0)']::tid[];
    step record;
    total bigint := 0;
    iterations integer := 0;
    more boolean;
BEGIN
    IF max_batches < 0 THEN
        RAISE EXCEPTION 'max_batches must not be negative' USING ERRCODE = '22023';
    END IF;
    LOOP
        EXIT WHEN iterations >= max_batches;
        more := false;
        FOR i IN 1 .. array_length(targets, 1) LOOP
            CONTINUE WHEN pos[i] IS NULL;
            step := @extschema@.idem_purge_batch(targets[i], batch_size, pos[i], include_stuck,
                                                 stuck_older_than);
            total := total + step.deleted;
            pos[i] := step.last;
            more := more OR step.last IS NOT NULL;
        END LOOP;
        iterations := iterations + 1;
        EXIT WHEN NOT more;
    END LOOP;
    RETURN total;
END
$$;
COMMENT ON FUNCTION idem_purge(integer, integer, boolean, interval) IS
    'Deletes expired finished records, settled inbox entries and done outbox events past idempotency.outbox_ttl in bounded SKIP LOCKED batches (one transaction); returns the count. For scheduled purging use CALL idem_purge_loop().';

CREATE OR REPLACE PROCEDURE @extschema@.idem_purge_loop(
    batch_size integer DEFAULT 1000, max_duration interval DEFAULT '4 minutes',
    include_stuck boolean DEFAULT false, stuck_older_than interval DEFAULT '0',
    pause interval DEFAULT '0', INOUT deleted bigint DEFAULT NULL)
LANGUAGE plpgsql
AS $$
DECLARE
    targets constant text[] := ARRAY['records', 'inbox', 'outbox'];
    pos tid[] := ARRAY['(0,0)', '(0,0)', '(0,0)']::tid[];
    step record;
    deadline timestamptz;
    more boolean;
    distributed boolean := false;
    w record;
    here bigint;
BEGIN
    IF max_duration IS NULL OR pause IS NULL THEN
        RAISE EXCEPTION '% must not be null', CASE WHEN pause IS NULL THEN 'pause' ELSE 'max_duration' END
            USING ERRCODE = '22004';
    END IF;
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE 'SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid '
                'OPERATOR(pg_catalog.=) ''idempotency.records''::pg_catalog.regclass)' INTO distributed;
    END IF;
    IF distributed THEN
        IF batch_size IS NULL OR include_stuck IS NULL OR stuck_older_than IS NULL THEN
            RAISE EXCEPTION 'arguments must not be null' USING ERRCODE = '22004';
        END IF;
        deleted := 0;
        -- each worker in its own connection, in parallel; a worker that fails is reported and
        -- the others are purged
        FOR w IN EXECUTE 'SELECT nodename, nodeport, success, result FROM pg_catalog.run_command_on_workers($1)'
            USING pg_catalog.format('CALL %I.idem_purge_shards(batch_size => %s, max_duration => %L, '
                                    'include_stuck => %L, stuck_older_than => %L)',
                                    '@extschema@', batch_size, max_duration, include_stuck, stuck_older_than)
        LOOP
            IF w.success AND w.result OPERATOR(pg_catalog.~) '^[0-9]+$' THEN
                deleted := deleted OPERATOR(pg_catalog.+) w.result::bigint;
            ELSE
                RAISE WARNING 'idem_purge_loop: the purge of worker %:% failed: %', w.nodename, w.nodeport, w.result;
            END IF;
        END LOOP;
        CALL @extschema@.idem_purge_shards(batch_size, max_duration, include_stuck, stuck_older_than, here);
        deleted := deleted OPERATOR(pg_catalog.+) here;
        RETURN;
    END IF;
    deadline := pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) max_duration;
    deleted := 0;
    LOOP
        more := false;
        FOR i IN 1 .. pg_catalog.array_length(targets, 1) LOOP
            CONTINUE WHEN pos[i] IS NULL;
            step := @extschema@.idem_purge_batch(targets[i], batch_size, pos[i], include_stuck,
                                                 stuck_older_than);
            deleted := deleted OPERATOR(pg_catalog.+) step.deleted;
            pos[i] := step.last;
            more := more OR step.last IS NOT NULL;
        END LOOP;
        COMMIT;
        EXIT WHEN NOT more OR pg_catalog.clock_timestamp() OPERATOR(pg_catalog.>=) deadline;
        IF pause OPERATOR(pg_catalog.>) interval '0' THEN
            PERFORM pg_catalog.pg_sleep(pg_catalog.date_part('epoch', pause));
        END IF;
    END LOOP;
END
$$;
COMMENT ON PROCEDURE @extschema@.idem_purge_loop(integer, interval, boolean, interval, interval, bigint) IS
    'Purges like idem_purge, committing after every batch (no long-held locks), for at most max_duration; the procedure the pg_cron job calls. On a Citus coordinator it purges the shards of every worker (idem_purge_shards).';
