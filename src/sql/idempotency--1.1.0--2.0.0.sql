-- idempotency 1.1.0 -> 2.0.0 (committed; the Makefile installs it as it is). 2.0.0 moves every
-- function, procedure, view and type of the extension from the schema 1.x was created in
-- (public, unless CREATE EXTENSION named another) into schema idempotency, beside the tables,
-- where only the extension's owner may create: no role that owns the old schema (on PostgreSQL
-- 15 and later, the database owner owns public) can put an overload beside a function that a
-- superuser, an operator, the pg_cron job or a later update calls (docs/security.md "The
-- database owner"). A 1.1.0 database updated with it has the catalog of a fresh 2.0.0
-- installation (src/sql/idempotency.sql): test/run-all upgrade. CHANGELOG.md "2.0.0" and
-- docs/operations.md "Upgrades" say what applications change (search_path or qualified names).
\echo Use "ALTER EXTENSION idempotency UPDATE TO '2.0.0'" to load this file. \quit

-- Nothing below is looked up through the old schema: the search path is pg_catalog's alone, and
-- the objects are found by their membership in the extension (pg_depend), not by name.
SELECT pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);

-- The move ----------------------------------------------------------------------------------------
-- Every member in the extension's schema (extnamespace) goes to schema idempotency, which 1.x
-- created as a member; regprocedure, regclass and regtype print qualified names under this search
-- path. Then the extension's own schema becomes pg_catalog, as a fresh installation records it
-- (the control file's schema): ALTER EXTENSION SET SCHEMA cannot do it (the extension is not
-- relocatable, and its tables were never in its schema), so pg_extension is updated directly,
-- and the extension's dependency on the old schema goes (none is recorded on pg_catalog).
DO $$
DECLARE
    ext pg_catalog.oid;
    old_nsp pg_catalog.oid;
    nsp pg_catalog.oid;
    o pg_catalog.record;
