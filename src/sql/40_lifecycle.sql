
-- Lifecycle: stuck operations, retention, purging, pg_cron (README "Lifecycle") ------------------

-- Lists the processing records whose lease ended at least older_than ago: operations whose
-- worker died or hung. Their outcome is unknown, not failed: reconcile each with the downstream
-- provider, then idem_complete / idem_fail it (after reclaiming it with idem_claim).
CREATE FUNCTION idem_stuck(
    older_than interval DEFAULT '0',
    OUT scope text, OUT key text, OUT attempt integer, OUT fingerprint bytea,
    OUT created_at timestamptz, OUT updated_at timestamptz, OUT lease_expires_at timestamptz,
    OUT expires_at timestamptz)
RETURNS SETOF record
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF older_than IS NULL THEN
        RAISE EXCEPTION 'older_than must not be null' USING ERRCODE = '22004';
    END IF;
    IF older_than < interval '0' THEN
        RAISE EXCEPTION 'older_than must not be negative' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
        SELECT r.scope, r.key, r.attempt, r.fingerprint, r.created_at, r.updated_at,
               r.lease_expires_at, r.expires_at
        FROM idempotency.records AS r
        WHERE r.status = 'processing' AND r.lease_expires_at <= clock_timestamp() - older_than
        ORDER BY r.lease_expires_at, r.scope, r.key;
END
$$;
COMMENT ON FUNCTION idem_stuck(interval) IS
    'Processing records whose lease expired at least older_than ago (outcome unknown: reconcile, then complete or fail).';

-- One bounded, non-waiting purge step on one table (records | inbox): deletes at most batch_size
-- expired rows found after ctid "after" and returns how many it deleted and the ctid to continue
-- after (NULL once the end of the table was reached). idem_purge and idem_purge_loop repeat it.
CREATE FUNCTION idem_purge_batch(
    target text, batch_size integer, after tid DEFAULT '(0,0)', include_stuck boolean DEFAULT false,
    stuck_older_than interval DEFAULT '0', OUT deleted integer, OUT last tid)
RETURNS record
AS 'MODULE_PATHNAME', 'idem_purge_batch' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_purge_batch(text, integer, tid, boolean, interval) IS
    'One purge step of records or inbox: at most batch_size expired rows after ctid "after", SKIP LOCKED; last is where to continue (NULL: end of table).';

-- Deletes expired rows in one transaction: finished records past their TTL and settled inbox
-- entries past their retention, at most batch_size rows per table per iteration, until nothing
-- is left or max_batches iterations ran. Never a record with a live lease; stuck records only
-- with include_stuck. Returns the number of rows deleted.
CREATE FUNCTION idem_purge(
    batch_size integer DEFAULT 1000, max_batches integer DEFAULT NULL,
    include_stuck boolean DEFAULT false, stuck_older_than interval DEFAULT '0')
RETURNS bigint
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    targets constant text[] := ARRAY['records', 'inbox'];
    pos tid[] := ARRAY['(0,0)', '(0,0)']::tid[];
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
    'Deletes expired finished records and settled inbox entries in bounded SKIP LOCKED batches (one transaction); returns the count. For scheduled purging use CALL idem_purge_loop().';

-- The same as idem_purge, but commits after every iteration so that no lock is held for longer
-- than one batch; stops when nothing is left or after max_duration. What pg_cron calls. deleted
-- returns the count (CALL idem_purge_loop() shows it).
CREATE PROCEDURE idem_purge_loop(
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
BEGIN
    IF max_duration IS NULL OR pause IS NULL THEN
        RAISE EXCEPTION '% must not be null', CASE WHEN pause IS NULL THEN 'pause' ELSE 'max_duration' END
            USING ERRCODE = '22004';
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
COMMENT ON PROCEDURE idem_purge_loop(integer, interval, boolean, interval, interval, bigint) IS
    'Purges like idem_purge, committing after every batch (no long-held locks), for at most max_duration; the procedure the pg_cron job calls.';

-- Registers (or updates) the pg_cron job 'idempotency-purge:<database>' that runs
-- idem_purge_loop in database on schedule. Run it in the cron database (cron.database_name);
-- from any other database it raises an error whose hint is the exact SQL to run there.
CREATE FUNCTION idem_schedule_purge(
    schedule text DEFAULT '*/5 * * * *', database name DEFAULT current_database(),
    batch_size integer DEFAULT 1000)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    job_name text;
    command text;
    cron_sql text;
    cron_db text;
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
    cron_db := current_setting('cron.database_name', true);
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
                  HINT = format('Run in database "%s": %s', cron_db, cron_sql);
    END IF;
    IF NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'pg_cron') THEN
        RAISE EXCEPTION 'extension pg_cron is not installed in database "%"', cron_db
            USING ERRCODE = '55000',
                  HINT = format('Run CREATE EXTENSION pg_cron in database "%s".', cron_db);
    END IF;
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
CREATE FUNCTION idem_unschedule_purge(database name DEFAULT current_database())
RETURNS boolean
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    job_name text;
    cron_sql text;
    cron_db text;
    found_job boolean;
BEGIN
    IF database IS NULL THEN
        RAISE EXCEPTION 'database must not be null' USING ERRCODE = '22004';
    END IF;
    job_name := 'idempotency-purge:' || database;
    cron_sql := format('SELECT cron.unschedule(%L);', job_name);
    cron_db := current_setting('cron.database_name', true);
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
                  HINT = format('Run in database "%s": %s', cron_db, cron_sql);
    END IF;
    IF NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'pg_cron') THEN
        RAISE EXCEPTION 'extension pg_cron is not installed in database "%"', cron_db
            USING ERRCODE = '55000',
                  HINT = format('Run CREATE EXTENSION pg_cron in database "%s".', cron_db);
    END IF;
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
