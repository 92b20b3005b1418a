-- idempotency 0.2 -> 0.3 (assembled from src/sql/6*.sql by the Makefile into
-- idempotency--0.2--0.3.sql; CREATE EXTENSION without VERSION runs 0.1, then 0.1 -> 0.2, then
-- this script).
\echo Use "ALTER EXTENSION idempotency UPDATE TO '0.3'" to load this file. \quit

-- Lifecycle: the pg_cron precondition written once ---------------------------------------------
-- 0.1 wrote the same three checks (pg_cron loaded, this is its database, the extension exists)
-- into both idem_schedule_purge and idem_unschedule_purge. They move into one internal helper;
-- the two functions are recreated with the same signatures, behaviour, comments and grants
-- (CREATE OR REPLACE keeps the grants).

-- Raises 55000 unless pg_cron can manage jobs from here: pg_cron is loaded
-- (cron.database_name is set), this is its database, and CREATE EXTENSION pg_cron ran in it.
-- cron_sql, when given, is the statement to run in the cron database (the hint shows it).
-- In the extension's schema and executable by PUBLIC (it reads no stored state): the two
-- functions run with their caller's rights, and a caller who may schedule must reach it.
CREATE FUNCTION @extschema@.idem_require_pg_cron(cron_sql text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    cron_db text := current_setting('cron.database_name', true);
BEGIN
    IF cron_db IS NULL OR cron_db = '' THEN
        RAISE EXCEPTION 'pg_cron is not loaded'
            USING ERRCODE = '55000',
                  HINT = 'Add pg_cron to shared_preload_libraries, set cron.database_name, '
                         'restart the server, and run CREATE EXTENSION pg_cron in that database; '
                         'or run CALL idem_purge_loop() from any other scheduler.';
    END IF;
    IF current_database() <> cron_db THEN
        RAISE EXCEPTION 'pg_cron jobs are managed from database "%", not "%"',
                        cron_db, current_database()
            USING ERRCODE = '55000',
                  DETAIL = 'pg_cron lives in one database (cron.database_name) and runs jobs '
                           'in other databases with cron.schedule_in_database.',
                  HINT = CASE WHEN cron_sql IS NULL THEN format('Connect to database "%s".', cron_db)
                              ELSE format('Run in database "%s": %s', cron_db, cron_sql) END;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'pg_cron') THEN
        RAISE EXCEPTION 'extension pg_cron is not installed in database "%"', cron_db
            USING ERRCODE = '55000',
                  HINT = format('Run CREATE EXTENSION pg_cron in database "%s".', cron_db);
    END IF;
END
$$;
COMMENT ON FUNCTION @extschema@.idem_require_pg_cron(text) IS
    'Checks that pg_cron can manage jobs from this database: raises 55000 unless pg_cron is loaded (cron.database_name), this is its database and the pg_cron extension is installed; cron_sql, when given, is shown in the hint as the statement to run there. idem_schedule_purge and idem_unschedule_purge call it.';

-- Registers (or updates) the pg_cron job 'idempotency-purge:<database>' that runs
-- idem_purge_loop in database on schedule. Run it in the cron database (cron.database_name);
-- from any other database it raises an error whose hint is the exact SQL to run there.
CREATE OR REPLACE FUNCTION idem_schedule_purge(
    schedule text DEFAULT '*/5 * * * *', database name DEFAULT current_database(),
    batch_size integer DEFAULT 1000)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    job_name text;
    command text;
    cron_sql text;
    jobid bigint;
BEGIN
    IF schedule IS NULL OR database IS NULL OR batch_size IS NULL THEN
        RAISE EXCEPTION '% must not be null',
            CASE WHEN schedule IS NULL THEN 'schedule'
                 WHEN database IS NULL THEN 'database' ELSE 'batch_size' END
            USING ERRCODE = '22004';
    END IF;
    IF batch_size < 1 THEN
        RAISE EXCEPTION 'batch_size must be positive' USING ERRCODE = '22023';
    END IF;
    job_name := 'idempotency-purge:' || database;
    command := format('CALL %I.idem_purge_loop(batch_size => %s)', '@extschema@', batch_size);
    cron_sql := format('SELECT cron.schedule_in_database(%L, %L, %L, %L);',
                       job_name, schedule, command, database);
    PERFORM @extschema@.idem_require_pg_cron(cron_sql);
    IF database = current_database() THEN
        EXECUTE 'SELECT cron.schedule($1, $2, $3)' INTO jobid
            USING job_name, schedule, command;
    ELSE
        EXECUTE 'SELECT cron.schedule_in_database($1, $2, $3, $4)' INTO jobid
            USING job_name, schedule, command, database::text;
    END IF;
    RETURN jobid;
END
$$;
COMMENT ON FUNCTION idem_schedule_purge(text, name, integer) IS
    'Registers or updates the pg_cron job idempotency-purge:<database> (CALL idem_purge_loop()); run it in the cron database.';

-- Removes the pg_cron job of database; false when there was none.
CREATE OR REPLACE FUNCTION idem_unschedule_purge(database name DEFAULT current_database())
RETURNS boolean
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    job_name text;
    found_job boolean;
BEGIN
    IF database IS NULL THEN
        RAISE EXCEPTION 'database must not be null' USING ERRCODE = '22004';
    END IF;
    job_name := 'idempotency-purge:' || database;
    PERFORM @extschema@.idem_require_pg_cron(format('SELECT cron.unschedule(%L);', job_name));
    EXECUTE 'SELECT EXISTS (SELECT FROM cron.job WHERE jobname = $1 AND username = current_user)'
        INTO found_job USING job_name;
    IF found_job THEN
        EXECUTE 'SELECT cron.unschedule($1)' USING job_name;
    END IF;
    RETURN found_job;
END
$$;
COMMENT ON FUNCTION idem_unschedule_purge(name) IS
    'Removes the pg_cron job idempotency-purge:<database>; false when it did not exist.';