BEGIN
    SELECT e.oid, e.extnamespace INTO STRICT ext, old_nsp FROM pg_catalog.pg_extension e
    WHERE e.extname OPERATOR(pg_catalog.=) 'idempotency';
    SELECT n.oid INTO nsp FROM pg_catalog.pg_namespace n
    JOIN pg_catalog.pg_depend d ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_namespace'::pg_catalog.regclass
         AND d.objid OPERATOR(pg_catalog.=) n.oid AND d.refobjid OPERATOR(pg_catalog.=) ext
         AND d.deptype OPERATOR(pg_catalog.=) 'e'
    WHERE n.nspname OPERATOR(pg_catalog.=) 'idempotency';
    IF nsp IS NULL THEN
        RAISE EXCEPTION 'schema idempotency is not a member of extension idempotency'
            USING ERRCODE = '55000';
    END IF;
    IF old_nsp OPERATOR(pg_catalog.<>) nsp THEN
        FOR o IN SELECT p.oid::pg_catalog.regprocedure AS fn FROM pg_catalog.pg_proc p
                 JOIN pg_catalog.pg_depend d ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
                      AND d.objid OPERATOR(pg_catalog.=) p.oid AND d.refobjid OPERATOR(pg_catalog.=) ext
                      AND d.deptype OPERATOR(pg_catalog.=) 'e'
                 WHERE p.pronamespace OPERATOR(pg_catalog.=) old_nsp
        LOOP
            EXECUTE pg_catalog.format('ALTER ROUTINE %s SET SCHEMA idempotency', o.fn);
        END LOOP;
        FOR o IN SELECT c.oid::pg_catalog.regclass AS v FROM pg_catalog.pg_class c
                 JOIN pg_catalog.pg_depend d ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
                      AND d.objid OPERATOR(pg_catalog.=) c.oid AND d.refobjid OPERATOR(pg_catalog.=) ext
                      AND d.deptype OPERATOR(pg_catalog.=) 'e'
                 WHERE c.relnamespace OPERATOR(pg_catalog.=) old_nsp AND c.relkind OPERATOR(pg_catalog.=) 'v'
        LOOP
            EXECUTE pg_catalog.format('ALTER VIEW %s SET SCHEMA idempotency', o.v);
        END LOOP;
        FOR o IN SELECT t.oid::pg_catalog.regtype AS ty FROM pg_catalog.pg_type t
                 JOIN pg_catalog.pg_depend d ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_type'::pg_catalog.regclass
                      AND d.objid OPERATOR(pg_catalog.=) t.oid AND d.refobjid OPERATOR(pg_catalog.=) ext
                      AND d.deptype OPERATOR(pg_catalog.=) 'e'
                 WHERE t.typnamespace OPERATOR(pg_catalog.=) old_nsp
                   -- from PostgreSQL 17 on, array types and the row types of views are members
                   -- too: they move with their element type and their view
                   AND t.typcategory OPERATOR(pg_catalog.<>) 'A'
                   AND (t.typrelid OPERATOR(pg_catalog.=) 0
                        OR (SELECT c.relkind FROM pg_catalog.pg_class c
                            WHERE c.oid OPERATOR(pg_catalog.=) t.typrelid) OPERATOR(pg_catalog.=) 'c')
        LOOP
            EXECUTE pg_catalog.format('ALTER TYPE %s SET SCHEMA idempotency', o.ty);
        END LOOP;
        IF EXISTS (SELECT FROM pg_catalog.pg_depend d
                   WHERE d.refobjid OPERATOR(pg_catalog.=) ext AND d.deptype OPERATOR(pg_catalog.=) 'e'
                     AND (pg_catalog.pg_identify_object(d.classid, d.objid, d.objsubid)).schema
                         OPERATOR(pg_catalog.=) (SELECT n.nspname FROM pg_catalog.pg_namespace n
                                                 WHERE n.oid OPERATOR(pg_catalog.=) old_nsp)) THEN
            RAISE EXCEPTION 'a member of extension idempotency is still in schema %',
                old_nsp::pg_catalog.regnamespace USING ERRCODE = '55000';
        END IF;
    END IF;
    UPDATE pg_catalog.pg_extension e SET extnamespace = 'pg_catalog'::pg_catalog.regnamespace
    WHERE e.oid OPERATOR(pg_catalog.=) ext;
    DELETE FROM pg_catalog.pg_depend d
    WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
      AND d.objid OPERATOR(pg_catalog.=) ext
      AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_namespace'::pg_catalog.regclass
      AND d.deptype OPERATOR(pg_catalog.=) 'n';
END
$$;

-- Schema idempotency: PUBLIC may look names up in it (the functions are there now), never create.
GRANT USAGE ON SCHEMA idempotency TO PUBLIC;
COMMENT ON SCHEMA idempotency IS
    'The idempotency extension: its idem_* functions, procedures, views and types, and its tables (use the functions, not the tables). Only the extension''s owner may create in it.';

