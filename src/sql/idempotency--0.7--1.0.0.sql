-- idempotency 0.7 -> 1.0.0 (committed; the Makefile installs it as it is). What 0.8, the security
-- release (issue 28), did to a 0.7 database, then what 1.0.0 changed over 0.8
-- (src/sql/idempotency--0.8--1.0.0.sql does only the latter). A 0.7 database updated with it has
-- the catalog of a fresh 1.0.0 installation (src/sql/idempotency.sql): test/run-all upgrade.
\echo Use "ALTER EXTENSION idempotency UPDATE TO '1.0.0'" to load this file. \quit
-- Owner-context code immune to the caller's names (0.8, issue 28) -------------------------------
-- Every function of the extension written in SQL or PL/pgSQL has SET search_path = pg_catalog,
-- pg_temp since the version that created it; the C functions pin the search path themselves
-- around every statement they run as the extension's owner (src/spi_util.cpp). The two
-- procedures that commit cannot have a SET clause (PostgreSQL refuses transaction control in a
-- procedure with one), and pg_cron runs idem_purge_loop as the user who scheduled it (often a
-- superuser) under the target database's search_path, which that database's owner may set to a
-- schema of its own ahead of pg_catalog (ALTER DATABASE ... SET search_path). They are recreated
-- with every type, function and operator qualified (a CASE x WHEN y compares with the = that
-- the search path finds: written as CASE WHEN x OPERATOR(pg_catalog.=) y), and each of their
-- transactions starts by pinning the search path to pg_catalog, pg_temp (set_config local: it
-- ends with the transaction). CREATE OR REPLACE keeps their grants and comments.

