-- bench/plpgsql_claim.sql: the claim of idem_claim written in PL/pgSQL, for the cost comparison
-- in bench/load.sh. Same table definition, same semantics and order of checks as src/records.cpp +
-- core/lease.cpp: argument validation, INSERT ... ON CONFLICT DO NOTHING for a new key (in a
-- subtransaction with lock_timeout when wait = false); for an existing key read the row and
-- decide fresh (TTL over) / mismatch / replay / retry / in_progress / reclaim, taking over with a
-- compare-and-set UPDATE on the attempt (the fencing token) and the state that was read. Invoker's rights and schema-qualified
-- names (the most favourable variant: no SECURITY DEFINER + SET search_path overhead, which the
-- C function's owner switch would correspond to). Mirrors the C idem_claim as of commit 6eb8b12
-- (unlocked read, compare-and-set takeover, lease restamped after a wait); it is in
-- src/records_claim.cpp today.
CREATE SCHEMA IF NOT EXISTS bench_pl;

CREATE TABLE bench_pl.records (
    scope            text        NOT NULL,
    key              text        NOT NULL,
    status           text        NOT NULL CHECK (status IN ('processing', 'completed', 'failed')),
    retryable        boolean     NOT NULL DEFAULT false,
    fingerprint      bytea,
    attempt          integer     NOT NULL CHECK (attempt > 0),
    resource_id      text,
    response         jsonb,
    response_status  integer,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    lease_expires_at timestamptz,
    expires_at       timestamptz NOT NULL,
    PRIMARY KEY (scope, key)
) WITH (fillfactor = 90);

CREATE FUNCTION bench_pl.claim(
    p_scope text, p_key text, p_fingerprint bytea DEFAULT NULL, p_lease interval DEFAULT NULL,
    p_ttl interval DEFAULT NULL, p_wait boolean DEFAULT true,
    OUT outcome text, OUT attempt integer, OUT resource_id text, OUT response jsonb,
    OUT response_status integer, OUT lease_expires_at timestamptz, OUT expires_at timestamptz)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_now   timestamptz := pg_catalog.clock_timestamp();
    -- the settings of the extension (defined once its library is loaded; else their defaults)
    v_lease interval := coalesce(p_lease, pg_catalog.current_setting('idempotency.default_lease',
                                                                     true)::interval, '60 s');
    v_ttl   interval := coalesce(p_ttl, pg_catalog.current_setting('idempotency.default_ttl',
                                                                   true)::interval, '1 day');
    v_lease_end timestamptz;
    v_end   timestamptz;
    v_n     bigint;
    v_fresh boolean;
    v_old_timeout text;
    r       bench_pl.records%ROWTYPE;
BEGIN
    IF p_scope IS NULL THEN
        RAISE EXCEPTION 'scope must not be null' USING ERRCODE = '22004';
    END IF;
    IF p_key IS NULL THEN
        RAISE EXCEPTION 'key must not be null' USING ERRCODE = '22004';
    END IF;
    IF p_scope = '' OR p_key = '' THEN
        RAISE EXCEPTION 'scope and key must not be empty' USING ERRCODE = '22023';
    END IF;
    IF octet_length(p_scope) > 1024 OR octet_length(p_key) > 255 THEN
        RAISE EXCEPTION 'scope or key is too long' USING ERRCODE = '22001';
    END IF;
    IF p_fingerprint IS NOT NULL AND octet_length(p_fingerprint) NOT BETWEEN 1 AND 64 THEN
        RAISE EXCEPTION 'fingerprint must have 1 to 64 bytes' USING ERRCODE = '22023';
    END IF;
    IF v_lease <= interval '0' THEN
        RAISE EXCEPTION 'lease must be positive' USING ERRCODE = '22023';
    END IF;
    IF v_ttl < v_lease THEN
        RAISE EXCEPTION 'ttl must not be shorter than the lease' USING ERRCODE = '22023';
    END IF;
    v_lease_end := v_now + v_lease;
    v_end := v_now + v_ttl;

    FOR round IN 1..10 LOOP
        IF p_wait THEN
            INSERT INTO bench_pl.records AS t (scope, key, status, fingerprint, attempt,
                                               created_at, updated_at, lease_expires_at, expires_at)
            VALUES (p_scope, p_key, 'processing', p_fingerprint, 1, v_now, v_now, v_lease_end, v_end)
            ON CONFLICT (scope, key) DO NOTHING;
            GET DIAGNOSTICS v_n = ROW_COUNT;
        ELSE
            v_old_timeout := pg_catalog.current_setting('lock_timeout');
            BEGIN
                PERFORM pg_catalog.set_config('lock_timeout', '1', true);
                INSERT INTO bench_pl.records AS t (scope, key, status, fingerprint, attempt,
                                                   created_at, updated_at, lease_expires_at,
                                                   expires_at)
                VALUES (p_scope, p_key, 'processing', p_fingerprint, 1, v_now, v_now, v_lease_end,
                        v_end)
                ON CONFLICT (scope, key) DO NOTHING;
                GET DIAGNOSTICS v_n = ROW_COUNT;
                PERFORM pg_catalog.set_config('lock_timeout', v_old_timeout, true);
            EXCEPTION WHEN lock_not_available THEN
                PERFORM pg_catalog.set_config('lock_timeout', v_old_timeout, true);
                outcome := 'in_progress';
                RETURN;
            END;
        END IF;
        IF v_n = 1 THEN
            -- the insert may have waited for a rolled-back holder of the key: the lease starts now
            IF pg_catalog.clock_timestamp() - v_now > least(interval '10 ms', v_lease / 10) THEN
                v_now := pg_catalog.clock_timestamp();
                v_lease_end := v_now + v_lease;
                v_end := v_now + v_ttl;
                UPDATE bench_pl.records AS t
                   SET created_at = v_now, updated_at = v_now, lease_expires_at = v_lease_end,
                       expires_at = v_end
                 WHERE t.scope = p_scope AND t.key = p_key;
            END IF;
            outcome := 'claimed';
            attempt := 1;
            lease_expires_at := v_lease_end;
            expires_at := v_end;
            RETURN;
        END IF;

        -- The key exists: read it without a lock (FOR KEY SHARE under REPEATABLE READ and
        -- SERIALIZABLE, which raises 40001 if it changed after the snapshot).
        IF pg_catalog.current_setting('transaction_isolation') IN ('repeatable read', 'serializable') THEN
            SELECT * INTO r FROM bench_pl.records t
             WHERE t.scope = p_scope AND t.key = p_key FOR KEY SHARE;
        ELSE
            SELECT * INTO r FROM bench_pl.records t WHERE t.scope = p_scope AND t.key = p_key;
        END IF;
        CONTINUE WHEN NOT FOUND; -- purged since the insert saw it: insert again
        v_now := pg_catalog.clock_timestamp();

        IF NOT (r.expires_at > v_now OR (r.status = 'processing'
                AND r.lease_expires_at IS NOT NULL AND r.lease_expires_at > v_now)) THEN
            v_fresh := true;
            outcome := 'claimed';                      -- past its TTL: counts as absent
        ELSIF r.fingerprint IS DISTINCT FROM p_fingerprint THEN
            outcome := 'mismatch';
            expires_at := r.expires_at;
            RETURN;
        ELSIF r.status = 'completed' OR (r.status = 'failed' AND NOT r.retryable) THEN
            outcome := 'replayed';
            attempt := r.attempt;
            resource_id := r.resource_id;
            response := r.response;
            response_status := r.response_status;
            expires_at := r.expires_at;
            RETURN;
        ELSIF r.status = 'failed' THEN
            v_fresh := false;
            outcome := 'claimed';                      -- retryable failure: next attempt
        ELSIF r.lease_expires_at IS NOT NULL AND r.lease_expires_at > v_now THEN
            outcome := 'in_progress';
            attempt := r.attempt;
            lease_expires_at := r.lease_expires_at;
            expires_at := r.expires_at;
            RETURN;
        ELSE
            v_fresh := false;
            outcome := 'reclaimed';                    -- the owner's lease expired
        END IF;

        IF r.attempt = 2147483647 THEN
            RAISE EXCEPTION 'attempt counter of this key is exhausted' USING ERRCODE = '22003';
        END IF;
        v_lease_end := v_now + v_lease;
        v_end := v_now + v_ttl;
        -- compare-and-set: only while the record is still as read (attempt, status, retryable,
        -- no live lease); otherwise decide again
        UPDATE bench_pl.records AS t
           SET status = 'processing', retryable = false, attempt = r.attempt + 1,
               resource_id = NULL, response = NULL, response_status = NULL,
               fingerprint = CASE WHEN v_fresh THEN p_fingerprint ELSE t.fingerprint END,
               created_at = CASE WHEN v_fresh THEN v_now ELSE t.created_at END,
               updated_at = v_now, lease_expires_at = v_lease_end, expires_at = v_end
         WHERE t.scope = p_scope AND t.key = p_key AND t.attempt = r.attempt
           AND t.status = r.status AND t.retryable = r.retryable
           AND (t.lease_expires_at IS NULL OR t.lease_expires_at <= v_now);
        GET DIAGNOSTICS v_n = ROW_COUNT;
        CONTINUE WHEN v_n <> 1;
        attempt := r.attempt + 1;
        lease_expires_at := v_lease_end;
        expires_at := v_end;
        RETURN;
    END LOOP;
    RAISE EXCEPTION 'could not claim the key: its record kept changing concurrently'
        USING ERRCODE = '40001';
END;
$$;