-- The routines written in PL/pgSQL named the old schema in their bodies (@extschema@): each is
-- defined again as the install script defines it. Their grants and comments stay.
CREATE OR REPLACE FUNCTION idempotency.idem_purge(
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
            step := idempotency.idem_purge_batch(targets[i], batch_size, pos[i], include_stuck,
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

CREATE OR REPLACE PROCEDURE idempotency.idem_purge_loop(
    batch_size integer DEFAULT 1000, max_duration interval DEFAULT '4 minutes',
    include_stuck boolean DEFAULT false, stuck_older_than interval DEFAULT '0',
    pause interval DEFAULT '0', INOUT deleted bigint DEFAULT NULL)
LANGUAGE plpgsql
AS $$
DECLARE
    targets constant pg_catalog.text[] := ARRAY['records', 'inbox', 'outbox'];
    pos pg_catalog.tid[] := ARRAY['(0,0)', '(0,0)', '(0,0)']::pg_catalog.tid[];
    step pg_catalog.record;
    deadline pg_catalog.timestamptz;
    more boolean;
    distributed boolean := false;
    w pg_catalog.record;
    here bigint;
BEGIN
    -- every transaction of this procedure starts with the pinned search path (a procedure that
    -- commits cannot have a SET clause); every name below is qualified as well
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
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
                                    'idempotency', batch_size, max_duration, include_stuck, stuck_older_than)
        LOOP
            IF w.success AND w.result OPERATOR(pg_catalog.~) '^[0-9]+$' THEN
                deleted := deleted OPERATOR(pg_catalog.+) w.result::bigint;
            ELSE
                RAISE WARNING 'idem_purge_loop: the purge of worker %:% failed: %', w.nodename, w.nodeport, w.result;
            END IF;
        END LOOP;
        CALL idempotency.idem_purge_shards(batch_size, max_duration, include_stuck, stuck_older_than, here);
        deleted := deleted OPERATOR(pg_catalog.+) here;
        RETURN;
    END IF;
    deadline := pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) max_duration;
    deleted := 0;
    LOOP
        more := false;
        FOR i IN 1 .. pg_catalog.array_length(targets, 1) LOOP
            CONTINUE WHEN pos[i] IS NULL;
            step := idempotency.idem_purge_batch(targets[i], batch_size, pos[i], include_stuck,
                                                 stuck_older_than);
            deleted := deleted OPERATOR(pg_catalog.+) step.deleted;
            pos[i] := step.last;
            more := more OR step.last IS NOT NULL;
        END LOOP;
        COMMIT;
        PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
        EXIT WHEN NOT more OR pg_catalog.clock_timestamp() OPERATOR(pg_catalog.>=) deadline;
        IF pause OPERATOR(pg_catalog.>) interval '0' THEN
            PERFORM pg_catalog.pg_sleep(pg_catalog.date_part('epoch', pause));
        END IF;
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION idempotency.idem_require_pg_cron(cron_sql pg_catalog.text DEFAULT NULL)
RETURNS pg_catalog.void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    cron_db pg_catalog.text;
    readable boolean := true;
    here boolean := EXISTS (SELECT FROM pg_catalog.pg_extension x
                            WHERE x.extname OPERATOR(pg_catalog.=) 'pg_cron');
BEGIN
    BEGIN
        cron_db := pg_catalog.current_setting('cron.database_name', true);
    EXCEPTION WHEN insufficient_privilege THEN
        readable := false;
    END;
    IF NOT readable THEN
        IF here THEN
            RETURN;
        END IF;
        RAISE EXCEPTION 'pg_cron jobs are managed from the cron database (cron.database_name), not "%"',
                        pg_catalog.current_database()
            USING ERRCODE = '55000',
                  DETAIL = 'pg_cron is not installed in this database; only a superuser may read '
                           'cron.database_name.',
                  HINT = CASE WHEN cron_sql IS NULL THEN 'Connect to the cron database.'
                              ELSE pg_catalog.format('Run in the cron database: %s', cron_sql) END;
    END IF;
    IF cron_db IS NULL OR cron_db OPERATOR(pg_catalog.=) '' THEN
        RAISE EXCEPTION 'pg_cron is not loaded'
            USING ERRCODE = '55000',
                  HINT = 'Add pg_cron to shared_preload_libraries, set cron.database_name, '
                         'restart the server, and run CREATE EXTENSION pg_cron in that database; '
                         'or run CALL idempotency.idem_purge_loop() from any other scheduler.';
    END IF;
    IF pg_catalog.current_database() OPERATOR(pg_catalog.<>) cron_db THEN
        RAISE EXCEPTION 'pg_cron jobs are managed from database "%", not "%"',
                        cron_db, pg_catalog.current_database()
            USING ERRCODE = '55000',
                  DETAIL = 'pg_cron lives in one database (cron.database_name) and runs jobs '
                           'in other databases with cron.schedule_in_database.',
                  HINT = CASE WHEN cron_sql IS NULL THEN pg_catalog.format('Connect to database "%s".', cron_db)
                              ELSE pg_catalog.format('Run in database "%s": %s', cron_db, cron_sql) END;
    END IF;
    IF NOT here THEN
        RAISE EXCEPTION 'extension pg_cron is not installed in database "%"', cron_db
            USING ERRCODE = '55000',
                  HINT = pg_catalog.format('Run CREATE EXTENSION pg_cron in database "%s".', cron_db);
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION idempotency.idem_schedule_purge(
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
        pg_catalog.quote_ident('idempotency') OPERATOR(pg_catalog.||)
            '.idem_purge_loop(integer,interval,boolean,interval,interval,bigint)',
        'idempotency', 'idempotency', batch_size);
    cron_sql := pg_catalog.format('SELECT %I.idem_schedule_purge(%L, %L, %s%s);', 'idempotency',
                                  schedule, database, batch_size,
                                  CASE WHEN run_as IS NULL THEN ''
                                       ELSE pg_catalog.format(', run_as => %L', run_as) END);
    PERFORM idempotency.idem_require_pg_cron(cron_sql);
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

