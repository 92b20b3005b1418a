
-- Scaling out on Citus (docs/scaling.md) ---------------------------------------------------------
-- idem_distribute() distributes the extension's tables and delegates its per-key functions. It
-- looks every Citus object up by name at run time (to_regproc, to_regclass, EXECUTE with %I/%L
-- or parameters), so the extension does not depend on Citus: without it, the call only says
-- what to do.

-- Run once on a Citus coordinator, after CREATE EXTENSION idempotency: records by scope, inbox
-- and inbox_entities by consumer, all three co-located; the per-key functions delegated to the
-- worker that owns their key. What is already so is left alone; one row per object says what
-- was done ('distributed', 'delegated') or that it already was ('unchanged').
CREATE FUNCTION @extschema@.idem_distribute(OUT object text, OUT action text)
RETURNS SETOF record
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- the tables are in schema idempotency, the functions in the extension's schema
    ext_schema text := '@extschema@';
    tables text := 'idempotency';
    t record;
    f record;
    rel regclass;
    current_column text;
    dist_arg integer;
    want_arg integer;
    dist_colocation integer;
    table_colocation integer;
    on_worker boolean;
    is_citus boolean;
BEGIN
    IF to_regproc('pg_catalog.create_distributed_table') IS NULL
       OR to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RAISE EXCEPTION 'Citus is not installed in database "%"', current_database()
            USING ERRCODE = '0A000',
                  DETAIL = 'idem_distribute() distributes the extension''s tables with Citus.',
                  HINT = 'Add citus first in shared_preload_libraries, restart, run CREATE '
                         'EXTENSION citus on every node, register the workers on the coordinator '
                         '(SELECT citus_add_node(host, port)), then call idem_distribute() there.';
    END IF;
    IF to_regproc('pg_catalog.citus_is_coordinator') IS NOT NULL THEN
        EXECUTE 'SELECT NOT pg_catalog.citus_is_coordinator()' INTO STRICT on_worker;
        IF on_worker THEN
            RAISE EXCEPTION 'idem_distribute() runs on the Citus coordinator, not on a worker'
                USING ERRCODE = '0A000',
                      HINT = 'Connect to the coordinator and call it there.';
        END IF;
    END IF;

    -- The tables, in co-location order: records first, the others with it.
    FOR t IN SELECT * FROM (VALUES (1, 'records', 'scope'), (2, 'inbox', 'consumer'),
                                   (3, 'inbox_entities', 'consumer')) AS v(n, name, col)
             ORDER BY n
    LOOP
        rel := format('%I.%I', tables, t.name)::regclass;
        is_citus := false;
        current_column := NULL;
        -- (EXECUTE does not set FOUND: the row says itself that it was there)
        EXECUTE 'SELECT true, pg_catalog.column_to_column_name(p.logicalrelid, p.partkey) '
                'FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = $1'
            INTO is_citus, current_column USING rel;
        is_citus := coalesce(is_citus, false);
        IF is_citus AND current_column IS NOT DISTINCT FROM t.col THEN
            object := rel::text; action := 'unchanged: distributed by ' || t.col;
            RETURN NEXT;
            CONTINUE;
        ELSIF is_citus THEN
            RAISE EXCEPTION 'table % is already a Citus table, distributed by %',
                            rel, coalesce(current_column, '(none: reference or local table)')
                USING ERRCODE = '0A000',
                      DETAIL = format('idem_distribute() distributes it by %s.', t.col),
                      HINT = 'The extension''s views depend on its tables, so Citus cannot '
                             'undistribute them: recreate the extension and call idem_distribute().';
        END IF;
        IF t.name = 'records' THEN
            EXECUTE 'SELECT pg_catalog.create_distributed_table($1, $2)' USING rel, t.col;
        ELSE
            EXECUTE 'SELECT pg_catalog.create_distributed_table($1, $2, colocate_with => $3)'
                USING rel, t.col, format('%I.%I', tables, 'records');
        END IF;
        -- Rows the table had were copied into the shards; the coordinator's local copy goes.
        EXECUTE 'SELECT pg_catalog.truncate_local_data_after_distributing_table($1)' USING rel;
        object := rel::text; action := 'distributed by ' || t.col;
        RETURN NEXT;
    END LOOP;

    EXECUTE 'SELECT p.colocationid FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = $1'
        INTO table_colocation USING format('%I.%I', tables, 'records')::regclass;
    -- The per-key functions: one round trip to the worker that owns the key.
    FOR f IN SELECT p.oid::regprocedure AS fn, p.proname,
                    CASE WHEN p.proname IN ('idem_claim', 'idem_complete', 'idem_fail',
                                            'idem_heartbeat', 'idem_lookup')
                         THEN 'scope' ELSE 'consumer' END AS arg
             FROM pg_catalog.pg_proc p
             WHERE p.pronamespace = ext_schema::regnamespace
               AND p.proname IN ('idem_claim', 'idem_complete', 'idem_fail', 'idem_heartbeat',
                                 'idem_lookup', 'idem_inbox_receive', 'idem_inbox_next',
                                 'idem_inbox_done', 'idem_inbox_fail', 'idem_webhook_receive')
             ORDER BY p.proname, p.oid::regprocedure::text
    LOOP
        want_arg := array_position((SELECT p.proargnames FROM pg_catalog.pg_proc p
                                    WHERE p.oid = f.fn), f.arg) - 1;
        dist_arg := NULL;
        dist_colocation := NULL;
        EXECUTE 'SELECT o.distribution_argument_index, o.colocationid FROM pg_catalog.pg_dist_object o '
                'WHERE o.classid = ''pg_catalog.pg_proc''::pg_catalog.regclass AND o.objid = $1'
            INTO dist_arg, dist_colocation USING f.fn::oid;
        IF dist_arg IS NOT DISTINCT FROM want_arg AND dist_colocation IS NOT DISTINCT FROM table_colocation THEN
            object := f.fn::text; action := 'unchanged: delegated by ' || f.arg;
        ELSE
            EXECUTE 'SELECT pg_catalog.create_distributed_function($1, $2, colocate_with => $3)'
                USING f.fn, f.arg,
                      format('%I.%I', tables, CASE f.arg WHEN 'scope' THEN 'records' ELSE 'inbox' END);
            object := f.fn::text; action := 'delegated by ' || f.arg;
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;
COMMENT ON FUNCTION @extschema@.idem_distribute() IS
    'Run once on a Citus coordinator: distributes records by scope, inbox and inbox_entities by consumer (co-located) and delegates the per-key functions to the worker owning the key; a second call changes nothing. Without Citus it raises 0A000 with what to do.';