CREATE OR REPLACE PROCEDURE @extschema@.idem_purge_loop(
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
        PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
        EXIT WHEN NOT more OR pg_catalog.clock_timestamp() OPERATOR(pg_catalog.>=) deadline;
        IF pause OPERATOR(pg_catalog.>) interval '0' THEN
            PERFORM pg_catalog.pg_sleep(pg_catalog.date_part('epoch', pause));
        END IF;
    END LOOP;
END
$$;

CREATE OR REPLACE PROCEDURE @extschema@.idem_purge_shards(
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
            USING ERRCODE = '0A000', HINT = 'Without Citus, CALL idem_purge_loop() purges the tables.';
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

-- Tenants apart (issue 28, docs/tenants.md) ------------------------------------------------------
-- Scope prefixes, inbox consumer prefixes and outbox topic prefixes bound to roles. A name that a
-- binding matches (the longest matching prefix of its kind) may be used only by members of the
-- bound role; a name that no binding matches stays open; with no binding, nothing changes. The
-- module reads the table once per backend (src/tenants.cpp) and again when its trigger says
-- that it changed.
CREATE TABLE idempotency.bindings (
    kind   text    NOT NULL CHECK (kind IN ('scope', 'consumer', 'topic')),
    prefix text    NOT NULL,
    role   regrole NOT NULL,
    PRIMARY KEY (kind, prefix)
);
REVOKE ALL ON idempotency.bindings FROM PUBLIC;
COMMENT ON TABLE idempotency.bindings IS
    'Tenants apart: names of a kind (scope, consumer, topic) starting with prefix may be used only by members of role; the longest matching prefix wins, a name no prefix matches stays open. Change it with idem_bind / idem_unbind.';
SELECT pg_catalog.pg_extension_config_dump('idempotency.bindings', '');

-- Every change reaches every backend's cached copy through a relcache invalidation of the table.
CREATE FUNCTION idempotency.idem_bindings_changed() RETURNS pg_catalog.trigger
AS 'MODULE_PATHNAME', 'idem_bindings_changed' LANGUAGE C;
REVOKE EXECUTE ON FUNCTION idempotency.idem_bindings_changed() FROM PUBLIC;
COMMENT ON FUNCTION idempotency.idem_bindings_changed() IS
    'Statement trigger of idempotency.bindings: makes every backend read the bindings again.';
CREATE TRIGGER bindings_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON idempotency.bindings
    FOR EACH STATEMENT EXECUTE FUNCTION idempotency.idem_bindings_changed();
COMMENT ON TRIGGER bindings_changed ON idempotency.bindings IS
    'Every change of the bindings reaches every session (src/tenants.cpp keeps them per backend).';

-- Binds the names of kind starting with prefix to role (a binding of the same kind and prefix is
-- moved to role). True when the binding is new. The extension's owner and superusers only
-- (writing idempotency.bindings takes its privileges).
CREATE FUNCTION idem_bind(kind pg_catalog.text, prefix pg_catalog.text, role pg_catalog.regrole)
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
COMMENT ON FUNCTION idem_bind(text, text, regrole) IS
    'Binds the scopes, inbox consumers or outbox topics (kind) starting with prefix to role: only its members may use them. True when the binding is new, false when an existing one was moved to role.';

-- Removes the binding of kind and prefix. True when there was one.
CREATE FUNCTION idem_unbind(kind pg_catalog.text, prefix pg_catalog.text)
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
COMMENT ON FUNCTION idem_unbind(text, text) IS
    'Removes the binding of kind and prefix: its names are open again (or fall to a shorter bound prefix). True when there was one.';

REVOKE EXECUTE ON FUNCTION idem_bind(text, text, regrole), idem_unbind(text, text) FROM PUBLIC;

-- The bindings, for the extension's owner and superusers.
CREATE VIEW idem_bindings AS
    SELECT b.kind, b.prefix, b.role
    FROM idempotency.bindings AS b
    ORDER BY b.kind, b.prefix;
REVOKE ALL ON idem_bindings FROM PUBLIC;
COMMENT ON VIEW idem_bindings IS
    'The bindings of idempotency.bindings (kind, prefix, role), by kind and prefix.';

-- idem_stuck checks as its caller: from 0.8 it is C, not SECURITY DEFINER (which runs as the
-- owner and cannot tell who called), and lists only the records of scopes the caller may use.
-- CREATE OR REPLACE keeps its grants.
CREATE OR REPLACE FUNCTION idem_stuck(
    older_than interval DEFAULT '0',
    OUT scope pg_catalog.text, OUT key pg_catalog.text, OUT attempt integer,
    OUT fingerprint pg_catalog.bytea, OUT created_at pg_catalog.timestamptz,
    OUT updated_at pg_catalog.timestamptz, OUT lease_expires_at pg_catalog.timestamptz,
    OUT expires_at pg_catalog.timestamptz)
RETURNS SETOF pg_catalog.record
AS 'MODULE_PATHNAME', 'idem_stuck' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION idem_stuck(interval) IS
    'Processing records whose lease expired at least older_than ago (outcome unknown: reconcile, then complete or fail); with scope bindings, only those of scopes the caller may use.';

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
-- The signature gains run_as: the new function is created beside the old one, given the EXECUTE
-- grants the old one had, and the old one dropped; the extension's initial privileges of the new
-- one are then those of a fresh installation (the owner's only).

CREATE FUNCTION @extschema@.idem_schedule_purge(
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
COMMENT ON FUNCTION @extschema@.idem_schedule_purge(text, name, integer, name) IS
    'Registers or updates the pg_cron job idempotency-purge:<database>, which runs the extension''s idem_purge_loop there (and nothing else: 55000 when it is not installed); run_as: the role the job runs as (a superuser may name another role); run it in the cron database.';
REVOKE EXECUTE ON FUNCTION @extschema@.idem_schedule_purge(text, name, integer, name) FROM PUBLIC;

-- the grants users had made on the old signature, which then goes
DO $$
DECLARE
    old_acl pg_catalog.aclitem[];
    fn constant pg_catalog.text := '@extschema@.idem_schedule_purge(text, name, integer, name)';
    g pg_catalog.record;
BEGIN
    SELECT p.proacl INTO old_acl FROM pg_catalog.pg_proc p WHERE p.oid OPERATOR(pg_catalog.=)
        '@extschema@.idem_schedule_purge(text, name, integer)'::pg_catalog.regprocedure;
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
DROP FUNCTION @extschema@.idem_schedule_purge(text, name, integer);

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
-- extension's (src/sql/idempotency.sql, "Initial privileges"; pg_dump would otherwise leave them out).
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