CREATE OR REPLACE FUNCTION idempotency.idem_unschedule_purge(
    database pg_catalog.name DEFAULT pg_catalog.current_database())
RETURNS boolean
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    job_name pg_catalog.text;
    jobs bigint[];
BEGIN
    IF database IS NULL THEN
        RAISE EXCEPTION 'database must not be null' USING ERRCODE = '22004';
    END IF;
    -- a job is a row of the primary's cron.job: refused on a standby like every write (pg_cron's
    -- own error there has no SQLSTATE of its own, XX000)
    IF pg_catalog.pg_is_in_recovery() THEN
        RAISE EXCEPTION 'cannot execute idem_unschedule_purge on a standby'
            USING ERRCODE = '25006', HINT = 'Run it on the primary.';
    END IF;
    job_name := 'idempotency-purge:' OPERATOR(pg_catalog.||) database;
    PERFORM idempotency.idem_require_pg_cron(pg_catalog.format('SELECT %I.idem_unschedule_purge(%L);',
                                                               'idempotency', database));
    EXECUTE 'SELECT pg_catalog.array_agg(j.jobid) FROM cron.job j WHERE j.jobname = $1 '
            'AND (j.username = current_user OR EXISTS (SELECT FROM pg_catalog.pg_roles r '
            'WHERE r.rolname = current_user AND r.rolsuper))'
        INTO jobs USING job_name;
    IF jobs IS NULL THEN
        RETURN false;
    END IF;
    EXECUTE 'SELECT cron.unschedule(x) FROM pg_catalog.unnest($1) x' USING jobs;
    RETURN true;
END
$$;

CREATE OR REPLACE FUNCTION idempotency.idem_bind(kind pg_catalog.text, prefix pg_catalog.text, role pg_catalog.regrole)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    made boolean;
BEGIN
    IF kind IS NULL OR prefix IS NULL OR role IS NULL THEN
        RAISE EXCEPTION 'kind, prefix and role must not be null' USING ERRCODE = '22004';
    END IF;
    IF kind OPERATOR(pg_catalog.<>) ALL (ARRAY['scope', 'consumer', 'topic']) THEN
        RAISE EXCEPTION 'invalid kind "%"', kind USING ERRCODE = '22023',
            HINT = 'A binding is of kind scope, consumer or topic.';
    END IF;
    INSERT INTO idempotency.bindings AS b (kind, prefix, role) VALUES (kind, prefix, role)
    ON CONFLICT ON CONSTRAINT bindings_pkey DO UPDATE SET role = excluded.role
    RETURNING b.xmax OPERATOR(pg_catalog.=) '0'::pg_catalog.xid INTO made;
    RETURN made;
END
$$;

