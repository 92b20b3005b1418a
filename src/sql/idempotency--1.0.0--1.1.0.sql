-- idempotency 1.0.0 -> 1.1.0 (committed; the Makefile installs it as it is). 1.1.0 adds objects
-- and changes of 1.0.0's only the outbox's storage (its two partial indexes and fillfactor, the
-- last section): a 1.0.0 database updated with it has the catalog of a fresh 1.1.0 installation
-- (src/sql/idempotency.sql): test/run-all upgrade. Each section below is the same statements as
-- the install script's for the objects it adds or changes (CHANGELOG.md "1.1.0").
\echo Use "ALTER EXTENSION idempotency UPDATE TO '1.1.0'" to load this file. \quit

-- The client packages' SQL (issue 31) -------------------------------------------------------------
-- The raw request body as bytes (docs/fingerprints.md).
CREATE FUNCTION idem_fingerprint(doc pg_catalog.bytea, exclude pg_catalog.text[] DEFAULT NULL,
                                 include pg_catalog.text[] DEFAULT NULL,
                                 exact_numbers boolean DEFAULT false)
RETURNS pg_catalog.bytea
AS 'MODULE_PATHNAME', 'idem_fingerprint_bytea' LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION idem_fingerprint(bytea, text[], text[], boolean) IS
    'SHA-256 (32 bytes) of the RFC 8785 canonical form of a raw request body given as bytes (UTF-8; invalid UTF-8 is 22021), after the exclude/include path filters; the same digest as the text form of the same JSON; NULL for a NULL document.';

-- The HTTP answer of a claim's outcome or of a key's stored result (docs/records.md "The HTTP
-- answer", src/http_answer.cpp): status, headers (Retry-After, Idempotent-Replayed, the stored
-- ones) and body bytes, NULLs when the handler must run. The claim form reads only its argument
-- (PUBLIC may call it); the key form reads the record, as idem_lookup does. A named row type, as
-- idem_claim's: the executor takes its description from the type cache.
CREATE TYPE idem_http_answer_result AS (
    status  integer,
    headers pg_catalog.jsonb,
    body    pg_catalog.bytea
);
COMMENT ON TYPE idem_http_answer_result IS
    'Result row of idem_http_answer: the HTTP status, the headers (a JSON object of name to string) and the body bytes to send; all NULL when the handler must run.';

CREATE FUNCTION idem_http_answer(
    claim @extschema@.idem_claim_result)
RETURNS @extschema@.idem_http_answer_result
AS 'MODULE_PATHNAME', 'idem_http_answer_claim' LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION idem_http_answer(idem_claim_result) IS
    'The HTTP answer of an idem_claim result: NULLs for claimed and reclaimed (run the handler); replayed: the stored status (200 if none), the stored headers with Idempotent-Replayed: true, the stored body bytes (or the jsonb response as text); in_progress: 409 with Retry-After (whole seconds to the lease end, at least 1) and a problem+json body; mismatch: 422 with a problem+json body.';

CREATE FUNCTION idem_http_answer(
    scope pg_catalog.text, key pg_catalog.text)
RETURNS @extschema@.idem_http_answer_result
AS 'MODULE_PATHNAME', 'idem_http_answer_key' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_http_answer(text, text) IS
    'The HTTP answer of what is stored for an Idempotency-Key now, as idem_http_answer of a claim with the same fingerprint would give it (the IK003 path: another attempt finished the operation): a finished operation is replayed, a processing one under a live lease is 409; NULLs when there is nothing to answer (claim the key).';
REVOKE EXECUTE ON FUNCTION idem_http_answer(text, text) FROM PUBLIC;

-- The relay's batch forms (issue 32, docs/outbox.md and docs/inbox.md) ---------------------------
CREATE FUNCTION idem_outbox_done_batch(
    event_ids pg_catalog.uuid[], attempts integer[], topic pg_catalog.text DEFAULT NULL,
    OUT event_id pg_catalog.uuid)
RETURNS SETOF pg_catalog.uuid
AS 'MODULE_PATHNAME', 'idem_outbox_done_batch' LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 100;
COMMENT ON FUNCTION idem_outbox_done_batch(uuid[], integer[], text) IS
    'Marks done each event of event_ids that is leased under the attempt at the same position of attempts, in one statement; returns the ids it finished. An event it cannot finish (fenced, already finished, unknown) is left out, never raised: the rest of the batch is done.';
REVOKE EXECUTE ON FUNCTION idem_outbox_done_batch(uuid[], integer[], text) FROM PUBLIC;

