-- idempotency 0.8 -> 1.0.0 (committed; the Makefile installs it as it is). 0.8's catalog is
-- 1.0.0's but for what follows: two function bodies written with every name qualified, one
-- re-indented, and one comment. An 0.8 database updated with it has the catalog of a fresh 1.0.0 installation
-- (src/sql/idempotency.sql): test/run-all upgrade.
\echo Use "ALTER EXTENSION idempotency UPDATE TO '1.0.0'" to load this file. \quit

-- Names qualified in every function body (1.0.0) -------------------------------------------------
-- idem_purge and idem_distribute, written before 0.8, resolved their calls and types through
-- their pinned search path; 1.0.0 writes every name in them qualified, as test/sql-lint wants of
-- every definition. CREATE OR REPLACE keeps their grants and comments.
CREATE OR REPLACE FUNCTION idem_purge(
    batch_size integer DEFAULT 1000, max_batches integer DEFAULT NULL,
    include_stuck boolean DEFAULT false, stuck_older_than interval DEFAULT '0')
RETURNS bigint
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    targets constant pg_catalog.text[] := ARRAY['records', 'inbox', 'outbox'];
    pos pg_catalog.tid[] := ARRAY['(0,0)', '(0,0)', '(0,0)']::pg_catalog.tid[];
    step pg_catalog.record;
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
        FOR i IN 1 .. pg_catalog.array_length(targets, 1) LOOP
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

CREATE OR REPLACE FUNCTION @extschema@.idem_distribute(OUT object pg_catalog.text, OUT action pg_catalog.text)
RETURNS SETOF pg_catalog.record
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- the tables are in schema idempotency, the functions in the extension's schema
    ext_schema pg_catalog.text := '@extschema@';
    tables pg_catalog.text := 'idempotency';
    t pg_catalog.record;
    f pg_catalog.record;
    rel pg_catalog.regclass;
    current_column pg_catalog.text;
    dist_arg integer;
    want_arg integer;
    dist_colocation integer;
    want_colocation integer;
    on_worker boolean;
    is_citus boolean;