CREATE OR REPLACE FUNCTION idempotency.idem_unbind(kind pg_catalog.text, prefix pg_catalog.text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n bigint;
BEGIN
    IF kind IS NULL OR prefix IS NULL THEN
        RAISE EXCEPTION 'kind and prefix must not be null' USING ERRCODE = '22004';
    END IF;
    DELETE FROM idempotency.bindings AS b
    WHERE b.kind OPERATOR(pg_catalog.=) idem_unbind.kind
      AND b.prefix OPERATOR(pg_catalog.=) idem_unbind.prefix;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n OPERATOR(pg_catalog.>) 0;
END
$$;

CREATE OR REPLACE FUNCTION idempotency.idem_distribute(OUT object pg_catalog.text, OUT action pg_catalog.text)
RETURNS SETOF pg_catalog.record
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- the tables are in schema idempotency, the functions in the extension's schema
    ext_schema pg_catalog.text := 'idempotency';
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
                         '(SELECT citus_add_node(host, port)), then call idempotency.idem_distribute() there.';
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
                             'undistribute them: recreate the extension and call idempotency.idem_distribute().';
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

CREATE OR REPLACE PROCEDURE idempotency.idem_purge_shards(
    batch_size integer DEFAULT 1000, max_duration interval DEFAULT '4 minutes',
    include_stuck boolean DEFAULT false, stuck_older_than interval DEFAULT '0',
    INOUT deleted bigint DEFAULT NULL)
LANGUAGE plpgsql
AS $$
DECLARE
    shards pg_catalog.text[];
    tables pg_catalog.text[];
    done pg_catalog.bool[];
    n bigint;
    t pg_catalog.timestamptz;
    deadline pg_catalog.timestamptz;
    more boolean;
BEGIN
    -- every transaction of this procedure starts with the pinned search path (a procedure that
    -- commits cannot have a SET clause); every name below is qualified as well
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    IF batch_size IS NULL OR max_duration IS NULL OR include_stuck IS NULL OR stuck_older_than IS NULL THEN
        RAISE EXCEPTION 'arguments must not be null' USING ERRCODE = '22004';
    END IF;
    IF batch_size OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION 'batch_size must be positive' USING ERRCODE = '22023';
    END IF;
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_placement') IS NULL THEN
        RAISE EXCEPTION 'Citus is not installed in database "%"', pg_catalog.current_database()
            USING ERRCODE = '0A000', HINT = 'Without Citus, CALL idempotency.idem_purge_loop() purges the tables.';
    END IF;
    EXECUTE 'SELECT pg_catalog.array_agg(pg_catalog.shard_name(s.logicalrelid, s.shardid) ORDER BY s.shardid), '
            'pg_catalog.array_agg(c.relname::pg_catalog.text ORDER BY s.shardid) '
            'FROM pg_catalog.pg_dist_shard s JOIN pg_catalog.pg_dist_placement p ON p.shardid OPERATOR(pg_catalog.=) s.shardid '
            'JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) s.logicalrelid '
            'WHERE s.logicalrelid OPERATOR(pg_catalog.=) ANY (ARRAY[''idempotency.records'', ''idempotency.inbox'', '
            '''idempotency.outbox'']::pg_catalog.regclass[]) '
            'AND p.groupid OPERATOR(pg_catalog.=) (SELECT g.groupid FROM pg_catalog.pg_dist_local_group g)'
        INTO shards, tables;
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
            -- shard_name() quotes the name it returns; the condition is a constant of this
            -- procedure per table (the rows idem_purge_batch deletes on one node)
            EXECUTE pg_catalog.format(
                'WITH d AS (DELETE FROM %1$s AS r WHERE r.ctid OPERATOR(pg_catalog.=) ANY '
                '(ARRAY(SELECT s.ctid FROM %1$s AS s WHERE s.expires_at OPERATOR(pg_catalog.<) $2 AND %2$s '
                'LIMIT $1 FOR UPDATE SKIP LOCKED)) RETURNING 1) SELECT pg_catalog.count(*) FROM d',
                shards[i],
                CASE WHEN tables[i] OPERATOR(pg_catalog.=) 'records'
                     THEN '(s.status OPERATOR(pg_catalog.<>) ''processing'' OR ($3 AND s.lease_expires_at '
                          'OPERATOR(pg_catalog.<) $4 AND s.lease_expires_at OPERATOR(pg_catalog.<) $2))'
                     WHEN tables[i] OPERATOR(pg_catalog.=) 'inbox'
                     THEN 's.status OPERATOR(pg_catalog.=) ANY (''{done,failed,stale}''::pg_catalog.text[])'
                     ELSE 's.status OPERATOR(pg_catalog.=) ''done''' END)
                INTO n USING batch_size, t, include_stuck, t OPERATOR(pg_catalog.-) stuck_older_than;
            deleted := deleted OPERATOR(pg_catalog.+) n;
            done[i] := n OPERATOR(pg_catalog.<) batch_size;
            more := more OR NOT done[i];
        END LOOP;
        COMMIT;
        PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
        EXIT WHEN NOT more OR pg_catalog.clock_timestamp() OPERATOR(pg_catalog.>=) deadline;
    END LOOP;
