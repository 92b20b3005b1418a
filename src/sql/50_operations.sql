-- idempotency 0.1 -> 0.2 (assembled from src/sql/5*.sql by the Makefile into
-- idempotency--0.1--0.2.sql; CREATE EXTENSION without VERSION runs 0.1 and then this script).
\echo Use "ALTER EXTENSION idempotency UPDATE TO '0.2'" to load this file. \quit

-- Operations: metrics, privileges. Every name is schema-qualified or resolved in pg_catalog,
-- which the extension script searches first, so objects planted in other schemas are not used.

-- Privileges ------------------------------------------------------------------------------------
-- Functions and procedures that read or change stored state (records, inbox, purge,
-- statistics) are not executable by PUBLIC: grant them to a group role (README "Operations",
-- "Privileges"). The pure functions (canonical JSON, fingerprints, UUIDv7, HMAC, webhook
-- signatures) stay PUBLIC. Later versions REVOKE every new stateful function in their own
-- upgrade script; test/tap/operations.sql checks that no other function is executable by PUBLIC.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure
        FROM pg_catalog.pg_depend d
        JOIN pg_catalog.pg_extension e ON e.oid OPERATOR(pg_catalog.=) d.refobjid
        JOIN pg_catalog.pg_proc p ON p.oid OPERATOR(pg_catalog.=) d.objid
        WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
          AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
          AND d.deptype OPERATOR(pg_catalog.=) 'e'
          AND e.extname OPERATOR(pg_catalog.=) 'idempotency'
          AND NOT (p.proname OPERATOR(pg_catalog.=) ANY (ARRAY[
                  'idem_canonical_json', 'idem_fingerprint', 'idem_uuid_v7', 'idem_uuid_v7_time',
                  'idem_hmac_sha256', 'idem_secure_equal', 'idem_webhook_verify_standard',
                  'idem_webhook_verify_stripe', 'idem_webhook_sign_standard',
                  'idem_webhook_sign_stripe']::pg_catalog.name[]))
    LOOP
        EXECUTE pg_catalog.format('REVOKE EXECUTE ON ROUTINE %s FROM PUBLIC', f);
    END LOOP;
END $$;

-- Cumulative counters (shared memory, needs shared_preload_libraries) ---------------------------

