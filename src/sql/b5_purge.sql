
-- Lifecycle (0.8, issue 28): least privilege for scheduled purges ------------------------------
-- 1. The job runs only the extension's own procedure. Before 0.8 it was 'CALL
--    <schema>.idem_purge_loop(batch_size => N)', run in the target database as the user who
--    scheduled it: in a database without the extension (or with it in another schema) it ran
--    whatever procedure of that name someone had planted there. The command is now a DO block
--    that pins the search path, checks that <schema>.idem_purge_loop with its exact signature is
--    a member of extension idempotency in that database, and only then calls it with every
--    argument typed (no other overload can be chosen); otherwise the run fails with 55000 and
--    says why in cron.job_run_details, and nothing else runs.
-- 2. run_as: the job can run as a dedicated role (pg_cron's per-job user) that needs nothing but
--    EXECUTE on idem_purge_loop and idem_purge_batch and LOGIN (docs/lifecycle.md); pg_cron lets
--    only a superuser schedule a job for another role. A job of the same name under another user
--    is replaced, never left beside the new one.
-- The signature gains run_as, so the function is dropped and created again with the EXECUTE
-- grants it had (as 0.6 did for idem_complete) and the extension's initial privileges of a fresh
-- installation (the owner's only).

DO $$
DECLARE
    old_acl pg_catalog.aclitem[];
    fn constant pg_catalog.text := '@extschema@.idem_schedule_purge(text, name, integer, name)';
    g pg_catalog.record;
BEGIN
    SELECT p.proacl INTO old_acl FROM pg_catalog.pg_proc p WHERE p.oid OPERATOR(pg_catalog.=)
        '@extschema@.idem_schedule_purge(text, name, integer)'::pg_catalog.regprocedure;
    DROP FUNCTION @extschema@.idem_schedule_purge(text, name, integer);
    CREATE FUNCTION @extschema@.idem_schedule_purge(
        schedule pg_catalog.text DEFAULT '*/5 * * * *',
        database pg_catalog.name DEFAULT pg_catalog.current_database(),
        batch_size integer DEFAULT 1000, run_as pg_catalog.name DEFAULT NULL)
    RETURNS bigint
    LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
    AS $body$
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
    $body$;
    COMMENT ON FUNCTION @extschema@.idem_schedule_purge(text, name, integer, name) IS
        'Registers or updates the pg_cron job idempotency-purge:<database>, which runs the extension''s idem_purge_loop there (and nothing else: 55000 when it is not installed); run_as: the role the job runs as (a superuser may name another role); run it in the cron database.';
    REVOKE EXECUTE ON FUNCTION @extschema@.idem_schedule_purge(text, name, integer, name) FROM PUBLIC;
    -- the grants users had made on the old signature
    FOR g IN SELECT CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0::pg_catalog.oid THEN 'PUBLIC'
                         ELSE pg_catalog.quote_ident(r.rolname) END AS who, a.is_grantable
             FROM pg_catalog.aclexplode(old_acl) a
             LEFT JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) a.grantee
             WHERE a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'
               AND a.grantee OPERATOR(pg_catalog.<>) a.grantor LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s%s', fn, g.who,
                                  CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
END $$;

-- Removes the pg_cron job of database, whichever user it runs as (another user's only for a
-- superuser, as pg_cron allows); false when there was none.
CREATE OR REPLACE FUNCTION @extschema@.idem_unschedule_purge(
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
    PERFORM @extschema@.idem_require_pg_cron(pg_catalog.format('SELECT %I.idem_unschedule_purge(%L);',
                                                               '@extschema@', database));
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

-- The extension's own initial privileges for the recreated function, as a fresh installation
-- records them (the owner's only): the grants restored above are the users', not the
-- extension's (see src/sql/99_init_privs.sql; pg_dump would otherwise leave them out).
UPDATE pg_catalog.pg_init_privs i
SET initprivs = ARRAY(
    SELECT pg_catalog.makeaclitem(x.grantee, x.grantor, x.privilege_type, x.is_grantable)
    FROM pg_catalog.aclexplode(i.initprivs) x
    WHERE x.grantee OPERATOR(pg_catalog.=) p.proowner)
FROM pg_catalog.pg_proc p
WHERE i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
  AND i.objoid OPERATOR(pg_catalog.=) p.oid
  AND i.privtype OPERATOR(pg_catalog.=) 'e'
  AND p.oid OPERATOR(pg_catalog.=) '@extschema@.idem_schedule_purge(text, name, integer, name)'::pg_catalog.regprocedure;

-- idem_require_pg_cron for a role that is not a superuser (0.8): cron.database_name is a
-- superuser-only setting, and current_setting(name, true) still raised 42501 for such a role,
-- so a member of idempotency_ops could neither schedule nor unschedule (docs/operations.md says
-- it can, in the cron database). A role that may not read the setting learns whether this is
-- the cron database from pg_cron's presence here (CREATE EXTENSION pg_cron succeeds only in the
-- database cron.database_name names); elsewhere the error says to run the call there.
CREATE OR REPLACE FUNCTION @extschema@.idem_require_pg_cron(cron_sql pg_catalog.text DEFAULT NULL)
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
                         'or run CALL idem_purge_loop() from any other scheduler.';
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