END
$$;

-- Two comments that name a statement to run: now with the schema.
COMMENT ON FUNCTION idempotency.idem_purge(integer, integer, boolean, interval) IS
    'Deletes expired finished records, settled inbox entries and done outbox events past idempotency.outbox_ttl in bounded SKIP LOCKED batches (one transaction); returns the count. For scheduled purging use CALL idempotency.idem_purge_loop().';
COMMENT ON PROCEDURE idempotency.idem_purge_shards(integer, interval, boolean, interval, bigint) IS
    'Citus: purges the shards of records, inbox and outbox that this node holds (finished records past their TTL, settled inbox entries, done outbox events past idempotency.outbox_ttl), in bounded SKIP LOCKED batches, committing after every round; CALL idempotency.idem_purge_loop() on the coordinator runs it on every worker.';

-- The outbox's per-key lock ----------------------------------------------------------------------
-- The per-key lock's secret (docs/security.md "What pg_locks shows"). An emit with a key locks
-- the first 8 bytes of HMAC-SHA256(secret, topic, NUL, key) as an advisory lock: pg_locks, which
-- every role may read, then tells no role which topic and key are being emitted, and a guess
-- cannot be confirmed without the secret. One row, drawn at installation from the server's
-- strong random source (gen_random_uuid: 244 random bits); readable by the extension's owner
-- only, and not dumped (a restored database draws its own, which changes no stored state).
CREATE TABLE idempotency.outbox_key_lock (
    one    boolean PRIMARY KEY DEFAULT true CHECK (one),
    secret bytea   NOT NULL CHECK (pg_catalog.octet_length(secret) = 32)
);
INSERT INTO idempotency.outbox_key_lock (secret)
SELECT pg_catalog.sha256(pg_catalog.convert_to(pg_catalog.gen_random_uuid()::pg_catalog.text
                                               OPERATOR(pg_catalog.||) pg_catalog.gen_random_uuid()::pg_catalog.text,
                                               'UTF8'));
REVOKE ALL ON idempotency.outbox_key_lock FROM PUBLIC;
COMMENT ON TABLE idempotency.outbox_key_lock IS
    'The secret of the outbox''s per-key lock: an emit with a key takes an advisory lock on HMAC-SHA256(secret, topic, key), so pg_locks reveals no topic or key.';

-- The HTTP contract (docs/records.md "The HTTP contract"): what every client package asks the
-- database instead of deciding itself. idem_http_begin reads the request (the principal, the
-- operation, the Idempotency-Key header, the raw body) and claims; idem_http_end stores the
-- handler's answer or says to release it; idem_http_release releases; idem_http_errors is the
-- one map from a SQLSTATE to the answer. Begin, end and release are C functions that call the
-- claim, the complete and the fail directly (src/http_contract.cpp): EXECUTE on idem_http_begin
-- is the right to claim a key of the scope it derives, on idem_http_end to complete it, on
-- idem_http_release to fail it; none of them needs EXECUTE on idem_claim, idem_complete or
-- idem_fail, and a scope bound to another role refuses them as it refuses those (docs/tenants.md).
CREATE TYPE idempotency.idem_http_begin_result AS (
    scope     pg_catalog.text,
    key       pg_catalog.text,
    attempt   integer,
    run       boolean,
    reclaimed boolean,
    status    integer,
    headers   pg_catalog.jsonb,
    body      pg_catalog.bytea
);
COMMENT ON TYPE idempotency.idem_http_begin_result IS
    'Result row of idem_http_begin: run true with scope, key and attempt (the fencing token) when the handler runs (reclaimed: an earlier attempt''s effect is unknown, reconcile); run false with the answer to send (status, headers, body) otherwise.';

CREATE FUNCTION idempotency.idem_http_problem(status integer, detail pg_catalog.text,
                                              retry_after integer DEFAULT NULL)
RETURNS idempotency.idem_http_answer_result
AS 'MODULE_PATHNAME', 'idem_http_problem' LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION idempotency.idem_http_problem(integer, text, integer) IS
    'An RFC 9457 problem answer as the HTTP contract words it: the status, Content-Type: application/problem+json (and Retry-After when given) and the body {"type":"about:blank","title":<reason phrase>,"status":...,"detail":...}.';