CREATE FUNCTION idem_counters(OUT counter text, OUT value bigint, OUT stats_reset timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'idem_counters' LANGUAGE C VOLATILE PARALLEL SAFE ROWS 8;
COMMENT ON FUNCTION idem_counters() IS
    'Cumulative counters since stats_reset: claimed, replayed, in_progress, mismatch, reclaimed (takeovers), refused_fenced (IK002), refused_finished (IK003), inbox_duplicate. value and stats_reset are NULL when idempotency is not in shared_preload_libraries (counters off).';

CREATE FUNCTION idem_counters_enabled()
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_counters_enabled' LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION idem_counters_enabled() IS
    'True when the counters of idem_counters() are kept, i.e. idempotency is in shared_preload_libraries.';

CREATE FUNCTION idem_stats_reset()
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'idem_stats_reset' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_stats_reset() IS
    'Sets every counter of idem_counters() to zero and returns the reset time; error 55000 when the counters are off.';

REVOKE EXECUTE ON FUNCTION idem_counters() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idem_counters_enabled() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idem_stats_reset() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_counters() TO pg_monitor;
GRANT EXECUTE ON FUNCTION idem_counters_enabled() TO pg_monitor;

-- Per-scope and per-consumer state (computed from the tables, works without preload) -----------

CREATE VIEW idem_stats AS
SELECT r.scope,
       pg_catalog.count(*) FILTER (
           WHERE r.status OPERATOR(pg_catalog.=) 'processing') AS processing,
       pg_catalog.count(*) FILTER (
           WHERE r.status OPERATOR(pg_catalog.=) 'processing'
             AND r.lease_expires_at OPERATOR(pg_catalog.<=) pg_catalog.statement_timestamp()) AS stuck,
       pg_catalog.count(*) FILTER (
           WHERE r.status OPERATOR(pg_catalog.=) 'completed'
             AND r.expires_at OPERATOR(pg_catalog.>) pg_catalog.statement_timestamp()) AS completed,
       pg_catalog.count(*) FILTER (
           WHERE r.status OPERATOR(pg_catalog.=) 'failed'
             AND r.expires_at OPERATOR(pg_catalog.>) pg_catalog.statement_timestamp()) AS failed,
       pg_catalog.count(*) FILTER (
           WHERE r.status OPERATOR(pg_catalog.<>) 'processing'
             AND r.expires_at OPERATOR(pg_catalog.<=) pg_catalog.statement_timestamp()) AS expired,
       pg_catalog.statement_timestamp() OPERATOR(pg_catalog.-) pg_catalog.min(r.created_at) FILTER (
           WHERE r.status OPERATOR(pg_catalog.=) 'processing') AS oldest_processing_age
FROM idempotency.records r
GROUP BY r.scope;
COMMENT ON VIEW idem_stats IS
    'Idempotency-Key records per scope: processing (all unfinished, includes stuck), stuck (processing with an expired lease, the same records idem_stuck() lists, also past their TTL: their outcome is unknown), completed and failed (within their TTL), expired (finished records past the TTL, awaiting purge), oldest_processing_age. Scans idempotency.records.';

CREATE VIEW idem_inbox_stats AS
SELECT i.consumer,
       pg_catalog.count(*) FILTER (
           WHERE i.expires_at OPERATOR(pg_catalog.>) pg_catalog.statement_timestamp()) AS received,
       pg_catalog.count(*) FILTER (
           WHERE i.status OPERATOR(pg_catalog.=) ANY (ARRAY['received', 'processing'])
             AND i.expires_at OPERATOR(pg_catalog.>) pg_catalog.statement_timestamp()) AS pending,
       pg_catalog.count(*) FILTER (
           WHERE i.status OPERATOR(pg_catalog.=) 'processing'
             AND i.expires_at OPERATOR(pg_catalog.>) pg_catalog.statement_timestamp()) AS processing,
       pg_catalog.count(*) FILTER (
           WHERE i.status OPERATOR(pg_catalog.=) 'done'
             AND i.expires_at OPERATOR(pg_catalog.>) pg_catalog.statement_timestamp()) AS processed,
       pg_catalog.count(*) FILTER (
           WHERE i.status OPERATOR(pg_catalog.=) 'failed'
             AND i.expires_at OPERATOR(pg_catalog.>) pg_catalog.statement_timestamp()) AS failed,
       pg_catalog.count(*) FILTER (
           WHERE i.status OPERATOR(pg_catalog.=) 'stale'
             AND i.expires_at OPERATOR(pg_catalog.>) pg_catalog.statement_timestamp()) AS stale,
       pg_catalog.count(*) FILTER (
           WHERE i.expires_at OPERATOR(pg_catalog.<=) pg_catalog.statement_timestamp()) AS expired,
       pg_catalog.statement_timestamp() OPERATOR(pg_catalog.-) pg_catalog.min(i.received_at) FILTER (
           WHERE i.status OPERATOR(pg_catalog.=) ANY (ARRAY['received', 'processing'])
             AND i.expires_at OPERATOR(pg_catalog.>) pg_catalog.statement_timestamp()) AS oldest_pending_age
FROM idempotency.inbox i
GROUP BY i.consumer;
COMMENT ON VIEW idem_inbox_stats IS
    'Inbox events per consumer: received (every live event id recorded, duplicates are not rows), pending (queued or leased), processing (leased), processed (done), failed (dead), stale, expired (past the TTL, awaiting purge), oldest_pending_age. Scans idempotency.inbox.';

REVOKE ALL ON idem_stats, idem_inbox_stats FROM PUBLIC;
GRANT SELECT ON idem_stats, idem_inbox_stats TO pg_monitor;
