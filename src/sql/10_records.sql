
-- Idempotency-Key records ----------------------------------------------------------------------

CREATE TABLE idempotency.records (
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
REVOKE ALL ON idempotency.records FROM PUBLIC;
COMMENT ON TABLE idempotency.records IS
    'One row per (scope, Idempotency-Key): state, fencing token (attempt), lease and stored result.';
SELECT pg_catalog.pg_extension_config_dump('idempotency.records', '');

CREATE FUNCTION idem_claim(
    scope text, key text, fingerprint bytea DEFAULT NULL, lease interval DEFAULT NULL,
    ttl interval DEFAULT NULL, wait boolean DEFAULT true,
    OUT outcome text, OUT attempt integer, OUT resource_id text, OUT response jsonb,
    OUT response_status integer, OUT lease_expires_at timestamptz, OUT expires_at timestamptz)
RETURNS record
AS 'MODULE_PATHNAME', 'idem_claim' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_claim(text, text, bytea, interval, interval, boolean) IS
    'Claims an Idempotency-Key in a scope. outcome: claimed | replayed | in_progress | mismatch | reclaimed; attempt is the fencing token.';

CREATE FUNCTION idem_complete(
    scope text, key text, attempt integer, resource_id text DEFAULT NULL,
    response jsonb DEFAULT NULL, response_status integer DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_complete' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_complete(text, text, integer, text, jsonb, integer) IS
    'Stores the result of the claimed attempt; true when stored, false when the same result was already stored by this attempt.';

CREATE FUNCTION idem_fail(
    scope text, key text, attempt integer, retryable boolean DEFAULT true,
    response jsonb DEFAULT NULL, response_status integer DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_fail' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_fail(text, text, integer, boolean, jsonb, integer) IS
    'Records a failure of the claimed attempt: retryable makes the key claimable again, otherwise the failure is replayed like a result.';

CREATE FUNCTION idem_heartbeat(scope text, key text, attempt integer, lease interval DEFAULT NULL)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'idem_heartbeat' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_heartbeat(text, text, integer, interval) IS
    'Extends the lease of the claimed attempt and returns the new lease_expires_at.';

CREATE FUNCTION idem_lookup(
    scope text, key text,
    OUT status text, OUT fingerprint bytea, OUT attempt integer, OUT resource_id text,
    OUT response jsonb, OUT response_status integer, OUT created_at timestamptz,
    OUT updated_at timestamptz, OUT lease_expires_at timestamptz, OUT expires_at timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'idem_lookup' LANGUAGE C STABLE PARALLEL UNSAFE ROWS 1;
COMMENT ON FUNCTION idem_lookup(text, text) IS
    'Returns the live record of an Idempotency-Key (zero or one row); status: processing | completed | failed.';