CREATE FUNCTION idempotency.idem_http_scope(principal pg_catalog.text, operation pg_catalog.text,
                                            shared_key_space boolean DEFAULT false)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'idem_http_scope' LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION idempotency.idem_http_scope(text, text, boolean) IS
    'The scope of an HTTP request''s record: the principal (its %, / and * percent-encoded), a slash, the operation (e.g. user:42/POST /v1/payments); with shared_key_space every principal shares *\/operation; NULL without a principal.';

CREATE FUNCTION idempotency.idem_http_begin(
    principal pg_catalog.text, operation pg_catalog.text, key_header pg_catalog.text,
    body pg_catalog.bytea, lease interval DEFAULT NULL, ttl interval DEFAULT NULL,
    shared_key_space boolean DEFAULT false)
RETURNS idempotency.idem_http_begin_result
AS 'MODULE_PATHNAME', 'idem_http_begin' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idempotency.idem_http_begin(text, text, text, bytea, interval, interval, boolean) IS
    'The start of an idempotent HTTP request: the scope from the principal and the operation, the key from the Idempotency-Key header, the fingerprint of the raw body (I-JSON, or empty), and a claim that never waits; run true: run the handler with the attempt; else the answer to send (400 for a missing or malformed header or body, 403 without a principal, the replay, 409 with Retry-After for a request in flight, 422 for another body).';

CREATE FUNCTION idempotency.idem_http_stored(status integer)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_http_stored' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION idempotency.idem_http_stored(integer) IS
    'Whether an answer of this status is the request''s result, stored and replayed: 2xx, 3xx and 4xx but 401, 403, 408, 409, 423, 424, 425 and 429 (the same request may succeed later); 1xx and 5xx are not (the key is released for a retry).';

CREATE FUNCTION idempotency.idem_http_end(
    scope pg_catalog.text, key pg_catalog.text, attempt integer, status integer,
    headers pg_catalog.jsonb DEFAULT NULL, body pg_catalog.bytea DEFAULT NULL,
    resource_id pg_catalog.text DEFAULT NULL,
    stored_headers pg_catalog.text[] DEFAULT '{Content-Type,Location}')
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_http_end' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idempotency.idem_http_end(text, text, integer, integer, jsonb, bytea, text, text[]) IS
    'The end of an idempotent HTTP request whose handler ran: true when its answer is the result (idem_http_stored), stored byte for byte with the stored_headers (named as the list spells them) and resource_id (default: the last path segment of Location) in the handler''s transaction (commit it); false when it is not (roll back, then idem_http_release). Errors of idem_complete (IK002, IK003, 54000, 22023) as idem_http_errors maps them.';

CREATE FUNCTION idempotency.idem_http_release(scope pg_catalog.text, key pg_catalog.text,
                                              attempt integer)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_http_release' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idempotency.idem_http_release(text, text, integer) IS
    'Releases the key of an attempt whose answer is not stored (idem_http_end false, an exception, an error), after its transaction rolled back: a processing record of this attempt becomes failed and retryable (two-phase); false when there is nothing of this attempt to release.';

CREATE FUNCTION idempotency.idem_http_errors(
    OUT sqlstate pg_catalog.text, OUT status integer, OUT headers pg_catalog.jsonb,
    OUT body pg_catalog.bytea, OUT retryable boolean)
