
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