BEGIN
    IF pg_catalog.to_regproc('pg_catalog.create_distributed_table') IS NULL
       OR pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RAISE EXCEPTION 'Citus is not installed in database "%"', pg_catalog.current_database()
            USING ERRCODE = '0A000',
                  DETAIL = 'idem_distribute() distributes the extension''s tables with Citus.',
                  HINT = 'Add citus first in shared_preload_libraries, restart, run CREATE '
                         'EXTENSION citus on every node, register the workers on the coordinator '
                         '(SELECT citus_add_node(host, port)), then call idem_distribute() there.';
    END IF;
    IF pg_catalog.to_regproc('pg_catalog.citus_is_coordinator') IS NOT NULL THEN
        EXECUTE 'SELECT NOT pg_catalog.citus_is_coordinator()' INTO STRICT on_worker;
        IF on_worker THEN
            RAISE EXCEPTION 'idem_distribute() runs on the Citus coordinator, not on a worker'
                USING ERRCODE = '0A000',
                      HINT = 'Connect to the coordinator and call it there.';
        END IF;
    END IF;

    -- The tables, in co-location order: records first, the inbox's with it; the outbox in a
    -- group of its own (docs/citus.md, "The outbox").
    FOR t IN SELECT * FROM (VALUES (1, 'records', 'scope', NULL), (2, 'inbox', 'consumer', 'records'),
                                   (3, 'inbox_entities', 'consumer', 'records'),
                                   (4, 'outbox', 'topic', 'none')) AS v(n, name, col, colocate)
             ORDER BY n
    LOOP
        rel := pg_catalog.format('%I.%I', tables, t.name)::pg_catalog.regclass;
        is_citus := false;
        current_column := NULL;
        -- (EXECUTE does not set FOUND: the row says itself that it was there)
        EXECUTE 'SELECT true, pg_catalog.column_to_column_name(p.logicalrelid, p.partkey) '
                'FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = $1'
            INTO is_citus, current_column USING rel;
        is_citus := coalesce(is_citus, false);
        IF is_citus AND current_column IS NOT DISTINCT FROM t.col THEN
            object := rel::pg_catalog.text; action := 'unchanged: distributed by ' || t.col;
            RETURN NEXT;
            CONTINUE;
        ELSIF is_citus THEN
            RAISE EXCEPTION 'table % is already a Citus table, distributed by %',
                            rel, coalesce(current_column, '(none: reference or local table)')
                USING ERRCODE = '0A000',
                      DETAIL = pg_catalog.format('idem_distribute() distributes it by %s.', t.col),
                      HINT = 'The extension''s views depend on its tables, so Citus cannot '
                             'undistribute them: recreate the extension and call idem_distribute().';
        END IF;
        IF t.colocate IS NULL THEN
            EXECUTE 'SELECT pg_catalog.create_distributed_table($1, $2)' USING rel, t.col;
        ELSIF t.colocate = 'none' THEN
            EXECUTE 'SELECT pg_catalog.create_distributed_table($1, $2, colocate_with => $3)'
                USING rel, t.col, t.colocate;
        ELSE
            EXECUTE 'SELECT pg_catalog.create_distributed_table($1, $2, colocate_with => $3)'
                USING rel, t.col, pg_catalog.format('%I.%I', tables, t.colocate);
        END IF;
        -- Rows the table had were copied into the shards; the coordinator's local copy goes.
        EXECUTE 'SELECT pg_catalog.truncate_local_data_after_distributing_table($1)' USING rel;
        object := rel::pg_catalog.text; action := 'distributed by ' || t.col;
        RETURN NEXT;
    END LOOP;

    -- The functions delegated to the worker that owns their key: one round trip. Not the
    -- outbox's emit, done, fail and requeue (docs/citus.md, "The outbox").
    FOR f IN SELECT p.oid::pg_catalog.regprocedure AS fn, p.proname,
                    CASE WHEN p.proname IN ('idem_claim', 'idem_complete', 'idem_fail',
                                            'idem_heartbeat', 'idem_lookup') THEN 'scope'
                         WHEN p.proname = 'idem_outbox_next' THEN 'topic'
                         ELSE 'consumer' END AS arg
             FROM pg_catalog.pg_proc p
             WHERE p.pronamespace = ext_schema::pg_catalog.regnamespace
               AND p.proname IN ('idem_claim', 'idem_complete', 'idem_fail', 'idem_heartbeat',
                                 'idem_lookup', 'idem_inbox_receive', 'idem_inbox_next',
                                 'idem_inbox_done', 'idem_inbox_fail', 'idem_webhook_receive',
                                 'idem_outbox_next')
             ORDER BY p.proname, p.oid::pg_catalog.regprocedure::pg_catalog.text
    LOOP
        rel := pg_catalog.format('%I.%I', tables, CASE f.arg WHEN 'scope' THEN 'records'
                                                  WHEN 'topic' THEN 'outbox' ELSE 'inbox' END)::pg_catalog.regclass;
        EXECUTE 'SELECT p.colocationid FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = $1'
            INTO want_colocation USING rel;
        want_arg := pg_catalog.array_position((SELECT p.proargnames FROM pg_catalog.pg_proc p
                                    WHERE p.oid = f.fn), f.arg) - 1;
        dist_arg := NULL;
        dist_colocation := NULL;
        EXECUTE 'SELECT o.distribution_argument_index, o.colocationid FROM pg_catalog.pg_dist_object o '
                'WHERE o.classid = ''pg_catalog.pg_proc''::pg_catalog.regclass AND o.objid = $1'
            INTO dist_arg, dist_colocation USING f.fn::pg_catalog.oid;
        IF dist_arg IS NOT DISTINCT FROM want_arg AND dist_colocation IS NOT DISTINCT FROM want_colocation THEN
            object := f.fn::pg_catalog.text; action := 'unchanged: delegated by ' || f.arg;
        ELSE
            EXECUTE 'SELECT pg_catalog.create_distributed_function($1, $2, colocate_with => $3)'
                USING f.fn, f.arg, rel::pg_catalog.text;
            object := f.fn::pg_catalog.text; action := 'delegated by ' || f.arg;
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;

-- idem_purge_batch purges the outbox too (since 0.5); its comment said records or inbox.
COMMENT ON FUNCTION @extschema@.idem_purge_batch(text, integer, tid, boolean, interval) IS
    'One purge step of records, inbox or outbox: at most batch_size expired rows after ctid "after", SKIP LOCKED; last is where to continue (NULL: end of table).';

