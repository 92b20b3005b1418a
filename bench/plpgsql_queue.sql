-- bench/plpgsql_queue.sql: the queued inbox written by hand in PL/pgSQL, the baseline of the
-- queue comparison in bench/inbox.sh (idempotency.idem_inbox_receive(..., enqueue => true) + idem_inbox_next
-- + idem_inbox_done). The same guarantees, and nothing the issue-18 list does not ask for:
--   dedup on (consumer, event_id)            the primary key, INSERT ... ON CONFLICT DO NOTHING
--   lease with expiry, attempt the fencing   next sets status 'processing', attempt + 1 and
--   token                                    lease_expires_at; done matches the attempt
--   done fenced by attempt                   done updates only the row of that attempt, still
--                                            'processing'; otherwise it raises (nothing changes)
--   FIFO per consumer                        oldest received_at first, from a partial index on
--                                            (consumer, received_at) over the pending rows
--   events past their lease re-handed        next also takes 'processing' rows whose lease ended
--   workers never block each other           FOR UPDATE SKIP LOCKED
-- What it leaves out (the extension pays for these; a sceptic's queue would not have them):
-- payload_hash and mismatch, the ordering guard (entity_key / entity_seq), TTL and retention
-- columns (updated_at, expires_at, last_error), argument checks with their SQLSTATEs, the owner
-- switch that lets PUBLIC call without table rights, the 'failed' path (idem_inbox_fail), and a
-- precise IK001/IK002/IK003 on a refused done. One clock read per statement (now(), or the
-- column DEFAULT), invoker's rights, schema-qualified names, no SECURITY DEFINER: the most
-- favourable variant, as bench/plpgsql_claim.sql is for the claim.
CREATE SCHEMA IF NOT EXISTS bench_q;

CREATE TABLE bench_q.inbox (
    consumer         text        NOT NULL,
    event_id         text        NOT NULL,
    status           text        NOT NULL DEFAULT 'received'
                     CHECK (status IN ('received', 'processing', 'done')),
    event_type       text,
    payload          bytea,
    attempt          integer     NOT NULL DEFAULT 0,
    lease_expires_at timestamptz,
    received_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, event_id)
) WITH (fillfactor = 90);
CREATE INDEX inbox_queue ON bench_q.inbox (consumer, received_at)
    WHERE status IN ('received', 'processing');

-- A delivery: new, or duplicate when (consumer, event_id) was seen before.
CREATE FUNCTION bench_q.receive(p_consumer text, p_event_id text, p_event_type text DEFAULT NULL,
                                p_payload bytea DEFAULT NULL)
RETURNS text LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    INSERT INTO bench_q.inbox (consumer, event_id, event_type, payload)
    VALUES (p_consumer, p_event_id, p_event_type, p_payload)
    ON CONFLICT DO NOTHING;
    RETURN CASE WHEN FOUND THEN 'new' ELSE 'duplicate' END;
END;
$$;

-- Leases up to p_batch queued events (and events whose lease ended), oldest first.
CREATE FUNCTION bench_q.next(p_consumer text, p_batch integer DEFAULT 10,
                             p_lease interval DEFAULT '60 s')
RETURNS TABLE (event_id text, event_type text, payload bytea, attempt integer,
               received_at timestamptz, lease_expires_at timestamptz)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RETURN QUERY
    WITH picked AS (
        SELECT i.event_id FROM bench_q.inbox i
         WHERE i.consumer = p_consumer AND i.status IN ('received', 'processing')
           AND (i.status = 'received' OR i.lease_expires_at <= now())
         ORDER BY i.received_at
         LIMIT p_batch
           FOR UPDATE SKIP LOCKED),
    taken AS (
        UPDATE bench_q.inbox i
           SET status = 'processing', attempt = i.attempt + 1, lease_expires_at = now() + p_lease
          FROM picked
         WHERE i.consumer = p_consumer AND i.event_id = picked.event_id
        RETURNING i.event_id, i.event_type, i.payload, i.attempt, i.received_at,
                  i.lease_expires_at)
    SELECT * FROM taken ORDER BY taken.received_at;
END;
$$;

-- Marks the event done in the worker's transaction, only for the attempt that holds it.
CREATE FUNCTION bench_q.done(p_consumer text, p_event_id text, p_attempt integer)
RETURNS text LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    UPDATE bench_q.inbox i SET status = 'done', lease_expires_at = NULL
     WHERE i.consumer = p_consumer AND i.event_id = p_event_id AND i.attempt = p_attempt
       AND i.status = 'processing';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'attempt % does not own event % of %', p_attempt, p_event_id, p_consumer
            USING ERRCODE = 'IK002';
    END IF;
    RETURN 'done';
END;
$$;
