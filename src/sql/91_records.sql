
-- Replays of HTTP responses (0.6) -----------------------------------------------------------------
-- A replay answers what the first request answered: the exact body bytes (jsonb re-serialises
-- a body: key order and spacing change) and the headers the service chose to keep (Location,
-- Content-Type, ETag). Adding columns without a default rewrites nothing. IF NOT EXISTS for
-- Citus, as in 0.5 (src/sql/82_inbox.sql): the script also runs on every worker.
ALTER TABLE idempotency.records ADD COLUMN IF NOT EXISTS response_body bytea;
ALTER TABLE idempotency.records ADD COLUMN IF NOT EXISTS response_headers jsonb;
COMMENT ON COLUMN idempotency.records.response_body IS
    'The exact bytes of the stored response body, replayed verbatim; NULL when only response (jsonb) was stored.';
COMMENT ON COLUMN idempotency.records.response_headers IS
    'The response headers to replay, a JSON object of header name to string value (Location, Content-Type, ETag, ...).';

-- idem_claim keeps its signature: its row type gains the two columns (no IF NOT EXISTS for
-- attributes: the check is by hand, for the same reason as above).
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_attribute a
                   WHERE a.attrelid OPERATOR(pg_catalog.=)
                         (SELECT t.typrelid FROM pg_catalog.pg_type t
                          WHERE t.oid OPERATOR(pg_catalog.=) 'idem_claim_result'::pg_catalog.regtype)
                     AND a.attname OPERATOR(pg_catalog.=) 'response_body' AND NOT a.attisdropped) THEN
        ALTER TYPE idem_claim_result ADD ATTRIBUTE response_body bytea,
                                     ADD ATTRIBUTE response_headers jsonb;
    END IF;
END $$;
COMMENT ON TYPE idem_claim_result IS
    'Result row of idem_claim: outcome (claimed | replayed | in_progress | mismatch | reclaimed), attempt (the fencing token), the stored result of a replay (resource_id, response, response_status, response_body, response_headers), lease_expires_at and expires_at.';

-- idem_complete and idem_fail gain two trailing arguments and idem_lookup two result columns:
-- a function's arguments and result cannot be altered, so each is dropped and created again
-- (as 0.2 did with idem_claim, src/sql/51_records.sql), with its comment and the EXECUTE grants
-- it had. The update stops with an error if a view or other object depends on one of them.
CREATE FUNCTION idempotency.keep_execute_grants(fn pg_catalog.regprocedure, old_acl pg_catalog.aclitem[])
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog AS $$
DECLARE
    grantee text;
BEGIN
    EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', fn);
    FOR grantee IN
        SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(r.rolname) END
               || CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END
        FROM aclexplode(old_acl) a
        LEFT JOIN pg_roles r ON r.oid = a.grantee
        WHERE a.privilege_type = 'EXECUTE' AND a.grantee <> a.grantor
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', fn, grantee);
    END LOOP;
END $$;

DO $$
DECLARE
    acl_complete pg_catalog.aclitem[];
    acl_fail pg_catalog.aclitem[];
    acl_lookup pg_catalog.aclitem[];
BEGIN
    SELECT p.proacl INTO acl_complete FROM pg_catalog.pg_proc p WHERE p.oid OPERATOR(pg_catalog.=)
        'idem_complete(text, text, integer, text, jsonb, integer)'::pg_catalog.regprocedure;
    SELECT p.proacl INTO acl_fail FROM pg_catalog.pg_proc p WHERE p.oid OPERATOR(pg_catalog.=)
        'idem_fail(text, text, integer, boolean, jsonb, integer)'::pg_catalog.regprocedure;
    SELECT p.proacl INTO acl_lookup FROM pg_catalog.pg_proc p WHERE p.oid OPERATOR(pg_catalog.=)
        'idem_lookup(text, text)'::pg_catalog.regprocedure;

    DROP FUNCTION idem_complete(text, text, integer, text, jsonb, integer);
    CREATE FUNCTION idem_complete(
        scope text, key text, attempt integer, resource_id text DEFAULT NULL,
        response jsonb DEFAULT NULL, response_status integer DEFAULT NULL,
        response_body bytea DEFAULT NULL, response_headers jsonb DEFAULT NULL)
    RETURNS boolean
    AS 'MODULE_PATHNAME', 'idem_complete' LANGUAGE C VOLATILE PARALLEL UNSAFE;
    COMMENT ON FUNCTION idem_complete(text, text, integer, text, jsonb, integer, bytea, jsonb) IS
        'Stores the result of the claimed attempt (response_body: the exact body bytes to replay; response_headers: a JSON object of header name to value); true when stored, false when the same result was already stored by this attempt.';
    PERFORM idempotency.keep_execute_grants(
        'idem_complete(text, text, integer, text, jsonb, integer, bytea, jsonb)', acl_complete);

    DROP FUNCTION idem_fail(text, text, integer, boolean, jsonb, integer);
    CREATE FUNCTION idem_fail(
        scope text, key text, attempt integer, retryable boolean DEFAULT true,
        response jsonb DEFAULT NULL, response_status integer DEFAULT NULL,
        response_body bytea DEFAULT NULL, response_headers jsonb DEFAULT NULL)
    RETURNS boolean
    AS 'MODULE_PATHNAME', 'idem_fail' LANGUAGE C VOLATILE PARALLEL UNSAFE;
    COMMENT ON FUNCTION idem_fail(text, text, integer, boolean, jsonb, integer, bytea, jsonb) IS
        'Records a failure of the claimed attempt: retryable makes the key claimable again, otherwise the failure (with its response, response_body and response_headers) is replayed like a result.';
    PERFORM idempotency.keep_execute_grants(
        'idem_fail(text, text, integer, boolean, jsonb, integer, bytea, jsonb)', acl_fail);

    DROP FUNCTION idem_lookup(text, text);
    CREATE FUNCTION idem_lookup(
        scope text, key text,
        OUT status text, OUT fingerprint bytea, OUT attempt integer, OUT resource_id text,
        OUT response jsonb, OUT response_status integer, OUT created_at timestamptz,
        OUT updated_at timestamptz, OUT lease_expires_at timestamptz, OUT expires_at timestamptz,
        OUT response_body bytea, OUT response_headers jsonb)
    RETURNS SETOF record
    AS 'MODULE_PATHNAME', 'idem_lookup' LANGUAGE C STABLE PARALLEL UNSAFE ROWS 1;
    COMMENT ON FUNCTION idem_lookup(text, text) IS
        'Returns the live record of an Idempotency-Key (zero or one row); status: processing | completed | failed.';
    PERFORM idempotency.keep_execute_grants('idem_lookup(text, text)', acl_lookup);
END $$;
DROP FUNCTION idempotency.keep_execute_grants(pg_catalog.regprocedure, pg_catalog.aclitem[]);
