-- bench/plpgsql_outbox.sql: the transactional outbox written by hand in PL/pgSQL, the baseline of
-- the relay comparison in bench/outbox.sh (idem_outbox_next + idem_outbox_done against
-- bench_o.next + bench_o.done). The same guarantees, and nothing more:
--   per-key order                       emit takes a transaction lock on (topic, key)
--                                       (pg_advisory_xact_lock) before it draws seq from a
--                                       sequence, so per key seq is the commit order; next hands
--                                       out an event only when no earlier event of its key is
--                                       unfinished (pending, leased or dead), and reads the queue
--                                       by status (no high-water mark: a late commit is not
--                                       skipped)
--   producer dedup                      a unique partial index on (topic, dedup_key); a second
--                                       emit returns the first event's id
--   relays never block each other       FOR UPDATE SKIP LOCKED over a partial index on
--                                       (topic, seq) of the pending and leased events
--   lease with expiry, attempt the      next sets status 'leased', attempt + 1 and
--   fencing token                       lease_expires_at; a leased event whose lease ended is
--                                       handed out again
--   done / fail fenced by attempt       they update only the row of that attempt, still leased;
--                                       otherwise they raise (nothing changes)
--   retry with backoff, dead            fail: pending again after an exponential backoff while
--                                       retryable and below max_attempts, else dead
-- What it leaves out (the extension pays for these; a sceptic's outbox would not have them):
-- the bytea payload and headers, deliver_after, the retention columns (updated_at, expires_at,
-- attempt_base) and the purge, the expired last lease that turns an event dead inside next,
-- argument checks with their SQLSTATEs, the owner switch that lets a role call without table
-- rights, UUIDv7 ids (gen_random_uuid(), v4, is PostgreSQL 15's), requeue, NOTIFY, the
-- counters, and a precise IK001/IK002/IK003 on a refused done. One clock read per statement
-- (now(), or the column DEFAULT), invoker's rights, no SECURITY DEFINER: the most favourable
-- variant, as bench/plpgsql_queue.sql is for the inbox.
CREATE SCHEMA IF NOT EXISTS bench_o;

CREATE SEQUENCE bench_o.outbox_seq;

CREATE TABLE bench_o.outbox (
    event_id         uuid        NOT NULL DEFAULT gen_random_uuid() PRIMARY KEY,
    topic            text        NOT NULL,
    seq              bigint      NOT NULL,
    key              text,
    dedup_key        text,
    payload          jsonb,
    status           text        NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'leased', 'done', 'dead')),
    attempt          integer     NOT NULL DEFAULT 0,
    last_error       text,
    emitted_at       timestamptz NOT NULL DEFAULT now(),
    available_at     timestamptz NOT NULL DEFAULT now(),
    lease_expires_at timestamptz
) WITH (fillfactor = 85);
CREATE INDEX outbox_queue ON bench_o.outbox (topic, seq) WHERE status IN ('pending', 'leased');
CREATE INDEX outbox_key ON bench_o.outbox (topic, key, seq)
    WHERE key IS NOT NULL AND status <> 'done';
CREATE UNIQUE INDEX outbox_dedup ON bench_o.outbox (topic, dedup_key)
    WHERE dedup_key IS NOT NULL;

-- Writes an event in the caller's transaction; the kept event's id for a known dedup key.
CREATE FUNCTION bench_o.emit(p_topic text, p_payload jsonb, p_key text DEFAULT NULL,
                             p_dedup_key text DEFAULT NULL)
RETURNS uuid LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_id uuid;
BEGIN
    IF p_key IS NOT NULL THEN
        -- (topic, key) -> two int4 keys; a hash collision only serialises two keys' emits.
        PERFORM pg_advisory_xact_lock(hashtext(p_topic), hashtext(p_key));
    END IF;
    INSERT INTO bench_o.outbox (topic, seq, key, dedup_key, payload)
    VALUES (p_topic, nextval('bench_o.outbox_seq'), p_key, p_dedup_key, p_payload)
    ON CONFLICT (topic, dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
    RETURNING event_id INTO v_id;
    IF v_id IS NULL THEN
        SELECT o.event_id INTO v_id FROM bench_o.outbox o
         WHERE o.topic = p_topic AND o.dedup_key = p_dedup_key;
    END IF;
    RETURN v_id;
END;
$$;

-- Leases up to p_batch due events of a topic in emit order, at most the first unfinished one
-- per key (and events whose lease ended).
CREATE FUNCTION bench_o.next(p_topic text, p_batch integer DEFAULT 100,
                             p_lease interval DEFAULT '30 s')
RETURNS TABLE (event_id uuid, key text, payload jsonb, attempt integer,
               emitted_at timestamptz, lease_expires_at timestamptz)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RETURN QUERY
    WITH picked AS (
        SELECT s.event_id FROM bench_o.outbox s
         WHERE s.topic = p_topic AND s.status IN ('pending', 'leased')
           AND ((s.status = 'pending' AND s.available_at <= now())
                OR (s.status = 'leased' AND s.lease_expires_at <= now()))
           AND (s.key IS NULL OR NOT EXISTS (
                SELECT FROM bench_o.outbox p
                 WHERE p.topic = p_topic AND p.key = s.key AND p.seq < s.seq
                   AND p.status <> 'done'))
         ORDER BY s.seq
         LIMIT p_batch
           FOR UPDATE SKIP LOCKED),
    taken AS (
        UPDATE bench_o.outbox o
           SET status = 'leased', attempt = o.attempt + 1, lease_expires_at = now() + p_lease
          FROM picked
         WHERE o.event_id = picked.event_id
        RETURNING o.event_id, o.key, o.payload, o.attempt, o.emitted_at, o.lease_expires_at, o.seq)
    SELECT t.event_id, t.key, t.payload, t.attempt, t.emitted_at, t.lease_expires_at
      FROM taken t ORDER BY t.seq;
END;
$$;

-- Marks the event done, only for the attempt that holds it.
CREATE FUNCTION bench_o.done(p_event_id uuid, p_attempt integer)
RETURNS text LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    UPDATE bench_o.outbox o SET status = 'done', lease_expires_at = NULL
     WHERE o.event_id = p_event_id AND o.attempt = p_attempt AND o.status = 'leased';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'attempt % does not own outbox event %', p_attempt, p_event_id
            USING ERRCODE = 'IK002';
    END IF;
    RETURN 'done';
END;
$$;

-- A failed delivery of the attempt that holds the event: pending again after
-- p_backoff * 2^(attempt - 1) while retryable and attempt < p_max_attempts, else dead.
CREATE FUNCTION bench_o.fail(p_event_id uuid, p_attempt integer, p_retryable boolean DEFAULT true,
                             p_error text DEFAULT NULL, p_backoff interval DEFAULT '1 s',
                             p_max_attempts integer DEFAULT 20)
RETURNS text LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_status text;
BEGIN
    UPDATE bench_o.outbox o
       SET status = CASE WHEN p_retryable AND o.attempt < p_max_attempts THEN 'pending' ELSE 'dead' END,
           available_at = CASE WHEN p_retryable AND o.attempt < p_max_attempts
                               THEN now() + p_backoff * power(2, o.attempt - 1)
                               ELSE o.available_at END,
           lease_expires_at = NULL, last_error = p_error
     WHERE o.event_id = p_event_id AND o.attempt = p_attempt AND o.status = 'leased'
    RETURNING o.status INTO v_status;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'attempt % does not own outbox event %', p_attempt, p_event_id
            USING ERRCODE = 'IK002';
    END IF;
    RETURN v_status;
END;
$$;
