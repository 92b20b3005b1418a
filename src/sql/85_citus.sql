
-- Citus (0.5): idem_distribute() distributes the outbox too, and idem_purge_shards purges its
-- shards. The bodies are 0.3's (61_citus.sql) with the outbox added; CREATE OR REPLACE keeps
-- their grants (none to PUBLIC).
--
-- The outbox is distributed by topic, in a co-location group of its own:
-- - By topic, not by key: the primary key (event_id, topic) and the dedup index (topic,
--   dedup_key) hold the distribution column only with topic (Citus requires it of a unique
--   index), and idem_outbox_next reads one topic in emit order with FOR UPDATE SKIP LOCKED,
--   which Citus runs only as a single-shard query. By key, every next would be a multi-shard
--   query Citus refuses (row locks), and events without a key would have no shard at all.
--   The price: one topic is one shard, on one worker (a hot topic is moved or isolated with
--   Citus's shard tools, which is why the group is its own).
-- - Its own group (colocate_with => 'none'), not the inbox's: topic values and scope / consumer
--   values are unrelated names, so sharing the hash ranges would put nothing together that a
--   query or a transaction uses together, while a shard move or a tenant isolation of a hot
--   topic would drag the co-located records and inbox shards along.
--
-- The functions (docs/scaling.md "The outbox"):
-- - idem_outbox_next is delegated by topic: it takes only row locks in the topic's shard, so it
--   may run on the worker that holds it.
-- - idem_outbox_emit is not delegated. Its per-key lock (a transaction lock of the node that
--   runs it) and its sequence number (nextval of idempotency.outbox_seq, a sequence of each
--   node) give per-key order only when every emit of a topic takes both on the same node. An
--   emit in a transaction block, the way an outbox is used (with the state change), is never
--   delegated by Citus; a delegated autocommit emit would lock and number on the worker, and
--   two emits of one key, one of each kind, would neither exclude each other nor draw from one
--   sequence. So every emit runs on the coordinator: the lock and nextval there, the INSERT
--   routed to the shard. On a Citus worker idem_outbox_emit raises 0A000 (src/outbox.cpp).
-- - idem_outbox_done, idem_outbox_fail and idem_outbox_requeue are not delegated: their topic
--   is optional, and Citus hashes a delegated call's distribution argument before the function
--   can refuse a NULL, so an explicit NULL topic would crash the coordinator's backend. On the
--   coordinator with a topic each statement is routed to the topic's shard; without one the
--   event's topic is looked up first (one multi-shard read by event id) and the rest is routed
--   the same way.
CREATE OR REPLACE FUNCTION @extschema@.idem_distribute(OUT object text, OUT action text)
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
    want_colocation integer;
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

    -- The tables, in co-location order: records first, the inbox's with it; the outbox in a
    -- group of its own (see the top of this file).
    FOR t IN SELECT * FROM (VALUES (1, 'records', 'scope', NULL), (2, 'inbox', 'consumer', 'records'),
                                   (3, 'inbox_entities', 'consumer', 'records'),
                                   (4, 'outbox', 'topic', 'none')) AS v(n, name, col, colocate)
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
        IF t.colocate IS NULL THEN
            EXECUTE 'SELECT pg_catalog.create_distributed_table($1, $2)' USING rel, t.col;
        ELSIF t.colocate = 'none' THEN
            EXECUTE 'SELECT pg_catalog.create_distributed_table($1, $2, colocate_with => $3)'
                USING rel, t.col, t.colocate;
        ELSE
            EXECUTE 'SELECT pg_catalog.create_distributed_table($1, $2, colocate_with => $3)'
                USING rel, t.col, format('%I.%I', tables, t.colocate);
        END IF;
        -- Rows the table had were copied into the shards; the coordinator's local copy goes.
        EXECUTE 'SELECT pg_catalog.truncate_local_data_after_distributing_table($1)' USING rel;
        object := rel::text; action := 'distributed by ' || t.col;
        RETURN NEXT;
    END LOOP;

    -- The functions delegated to the worker that owns their key: one round trip. Not the
    -- outbox's emit, done, fail and requeue (see the top of this file).
    FOR f IN SELECT p.oid::regprocedure AS fn, p.proname,
                    CASE WHEN p.proname IN ('idem_claim', 'idem_complete', 'idem_fail',
                                            'idem_heartbeat', 'idem_lookup') THEN 'scope'
                         WHEN p.proname = 'idem_outbox_next' THEN 'topic'
                         ELSE 'consumer' END AS arg
             FROM pg_catalog.pg_proc p
             WHERE p.pronamespace = ext_schema::regnamespace
               AND p.proname IN ('idem_claim', 'idem_complete', 'idem_fail', 'idem_heartbeat',
                                 'idem_lookup', 'idem_inbox_receive', 'idem_inbox_next',
                                 'idem_inbox_done', 'idem_inbox_fail', 'idem_webhook_receive',
                                 'idem_outbox_next')
             ORDER BY p.proname, p.oid::regprocedure::text
    LOOP
        rel := format('%I.%I', tables, CASE f.arg WHEN 'scope' THEN 'records'
                                                  WHEN 'topic' THEN 'outbox' ELSE 'inbox' END)::regclass;
        EXECUTE 'SELECT p.colocationid FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = $1'
            INTO want_colocation USING rel;
        want_arg := array_position((SELECT p.proargnames FROM pg_catalog.pg_proc p
                                    WHERE p.oid = f.fn), f.arg) - 1;
        dist_arg := NULL;
        dist_colocation := NULL;
        EXECUTE 'SELECT o.distribution_argument_index, o.colocationid FROM pg_catalog.pg_dist_object o '
                'WHERE o.classid = ''pg_catalog.pg_proc''::pg_catalog.regclass AND o.objid = $1'
            INTO dist_arg, dist_colocation USING f.fn::oid;
        IF dist_arg IS NOT DISTINCT FROM want_arg AND dist_colocation IS NOT DISTINCT FROM want_colocation THEN
            object := f.fn::text; action := 'unchanged: delegated by ' || f.arg;
        ELSE
            EXECUTE 'SELECT pg_catalog.create_distributed_function($1, $2, colocate_with => $3)'
                USING f.fn, f.arg, rel::text;
            object := f.fn::text; action := 'delegated by ' || f.arg;
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;
COMMENT ON FUNCTION @extschema@.idem_distribute() IS
    'Run once on a Citus coordinator: distributes records by scope, inbox and inbox_entities by consumer (co-located), the outbox by topic (its own co-location group), and delegates the per-key functions (idem_outbox_next by topic) to the worker owning the key; a second call changes nothing. Without Citus it raises 0A000 with what to do.';

-- idem_purge_shards as in 0.3, and the outbox's shards too: done events past expires_at
-- (idempotency.outbox_ttl after done), as idem_purge_batch('outbox') deletes them on one node.
CREATE OR REPLACE PROCEDURE @extschema@.idem_purge_shards(
    batch_size integer DEFAULT 1000, max_duration interval DEFAULT '4 minutes',
    include_stuck boolean DEFAULT false, stuck_older_than interval DEFAULT '0',
    INOUT deleted bigint DEFAULT NULL)
LANGUAGE plpgsql
AS $$
DECLARE
    shards text[];
    tables text[];
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
                CASE tables[i]
                     WHEN 'records'
                     THEN '(s.status OPERATOR(pg_catalog.<>) ''processing'' OR ($3 AND s.lease_expires_at '
                          'OPERATOR(pg_catalog.<) $4 AND s.lease_expires_at OPERATOR(pg_catalog.<) $2))'
                     WHEN 'inbox'
                     THEN 's.status OPERATOR(pg_catalog.=) ANY (''{done,failed,stale}''::pg_catalog.text[])'
                     ELSE 's.status OPERATOR(pg_catalog.=) ''done''' END)
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
    'Citus: purges the shards of records, inbox and outbox that this node holds (finished records past their TTL, settled inbox entries, done outbox events past idempotency.outbox_ttl), in bounded SKIP LOCKED batches, committing after every round; CALL idem_purge_loop() on the coordinator runs it on every worker.';