-- idem_schedule_purge: 0.8 created it inside a DO block, its body indented as that block's; the
-- same body as a function of its own.
CREATE OR REPLACE FUNCTION @extschema@.idem_schedule_purge(
    schedule pg_catalog.text DEFAULT '*/5 * * * *',
    database pg_catalog.name DEFAULT pg_catalog.current_database(),
    batch_size integer DEFAULT 1000, run_as pg_catalog.name DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    job_name pg_catalog.text;
    command pg_catalog.text;
    cron_sql pg_catalog.text;
    jobid bigint;
    job_user pg_catalog.name := COALESCE(run_as, current_user::pg_catalog.name);
BEGIN
    IF schedule IS NULL OR database IS NULL OR batch_size IS NULL THEN
        RAISE EXCEPTION '% must not be null',
            CASE WHEN schedule IS NULL THEN 'schedule'
                 WHEN database IS NULL THEN 'database' ELSE 'batch_size' END
            USING ERRCODE = '22004';
    END IF;
    IF batch_size OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION 'batch_size must be positive' USING ERRCODE = '22023';
    END IF;
    IF run_as IS NOT NULL AND NOT EXISTS (SELECT FROM pg_catalog.pg_roles r
                                          WHERE r.rolname OPERATOR(pg_catalog.=) run_as) THEN
        RAISE EXCEPTION 'role "%" does not exist', run_as USING ERRCODE = '42704';
    END IF;
    job_name := 'idempotency-purge:' OPERATOR(pg_catalog.||) database;
    command := pg_catalog.format(
        'DO $idem_purge$DECLARE deleted bigint; BEGIN '
        'PERFORM pg_catalog.set_config(''search_path'', ''pg_catalog, pg_temp'', true); '
        'IF NOT EXISTS (SELECT FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_extension e '
        'ON e.oid OPERATOR(pg_catalog.=) d.refobjid WHERE e.extname OPERATOR(pg_catalog.=) ''idempotency'' '
        'AND d.deptype OPERATOR(pg_catalog.=) ''e'' '
        'AND d.classid OPERATOR(pg_catalog.=) ''pg_catalog.pg_proc''::pg_catalog.regclass '
        'AND d.objid OPERATOR(pg_catalog.=) pg_catalog.to_regprocedure(%L)) THEN '
        'RAISE EXCEPTION ''idempotency is not installed in schema %% of database %%: nothing purged'', '
        '%L, pg_catalog.current_database() USING ERRCODE = ''55000'', '
        'HINT = ''CREATE EXTENSION idempotency in this database, or remove the job with idem_unschedule_purge.''; '
        'END IF; '
        'CALL %I.idem_purge_loop(%s, interval ''4 minutes'', false, interval ''0'', interval ''0'', deleted); '
        'END$idem_purge$',
        pg_catalog.quote_ident('@extschema@') OPERATOR(pg_catalog.||)
            '.idem_purge_loop(integer,interval,boolean,interval,interval,bigint)',
        '@extschema@', '@extschema@', batch_size);
    cron_sql := pg_catalog.format('SELECT %I.idem_schedule_purge(%L, %L, %s%s);', '@extschema@',
                                  schedule, database, batch_size,
                                  CASE WHEN run_as IS NULL THEN ''
                                       ELSE pg_catalog.format(', run_as => %L', run_as) END);
    PERFORM @extschema@.idem_require_pg_cron(cron_sql);
    -- one job per database: the same name under another user is replaced (pg_cron keys its
    -- jobs by name and user); only a superuser may touch another user's job
    IF EXISTS (SELECT FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) current_user
               AND r.rolsuper) THEN
        EXECUTE 'SELECT cron.unschedule(j.jobid) FROM cron.job j WHERE j.jobname = $1 AND j.username <> $2'
            USING job_name, job_user::pg_catalog.text;
    END IF;
    IF run_as IS NULL AND database OPERATOR(pg_catalog.=) pg_catalog.current_database() THEN
        EXECUTE 'SELECT cron.schedule($1, $2, $3)' INTO jobid
            USING job_name, schedule, command;
    ELSE
        EXECUTE 'SELECT cron.schedule_in_database($1, $2, $3, $4, $5)' INTO jobid
            USING job_name, schedule, command, database::pg_catalog.text, job_user::pg_catalog.text;
    END IF;
    RETURN jobid;
END
$$;