CREATE FUNCTION idem_outbox_fail_batch(
    event_ids pg_catalog.uuid[], attempts integer[], retryable boolean DEFAULT true,
    error pg_catalog.text DEFAULT NULL, topic pg_catalog.text DEFAULT NULL,
    OUT event_id pg_catalog.uuid, OUT status pg_catalog.text)
RETURNS SETOF pg_catalog.record
AS 'MODULE_PATHNAME', 'idem_outbox_fail_batch' LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 100;
COMMENT ON FUNCTION idem_outbox_fail_batch(uuid[], integer[], boolean, text, text) IS
    'Records a failed delivery of each event of event_ids leased under the attempt at the same position of attempts, as idem_outbox_fail does (one error for the batch); returns (event_id, status) for each: pending (after its backoff) or dead. An event it cannot fail (fenced, finished, unknown) is left out, never raised.';
REVOKE EXECUTE ON FUNCTION idem_outbox_fail_batch(uuid[], integer[], boolean, text, text) FROM PUBLIC;

CREATE FUNCTION idem_inbox_done_batch(
    consumer pg_catalog.text, event_ids pg_catalog.text[], attempts integer[],
    OUT event_id pg_catalog.text, OUT outcome pg_catalog.text)
RETURNS SETOF pg_catalog.record
AS 'MODULE_PATHNAME', 'idem_inbox_done_batch' LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 10;
COMMENT ON FUNCTION idem_inbox_done_batch(text, text[], integer[]) IS
    'Marks done, in one statement, each event of event_ids leased under the attempt at the same position of attempts; returns (event_id, outcome) for each: done, or stale as idem_inbox_done (the entity guard, in the arrays'' order). An event it cannot finish (fenced, finished, unknown) is left out, never raised.';
REVOKE EXECUTE ON FUNCTION idem_inbox_done_batch(text, text[], integer[]) FROM PUBLIC;

-- The outbox's lease without index entries (issue 32, docs/outbox.md "Storage") ------------------
-- The partial indexes read the life stage from expires_at alone (NULL while pending or leased,
-- infinity once dead), so that a lease changes no indexed column; the fillfactor leaves room on
-- each page for the leased versions of its events. The indexes are rebuilt (the update holds the
-- outbox's lock meanwhile: seconds per million events); the fillfactor applies to pages written
-- from now on.
-- Dead events get expires_at infinity, except in a Citus table: there a distributed UPDATE inside
-- the extension's script fails (XX000, 42601); a dead event's NULL serves the module as well (its
-- statements read the status too), and idem_outbox_requeue or a new failure rewrites it.
DO $$
DECLARE
    distributed boolean := false;
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE 'SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition '
                'WHERE logicalrelid OPERATOR(pg_catalog.=) ''idempotency.outbox''::pg_catalog.regclass)'
            INTO distributed;
    END IF;
    IF NOT distributed THEN
        UPDATE idempotency.outbox SET expires_at = 'infinity' WHERE status OPERATOR(pg_catalog.=) 'dead';
    END IF;
END
$$;
-- The two indexes are rebuilt, each statement by EXECUTE
-- so that its query text is its own: in an extension's script the text of every statement is the
-- whole script, which Citus sends to the other nodes when it propagates a change of a distributed
-- outbox (42601); one index a statement (Citus refuses to drop several distributed objects in
-- one, 0A000).
DO $$
BEGIN
    EXECUTE 'DROP INDEX idempotency.outbox_queue';
    EXECUTE 'DROP INDEX idempotency.outbox_key';
    EXECUTE 'CREATE INDEX outbox_queue ON idempotency.outbox (topic, seq) WHERE expires_at IS NULL';
    EXECUTE 'CREATE INDEX outbox_key ON idempotency.outbox (topic, key, seq) '
            'WHERE key IS NOT NULL AND (expires_at IS NULL OR expires_at = ''infinity''::pg_catalog.timestamptz)';
    EXECUTE 'ALTER TABLE idempotency.outbox SET (fillfactor = 50)';
END
$$;
COMMENT ON INDEX idempotency.outbox_queue IS
    'The queue of idem_outbox_next: pending and leased events per topic in emit order.';
COMMENT ON INDEX idempotency.outbox_key IS
    'The per-key order check of idem_outbox_next: the events of a key not yet done, in emit order.';
COMMENT ON TABLE idempotency.outbox IS
    'One row per emitted event: pending (queued, handed out from available_at) | leased (taken by a relay until lease_expires_at) | done (kept until expires_at for dedup_key) | dead (kept with last_error until requeued or deleted; expires_at infinity).';