REVOKE EXECUTE ON FUNCTION @extschema@.idem_distribute() FROM PUBLIC;

-- Purging a distributed table: the purge of the shards of this node. Bounded batches of
-- FOR UPDATE SKIP LOCKED deletes, as idem_purge_batch does, on each shard placement of records
-- and inbox that this node holds (pg_dist_placement of pg_dist_local_group), committing after
-- every round, for at most max_duration. CALL idem_purge_loop() on the coordinator runs it on
-- every worker (run_command_on_workers). No SET clause: a procedure with one cannot COMMIT, so
-- every name is qualified.
CREATE PROCEDURE @extschema@.idem_purge_shards(
    batch_size integer DEFAULT 1000, max_duration interval DEFAULT '4 minutes',
    include_stuck boolean DEFAULT false, stuck_older_than interval DEFAULT '0',
    INOUT deleted bigint DEFAULT NULL)
LANGUAGE plpgsql
AS $$
DECLARE
    shards text[];
    is_records boolean[];
    done boolean[];
    n bigint;
    t timestamptz;
    deadline timestamptz;
    more boolean;
BEGIN
    IF batch_size IS NULL OR max_duration IS NULL OR include_stuck IS NULL OR stuck_older_than IS NULL THEN
        RAISE EXCEPTION 'arguments must not be null' USING ERRCODE = '22004';
    END IF;
    IF batch_size OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION 'batch_size must be positive' USING ERRCODE = '22023';
    END IF;
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_placement') IS NULL THEN
        RAISE EXCEPTION 'Citus is not installed in database "%"', pg_catalog.current_database()
            USING ERRCODE = '0A000', HINT = 'Without Citus, CALL idem_purge_loop() purges the tables.';
    END IF;
    EXECUTE 'SELECT pg_catalog.array_agg(pg_catalog.shard_name(s.logicalrelid, s.shardid) ORDER BY s.shardid), '
            'pg_catalog.array_agg(s.logicalrelid OPERATOR(pg_catalog.=) ''idempotency.records''::pg_catalog.regclass ORDER BY s.shardid) '
            'FROM pg_catalog.pg_dist_shard s JOIN pg_catalog.pg_dist_placement p ON p.shardid OPERATOR(pg_catalog.=) s.shardid '
            'WHERE s.logicalrelid OPERATOR(pg_catalog.=) ANY (ARRAY[''idempotency.records'', ''idempotency.inbox'']::pg_catalog.regclass[]) '
            'AND p.groupid OPERATOR(pg_catalog.=) (SELECT g.groupid FROM pg_catalog.pg_dist_local_group g)'
        INTO shards, is_records;
    deleted := 0;
    IF shards IS NULL THEN
        RETURN;
    END IF;
    done := pg_catalog.array_fill(false, ARRAY[pg_catalog.cardinality(shards)]);
    deadline := pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) max_duration;
    LOOP
        more := false;
        FOR i IN 1 .. pg_catalog.cardinality(shards) LOOP
            CONTINUE WHEN done[i];
            t := pg_catalog.now();
            -- shard_name() quotes the name it returns
            EXECUTE pg_catalog.format(
                'WITH d AS (DELETE FROM %1$s AS r WHERE r.ctid OPERATOR(pg_catalog.=) ANY '
                '(ARRAY(SELECT s.ctid FROM %1$s AS s WHERE s.expires_at OPERATOR(pg_catalog.<) $2 AND %2$s '
                'LIMIT $1 FOR UPDATE SKIP LOCKED)) RETURNING 1) SELECT pg_catalog.count(*) FROM d',
                shards[i],
                CASE WHEN is_records[i]
                     THEN '(s.status OPERATOR(pg_catalog.<>) ''processing'' OR ($3 AND s.lease_expires_at '
                          'OPERATOR(pg_catalog.<) $4 AND s.lease_expires_at OPERATOR(pg_catalog.<) $2))'
                     ELSE 's.status OPERATOR(pg_catalog.=) ANY (''{done,failed,stale}''::pg_catalog.text[])' END)
                INTO n USING batch_size, t, include_stuck, t OPERATOR(pg_catalog.-) stuck_older_than;
            deleted := deleted OPERATOR(pg_catalog.+) n;
            done[i] := n OPERATOR(pg_catalog.<) batch_size;
            more := more OR NOT done[i];
        END LOOP;
        COMMIT;
        EXIT WHEN NOT more OR pg_catalog.clock_timestamp() OPERATOR(pg_catalog.>=) deadline;
    END LOOP;
END
$$;
COMMENT ON PROCEDURE @extschema@.idem_purge_shards(integer, interval, boolean, interval, bigint) IS
    'Citus: purges the shards of records and inbox that this node holds, in bounded SKIP LOCKED batches, committing after every round; CALL idem_purge_loop() on the coordinator runs it on every worker.';
REVOKE EXECUTE ON PROCEDURE @extschema@.idem_purge_shards(integer, interval, boolean, interval, bigint) FROM PUBLIC;

-- idem_purge_loop as in 0.1, and on a Citus cluster (records distributed) it runs
-- idem_purge_shards on every worker and on this node, and returns the total.
CREATE OR REPLACE PROCEDURE @extschema@.idem_purge_loop(
    batch_size integer DEFAULT 1000, max_duration interval DEFAULT '4 minutes',
    include_stuck boolean DEFAULT false, stuck_older_than interval DEFAULT '0',
    pause interval DEFAULT '0', INOUT deleted bigint DEFAULT NULL)
LANGUAGE plpgsql
AS $$
DECLARE
    targets constant text[] := ARRAY['records', 'inbox'];
    pos tid[] := ARRAY['(0,0)', '(0,0)']::tid[];
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