RETURNS SETOF pg_catalog.record
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp
AS $$
SELECT e.sqlstate, p.status, p.headers, p.body, e.retryable
FROM (VALUES
    ('IK002', 409, 1,    true,  'Another attempt took this Idempotency-Key over; retry to get its answer.'),
    ('IK003', NULL, NULL, false, NULL),
    ('IK001', 500, NULL, false, 'The record of this request is missing.'),
    ('54000', 500, NULL, false, 'The answer is too large to store.'),
    ('25P02', 500, NULL, false, 'The request''s transaction failed earlier: an error was caught without a savepoint.'),
    ('25006', 503, 1,    true,  'The database is read-only; retry.'),
    ('40001', 503, 1,    true,  'The request conflicted with another; retry.'),
    ('40P01', 503, 1,    true,  'The request conflicted with another; retry.'),
    ('55P03', 503, 1,    true,  'The request conflicted with another; retry.'),
    ('57014', 503, 1,    true,  'The request took too long; retry.'),
    ('53300', 503, 1,    true,  'The database is unavailable; retry.'),
    ('57P01', 503, 1,    true,  'The database is unavailable; retry.'),
    ('57P02', 503, 1,    true,  'The database is unavailable; retry.'),
    ('57P03', 503, 1,    true,  'The database is unavailable; retry.'),
    ('08',    503, 1,    true,  'The database is unavailable; retry.'),
    (NULL,    500, NULL, false, 'The request failed.')
) AS e(sqlstate, status, retry_after, retryable, detail)
LEFT JOIN LATERAL idempotency.idem_http_problem(e.status, e.detail, e.retry_after) p ON e.status IS NOT NULL
$$;
COMMENT ON FUNCTION idempotency.idem_http_errors() IS
    'The one map from an error to the HTTP answer, read once by each client package: sqlstate (five characters; two for a class; NULL for anything else, a handler''s exception among them), the answer (status, headers, body), retryable (a retry with the same key is safe and may succeed). IK003 has no answer of its own: answer idem_http_answer(scope, key), or the IK002 answer when that gives NULLs.';

REVOKE EXECUTE ON FUNCTION
    idempotency.idem_http_begin(text, text, text, bytea, interval, interval, boolean),
    idempotency.idem_http_end(text, text, integer, integer, jsonb, bytea, text, text[]),
    idempotency.idem_http_release(text, text, integer)
FROM PUBLIC;

-- pg_cron jobs scheduled by 1.x call the procedure in the old schema. Where pg_cron lives in this
-- database, each such job is scheduled again by idem_schedule_purge (same schedule, database,
-- batch size and user). A job kept by another database's pg_cron fails with 55000 (its check
-- finds no idem_purge_loop in the old schema) until idem_schedule_purge is run there again
-- (docs/operations.md "Upgrades").
DO $$
DECLARE
    j pg_catalog.record;
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension x WHERE x.extname OPERATOR(pg_catalog.=) 'pg_cron')
       OR pg_catalog.current_setting('cron.database_name', true) IS DISTINCT FROM pg_catalog.current_database() THEN
        RETURN;
    END IF;
    FOR j IN EXECUTE 'SELECT j.schedule, j.database, j.username, '
                     '(pg_catalog.regexp_match(j.command, ''idem_purge_loop\((\d+), interval''))[1]::integer AS batch '
                     'FROM cron.job j WHERE j.jobname OPERATOR(pg_catalog.=) (''idempotency-purge:'' '
                     'OPERATOR(pg_catalog.||) j.database) AND pg_catalog.strpos(j.command, '
                     '''CALL idempotency.idem_purge_loop('') OPERATOR(pg_catalog.=) 0'
    LOOP
        PERFORM idempotency.idem_schedule_purge(j.schedule, j.database::pg_catalog.name,
                                                COALESCE(j.batch, 1000), j.username::pg_catalog.name);
    END LOOP;
    -- jobs written by hand that call the extension without the schema: found nowhere from now on
    -- (or, worse, found in a schema another role owns); the update says which
    FOR j IN EXECUTE 'SELECT j.jobid, j.jobname, j.database FROM cron.job j '
                     'WHERE j.command OPERATOR(pg_catalog.~) ''(^|[^.a-z_])idem_[a-z_]+\s*\('' '
                     'AND pg_catalog.strpos(j.command, ''idempotency.idem_'') OPERATOR(pg_catalog.=) 0 '
                     'ORDER BY j.jobid'
    LOOP
        RAISE WARNING 'pg_cron job % (%, database %) calls idem_* functions without schema idempotency',
            j.jobid, j.jobname, j.database
            USING HINT = 'Write idempotency.idem_...(...) in its command (cron.alter_job): 2.0.0 moved '
                         'the functions out of public.';
    END LOOP;
END
$$;
