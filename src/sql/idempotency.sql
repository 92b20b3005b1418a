-- The idempotency extension's install script: the current definition of every object, one
-- section per feature in the order of docs/ (DEVELOPERS.md "Versions and upgrades"). The
-- Makefile copies it to idempotency--2.0.0.sql. A database of an older version is updated by the
-- committed scripts src/sql/idempotency--<A>--<B>.sql; test/run-all upgrade checks that either
-- way gives the same catalog.
--
-- The script runs as the superuser who calls CREATE EXTENSION. Every object is created in schema
-- idempotency, which the script creates and its owner alone may create in (the control file
-- names pg_catalog, as pg_cron's does: nothing lands in a schema another role owns). Every name
-- is schema-qualified (test/sql-lint), and every function written in SQL or PL/pgSQL pins its
-- own search path (a procedure that commits, which cannot, pins it at the start of each of its
-- transactions).
\echo Use "CREATE EXTENSION idempotency" to load this file. \quit

-- Schema ------------------------------------------------------------------------------------------
-- Functions, procedures, views, types and tables live in one schema that the extension creates:
-- a schema another role made first (say the database owner, to own what a superuser's call
-- resolves to) stops the installation. PUBLIC may look names up in it (USAGE), never create:
-- no role but the extension's owner can add an overload beside a function, so no qualified call
-- (idempotency.idem_claim(...)) can resolve to another role's code. The tables stay closed
-- (REVOKE ALL on each); the functions run their statements as the schema's owner
-- (docs/operations.md "Privileges").
DO $$
BEGIN
    IF pg_catalog.to_regnamespace('idempotency') IS NOT NULL THEN
        RAISE EXCEPTION 'schema "idempotency" already exists (owner %)',
            (SELECT n.nspowner::pg_catalog.regrole FROM pg_catalog.pg_namespace n
             WHERE n.nspname OPERATOR(pg_catalog.=) 'idempotency')
            USING ERRCODE = '42P06',
                  DETAIL = 'The extension creates its schema itself, so that no other role owns '
                           'what its functions are found in.',
                  HINT = 'Drop or rename that schema (after checking what it holds), then run '
                         'CREATE EXTENSION idempotency again.';
    END IF;
END
$$;
CREATE SCHEMA idempotency;
REVOKE ALL ON SCHEMA idempotency FROM PUBLIC;
GRANT USAGE ON SCHEMA idempotency TO PUBLIC;
COMMENT ON SCHEMA idempotency IS
    'The idempotency extension: its idem_* functions, procedures, views and types, and its tables (use the functions, not the tables). Only the extension''s owner may create in it.';

-- Idempotency-Key records (docs/records.md) -------------------------------------------------------
-- response_body and response_headers: what a replay answers, the exact body bytes (jsonb would
-- re-serialise a body: key order and spacing change) and the headers the service chose to keep.
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
    response_body    bytea,
    response_headers jsonb,
    PRIMARY KEY (scope, key)
) WITH (fillfactor = 90);
REVOKE ALL ON idempotency.records FROM PUBLIC;
COMMENT ON TABLE idempotency.records IS
    'One row per (scope, Idempotency-Key): state, fencing token (attempt), lease and stored result.';
COMMENT ON COLUMN idempotency.records.response_body IS
    'The exact bytes of the stored response body, replayed verbatim; NULL when only response (jsonb) was stored.';
COMMENT ON COLUMN idempotency.records.response_headers IS
    'The response headers to replay, a JSON object of header name to string value (Location, Content-Type, ETag, ...).';
SELECT pg_catalog.pg_extension_config_dump('idempotency.records', '');

-- idem_claim returns a named row type: the executor takes the row description from the type
-- cache instead of building it from pg_proc on every call (bench/RESULTS.md "Load and cost").
CREATE TYPE idempotency.idem_claim_result AS (
    outcome          text,
    attempt          integer,
    resource_id      text,
    response         jsonb,
    response_status  integer,
    lease_expires_at timestamptz,
    expires_at       timestamptz,
    response_body    bytea,
    response_headers jsonb
);
COMMENT ON TYPE idempotency.idem_claim_result IS
    'Result row of idem_claim: outcome (claimed | replayed | in_progress | mismatch | reclaimed), attempt (the fencing token), the stored result of a replay (resource_id, response, response_status, response_body, response_headers), lease_expires_at and expires_at.';

-- The planner fills a call's omitted arguments with their defaults, and every execution of the
-- plan then evaluates them. idem_claim_support (src/records_claim_support.cpp) drops the
-- trailing ones that are at their defaults; idem_claim takes an absent argument as its default.
-- A support function is set by a superuser, as CREATE EXTENSION idempotency is run. The planner
-- calls it without an EXECUTE check: PUBLIC needs no grant.
CREATE FUNCTION idempotency.idem_claim_support(pg_catalog.internal) RETURNS pg_catalog.internal
AS 'MODULE_PATHNAME', 'idem_claim_support' LANGUAGE C STRICT;
COMMENT ON FUNCTION idempotency.idem_claim_support(internal) IS
    'Planner support of idem_claim: drops the trailing arguments at their defaults from the plan (fewer expressions to evaluate per call).';

CREATE FUNCTION idempotency.idem_claim(
    scope pg_catalog.text, key pg_catalog.text, fingerprint pg_catalog.bytea DEFAULT NULL,
    lease interval DEFAULT NULL, ttl interval DEFAULT NULL, wait boolean DEFAULT true)
RETURNS idempotency.idem_claim_result
AS 'MODULE_PATHNAME', 'idem_claim' LANGUAGE C VOLATILE PARALLEL UNSAFE
SUPPORT idempotency.idem_claim_support;
COMMENT ON FUNCTION idempotency.idem_claim(text, text, bytea, interval, interval, boolean) IS
    'Claims an Idempotency-Key in a scope. outcome: claimed | replayed | in_progress | mismatch | reclaimed; attempt is the fencing token.';

CREATE FUNCTION idempotency.idem_complete(
    scope pg_catalog.text, key pg_catalog.text, attempt integer,
    resource_id pg_catalog.text DEFAULT NULL, response pg_catalog.jsonb DEFAULT NULL,
    response_status integer DEFAULT NULL, response_body pg_catalog.bytea DEFAULT NULL,
    response_headers pg_catalog.jsonb DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_complete' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idempotency.idem_complete(text, text, integer, text, jsonb, integer, bytea, jsonb) IS
    'Stores the result of the claimed attempt (response_body: the exact body bytes to replay; response_headers: a JSON object of header name to value); true when stored, false when the same result was already stored by this attempt.';

CREATE FUNCTION idempotency.idem_fail(
    scope pg_catalog.text, key pg_catalog.text, attempt integer, retryable boolean DEFAULT true,
    response pg_catalog.jsonb DEFAULT NULL, response_status integer DEFAULT NULL,
    response_body pg_catalog.bytea DEFAULT NULL, response_headers pg_catalog.jsonb DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_fail' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idempotency.idem_fail(text, text, integer, boolean, jsonb, integer, bytea, jsonb) IS
    'Records a failure of the claimed attempt: retryable makes the key claimable again, otherwise the failure (with its response, response_body and response_headers) is replayed like a result.';

CREATE FUNCTION idempotency.idem_heartbeat(
    scope pg_catalog.text, key pg_catalog.text, attempt integer, lease interval DEFAULT NULL)
RETURNS pg_catalog.timestamptz
AS 'MODULE_PATHNAME', 'idem_heartbeat' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idempotency.idem_heartbeat(text, text, integer, interval) IS
    'Extends the lease of the claimed attempt and returns the new lease_expires_at.';

CREATE FUNCTION idempotency.idem_lookup(
    scope pg_catalog.text, key pg_catalog.text,
    OUT status pg_catalog.text, OUT fingerprint pg_catalog.bytea, OUT attempt integer,
    OUT resource_id pg_catalog.text, OUT response pg_catalog.jsonb, OUT response_status integer,
    OUT created_at pg_catalog.timestamptz, OUT updated_at pg_catalog.timestamptz,
    OUT lease_expires_at pg_catalog.timestamptz, OUT expires_at pg_catalog.timestamptz,
    OUT response_body pg_catalog.bytea, OUT response_headers pg_catalog.jsonb)
RETURNS SETOF pg_catalog.record
AS 'MODULE_PATHNAME', 'idem_lookup' LANGUAGE C STABLE PARALLEL UNSAFE ROWS 1;
COMMENT ON FUNCTION idempotency.idem_lookup(text, text) IS
    'Returns the live record of an Idempotency-Key (zero or one row); status: processing | completed | failed.';

-- Every function that reads or changes stored state is not executable by PUBLIC: grant them to a
-- group role (docs/operations.md "Privileges"; test/tap/operations.sql checks that only the pure
-- functions are executable by PUBLIC).
REVOKE EXECUTE ON FUNCTION idempotency.idem_claim_support(internal),
    idempotency.idem_claim(text, text, bytea, interval, interval, boolean),
    idempotency.idem_complete(text, text, integer, text, jsonb, integer, bytea, jsonb),
    idempotency.idem_fail(text, text, integer, boolean, jsonb, integer, bytea, jsonb),
    idempotency.idem_heartbeat(text, text, integer, interval), idempotency.idem_lookup(text, text)
FROM PUBLIC;

-- The HTTP answer of a claim's outcome or of a key's stored result (docs/records.md "The HTTP
-- answer", src/http_answer.cpp): status, headers (Retry-After, Idempotent-Replayed, the stored
-- ones) and body bytes, NULLs when the handler must run. The claim form reads only its argument
-- (PUBLIC may call it); the key form reads the record, as idem_lookup does. A named row type, as
-- idem_claim's: the executor takes its description from the type cache.
CREATE TYPE idempotency.idem_http_answer_result AS (
    status  integer,
    headers pg_catalog.jsonb,
    body    pg_catalog.bytea
);
COMMENT ON TYPE idempotency.idem_http_answer_result IS
    'Result row of idem_http_answer: the HTTP status, the headers (a JSON object of name to string) and the body bytes to send; all NULL when the handler must run.';

CREATE FUNCTION idempotency.idem_http_answer(
    claim idempotency.idem_claim_result)
RETURNS idempotency.idem_http_answer_result
AS 'MODULE_PATHNAME', 'idem_http_answer_claim' LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION idempotency.idem_http_answer(idempotency.idem_claim_result) IS
    'The HTTP answer of an idem_claim result: NULLs for claimed and reclaimed (run the handler); replayed: the stored status (200 if none), the stored headers with Idempotent-Replayed: true, the stored body bytes (or the jsonb response as text); in_progress: 409 with Retry-After (whole seconds to the lease end, at least 1) and a problem+json body; mismatch: 422 with a problem+json body.';

CREATE FUNCTION idempotency.idem_http_answer(
    scope pg_catalog.text, key pg_catalog.text)
RETURNS idempotency.idem_http_answer_result
AS 'MODULE_PATHNAME', 'idem_http_answer_key' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idempotency.idem_http_answer(text, text) IS
    'The HTTP answer of what is stored for an Idempotency-Key now, as idem_http_answer of a claim with the same fingerprint would give it (the IK003 path: another attempt finished the operation): a finished operation is replayed, a processing one under a live lease is 409; NULLs when there is nothing to answer (claim the key).';
REVOKE EXECUTE ON FUNCTION idempotency.idem_http_answer(text, text) FROM PUBLIC;

-- The Idempotency-Key header (docs/key_header.md) -------------------------------------------------
CREATE FUNCTION idempotency.idem_key_from_header(value pg_catalog.text)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'idem_key_from_header' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION idempotency.idem_key_from_header(text) IS
    'The key an Idempotency-Key header value carries: an RFC 8941 Structured Field string ("k", the IETF draft''s form; parameters ignored) or an unquoted key (k), the same key either way; 22023 for a malformed value.';

-- Request fingerprints: RFC 8785 JSON Canonicalization Scheme + SHA-256 (docs/fingerprints.md) --
CREATE FUNCTION idempotency.idem_canonical_json(doc pg_catalog.jsonb, exact_numbers boolean DEFAULT false)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'idem_canonical_json_jsonb' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION idempotency.idem_canonical_json(jsonb, boolean) IS
    'RFC 8785 (JCS) canonical text of a jsonb value; exact_numbers keeps every decimal digit instead of IEEE-754 doubles.';

CREATE FUNCTION idempotency.idem_canonical_json(doc pg_catalog.text, exact_numbers boolean DEFAULT false)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'idem_canonical_json_text' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION idempotency.idem_canonical_json(text, boolean) IS
    'RFC 8785 (JCS) canonical text of raw JSON text, parsed strictly as I-JSON (no duplicate names, lone surrogates, NaN/Infinity or invalid UTF-8).';

CREATE FUNCTION idempotency.idem_fingerprint(doc pg_catalog.jsonb, exclude pg_catalog.text[] DEFAULT NULL,
                                 include pg_catalog.text[] DEFAULT NULL,
                                 exact_numbers boolean DEFAULT false)
RETURNS pg_catalog.bytea
AS 'MODULE_PATHNAME', 'idem_fingerprint_jsonb' LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION idempotency.idem_fingerprint(jsonb, text[], text[], boolean) IS
    'SHA-256 (32 bytes) of the RFC 8785 canonical form of a jsonb request after dropping the exclude paths and keeping only the include paths; NULL for a NULL document.';

CREATE FUNCTION idempotency.idem_fingerprint(doc pg_catalog.text, exclude pg_catalog.text[] DEFAULT NULL,
                                 include pg_catalog.text[] DEFAULT NULL,
                                 exact_numbers boolean DEFAULT false)
RETURNS pg_catalog.bytea
AS 'MODULE_PATHNAME', 'idem_fingerprint_text' LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION idempotency.idem_fingerprint(text, text[], text[], boolean) IS
    'SHA-256 (32 bytes) of the RFC 8785 canonical form of raw JSON text (strict I-JSON) after the exclude/include path filters; NULL for a NULL document.';

CREATE FUNCTION idempotency.idem_fingerprint(doc pg_catalog.bytea, exclude pg_catalog.text[] DEFAULT NULL,
                                 include pg_catalog.text[] DEFAULT NULL,
                                 exact_numbers boolean DEFAULT false)
RETURNS pg_catalog.bytea
AS 'MODULE_PATHNAME', 'idem_fingerprint_bytea' LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION idempotency.idem_fingerprint(bytea, text[], text[], boolean) IS
    'SHA-256 (32 bytes) of the RFC 8785 canonical form of a raw request body given as bytes (UTF-8; invalid UTF-8 is 22021), after the exclude/include path filters; the same digest as the text form of the same JSON; NULL for a NULL document.';

-- The HTTP contract (docs/records.md "The HTTP contract"): what every client package asks the
-- database instead of deciding itself. idem_http_begin reads the request (the principal, the
-- operation, the Idempotency-Key header, the raw body) and claims; idem_http_end stores the
-- handler's answer or says to release it; idem_http_release releases; idem_http_errors is the
-- one map from a SQLSTATE to the answer. Begin, end and release are C functions that call the
-- claim, the complete and the fail directly (src/http_contract.cpp): EXECUTE on idem_http_begin
-- is the right to claim a key of the scope it derives, on idem_http_end to complete it, on
-- idem_http_release to fail it; none of them needs EXECUTE on idem_claim, idem_complete or
-- idem_fail, and a scope bound to another role refuses them as it refuses those (docs/tenants.md).
CREATE TYPE idempotency.idem_http_begin_result AS (
    scope     pg_catalog.text,
    key       pg_catalog.text,
    attempt   integer,
    run       boolean,
    reclaimed boolean,
    status    integer,
    headers   pg_catalog.jsonb,
    body      pg_catalog.bytea
);
COMMENT ON TYPE idempotency.idem_http_begin_result IS
    'Result row of idem_http_begin: run true with scope, key and attempt (the fencing token) when the handler runs (reclaimed: an earlier attempt''s effect is unknown, reconcile); run false with the answer to send (status, headers, body) otherwise.';

CREATE FUNCTION idempotency.idem_http_problem(status integer, detail pg_catalog.text,
                                              retry_after integer DEFAULT NULL)
RETURNS idempotency.idem_http_answer_result
AS 'MODULE_PATHNAME', 'idem_http_problem' LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION idempotency.idem_http_problem(integer, text, integer) IS
    'An RFC 9457 problem answer as the HTTP contract words it: the status, Content-Type: application/problem+json (and Retry-After when given) and the body {"type":"about:blank","title":<reason phrase>,"status":...,"detail":...}.';

CREATE FUNCTION idempotency.idem_http_scope(principal pg_catalog.text, operation pg_catalog.text,
                                            shared_key_space boolean DEFAULT false)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'idem_http_scope' LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION idempotency.idem_http_scope(text, text, boolean) IS
    'The scope of an HTTP request''s record: the principal (its %, / and * percent-encoded), a slash, the operation (e.g. user:42/POST /v1/payments); with shared_key_space every principal shares *\/operation; NULL without a principal.';

CREATE FUNCTION idempotency.idem_http_begin(
    principal pg_catalog.text, operation pg_catalog.text, key_header pg_catalog.text,
    body pg_catalog.bytea, lease interval DEFAULT NULL, ttl interval DEFAULT NULL,
    shared_key_space boolean DEFAULT false)
RETURNS idempotency.idem_http_begin_result
AS 'MODULE_PATHNAME', 'idem_http_begin' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idempotency.idem_http_begin(text, text, text, bytea, interval, interval, boolean) IS
    'The start of an idempotent HTTP request: the scope from the principal and the operation, the key from the Idempotency-Key header, the fingerprint of the raw body (I-JSON, or empty), and a claim that never waits; run true: run the handler with the attempt; else the answer to send (400 for a missing or malformed header or body, 403 without a principal, the replay, 409 with Retry-After for a request in flight, 422 for another body).';

CREATE FUNCTION idempotency.idem_http_stored(status integer)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_http_stored' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION idempotency.idem_http_stored(integer) IS
    'Whether an answer of this status is the request''s result, stored and replayed: 2xx, 3xx and 4xx but 401, 403, 408, 409, 423, 424, 425 and 429 (the same request may succeed later); 1xx and 5xx are not (the key is released for a retry).';

CREATE FUNCTION idempotency.idem_http_end(
    scope pg_catalog.text, key pg_catalog.text, attempt integer, status integer,
    headers pg_catalog.jsonb DEFAULT NULL, body pg_catalog.bytea DEFAULT NULL,
    resource_id pg_catalog.text DEFAULT NULL,
    stored_headers pg_catalog.text[] DEFAULT '{Content-Type,Location}')
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_http_end' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idempotency.idem_http_end(text, text, integer, integer, jsonb, bytea, text, text[]) IS
    'The end of an idempotent HTTP request whose handler ran: true when its answer is the result (idem_http_stored), stored byte for byte with the stored_headers (named as the list spells them) and resource_id (default: the last path segment of Location) in the handler''s transaction (commit it); false when it is not (roll back, then idem_http_release). Errors of idem_complete (IK002, IK003, 54000, 22023) as idem_http_errors maps them.';

CREATE FUNCTION idempotency.idem_http_release(scope pg_catalog.text, key pg_catalog.text,
                                              attempt integer)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_http_release' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idempotency.idem_http_release(text, text, integer) IS
    'Releases the key of an attempt whose answer is not stored (idem_http_end false, an exception, an error), after its transaction rolled back: a processing record of this attempt becomes failed and retryable (two-phase); false when there is nothing of this attempt to release.';

CREATE FUNCTION idempotency.idem_http_errors(
    OUT sqlstate pg_catalog.text, OUT status integer, OUT headers pg_catalog.jsonb,
    OUT body pg_catalog.bytea, OUT retryable boolean)
RETURNS SETOF pg_catalog.record
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp
AS $$
SELECT e.sqlstate, p.status, p.headers, p.body, e.retryable
FROM (VALUES
    ('IK002', 409, 1,    true,  'Another attempt took this Idempotency-Key over; retry to get its answer.'),
    ('IK003', NULL, NULL, false, NULL),
    ('IK001', 500, NULL, false, 'The record of this request is missing.'),
    ('54000', 500, NULL, false, 'The answer is too large to store.'),
    ('25P02', 500, NULL, false, 'The request''s transaction failed earlier: an error was caught without a savepoint.'),
    ('25006', 503, 1,    true,  'The database is read-only; retry.'),
    ('40001', 503, 1,    true,  'The request conflicted with another; retry.'),
    ('40P01', 503, 1,    true,  'The request conflicted with another; retry.'),
    ('55P03', 503, 1,    true,  'The request conflicted with another; retry.'),
    ('57014', 503, 1,    true,  'The request took too long; retry.'),
    ('53300', 503, 1,    true,  'The database is unavailable; retry.'),
    ('57P01', 503, 1,    true,  'The database is unavailable; retry.'),
    ('57P02', 503, 1,    true,  'The database is unavailable; retry.'),
    ('57P03', 503, 1,    true,  'The database is unavailable; retry.'),
    ('08',    503, 1,    true,  'The database is unavailable; retry.'),
    (NULL,    500, NULL, false, 'The request failed.')
) AS e(sqlstate, status, retry_after, retryable, detail)
LEFT JOIN LATERAL idempotency.idem_http_problem(e.status, e.detail, e.retry_after) p ON e.status IS NOT NULL
$$;
COMMENT ON FUNCTION idempotency.idem_http_errors() IS
    'The one map from an error to the HTTP answer, read once by each client package: sqlstate (five characters; two for a class; NULL for anything else, a handler''s exception among them), the answer (status, headers, body), retryable (a retry with the same key is safe and may succeed). IK003 has no answer of its own: answer idem_http_answer(scope, key), or the IK002 answer when that gives NULLs.';

REVOKE EXECUTE ON FUNCTION
    idempotency.idem_http_begin(text, text, text, bytea, interval, interval, boolean),
    idempotency.idem_http_end(text, text, integer, integer, jsonb, bytea, text, text[]),
    idempotency.idem_http_release(text, text, integer)
FROM PUBLIC;

-- Utilities: UUIDv7, HMAC and constant-time comparison (docs/utilities.md) ------------------------
CREATE FUNCTION idempotency.idem_uuid_v7()
RETURNS pg_catalog.uuid
AS 'MODULE_PATHNAME', 'idem_uuid_v7' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION idempotency.idem_uuid_v7() IS
    'A new RFC 9562 version-7 UUID (Unix milliseconds + sequence + 62 random bits), strictly increasing within the session.';

CREATE FUNCTION idempotency.idem_uuid_v7_time(id pg_catalog.uuid)
RETURNS pg_catalog.timestamptz
AS 'MODULE_PATHNAME', 'idem_uuid_v7_time' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION idempotency.idem_uuid_v7_time(uuid) IS
    'The millisecond timestamp embedded in a version-7 UUID; error 22023 for other UUIDs.';

CREATE FUNCTION idempotency.idem_hmac_sha256(key pg_catalog.bytea, message pg_catalog.bytea)
RETURNS pg_catalog.bytea
AS 'MODULE_PATHNAME', 'idem_hmac_sha256' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION idempotency.idem_hmac_sha256(bytea, bytea) IS
    'HMAC-SHA256 (RFC 2104, FIPS 180-4) of message under key, 32 bytes.';

CREATE FUNCTION idempotency.idem_secure_equal(a pg_catalog.bytea, b pg_catalog.bytea)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_secure_equal' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION idempotency.idem_secure_equal(bytea, bytea) IS
    'Compares two byte strings in time that depends only on their lengths (for signatures and tokens).';

-- Inbox: per-consumer event dedup, a leased work queue, an ordering guard (docs/inbox.md) -------
-- The primary key leads with the event id: most rows of an inbox share one consumer, so a key
-- that started with it would make every index comparison compare two columns instead of one.
-- available_at: a retryable failure queues the event again from then (exponential
-- backoff with jitter, src/leased_queue.cpp).
CREATE TABLE idempotency.inbox (
    consumer         text        NOT NULL,
    event_id         text        NOT NULL,
    status           text        NOT NULL
                     CHECK (status IN ('received', 'processing', 'done', 'failed', 'stale')),
    payload_hash     bytea,
    event_type       text,
    payload          bytea,
    entity_key       text,
    entity_seq       bigint,
    attempt          integer     NOT NULL CHECK (attempt >= 0),
    last_error       text,
    lease_expires_at timestamptz,
    received_at      timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    expires_at       timestamptz NOT NULL,
    available_at     timestamptz,
    PRIMARY KEY (event_id, consumer),
    CHECK ((entity_key IS NULL) = (entity_seq IS NULL))
) WITH (fillfactor = 90);
-- The queue index ends with the event id, the tie-breaker of idem_inbox_next's ORDER BY
-- received_at, event_id: the index scan yields the queue in that order and the LIMIT stops after
-- the batch.
CREATE INDEX inbox_queue ON idempotency.inbox (consumer, received_at, event_id)
    WHERE status IN ('received', 'processing');
REVOKE ALL ON idempotency.inbox FROM PUBLIC;
COMMENT ON TABLE idempotency.inbox IS
    'One row per (consumer, event id) seen: received (queued) | processing (leased) | done | failed (dead) | stale (older than the last applied event of its entity).';
COMMENT ON COLUMN idempotency.inbox.available_at IS
    'A queued (received) event is not handed out before this time (a retry''s backoff); NULL: at once.';
COMMENT ON INDEX idempotency.inbox_queue IS
    'The work queue of idem_inbox_next: queued and leased events per consumer in arrival order (event id breaks ties).';
SELECT pg_catalog.pg_extension_config_dump('idempotency.inbox', '');

CREATE TABLE idempotency.inbox_entities (
    consumer   text        NOT NULL,
    entity_key text        NOT NULL,
    last_seq   bigint      NOT NULL,
    event_id   text        NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (consumer, entity_key)
);
REVOKE ALL ON idempotency.inbox_entities FROM PUBLIC;
COMMENT ON TABLE idempotency.inbox_entities IS
    'Ordering guard: the sequence number of the last event applied per (consumer, entity key), and that event''s id.';
SELECT pg_catalog.pg_extension_config_dump('idempotency.inbox_entities', '');

CREATE FUNCTION idempotency.idem_inbox_receive(
    consumer pg_catalog.text, event_id pg_catalog.text, payload_hash pg_catalog.bytea DEFAULT NULL,
    enqueue boolean DEFAULT false, event_type pg_catalog.text DEFAULT NULL,
    payload pg_catalog.bytea DEFAULT NULL, entity_key pg_catalog.text DEFAULT NULL,
    entity_seq bigint DEFAULT NULL, ttl interval DEFAULT NULL)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'idem_inbox_receive' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idempotency.idem_inbox_receive(text, text, bytea, boolean, text, bytea, text, bigint, interval) IS
    'Records an event for a consumer in the caller''s transaction. outcome: new | duplicate | mismatch (same id, different payload hash) | stale (older than the last applied event of its entity). enqueue stores it for idem_inbox_next.';

CREATE FUNCTION idempotency.idem_inbox_next(
    consumer pg_catalog.text, batch_size integer DEFAULT 10, lease interval DEFAULT NULL,
    OUT event_id pg_catalog.text, OUT event_type pg_catalog.text, OUT payload pg_catalog.bytea,
    OUT attempt integer, OUT entity_key pg_catalog.text, OUT entity_seq bigint,
    OUT payload_hash pg_catalog.bytea, OUT received_at pg_catalog.timestamptz,
    OUT lease_expires_at pg_catalog.timestamptz)
RETURNS SETOF pg_catalog.record
AS 'MODULE_PATHNAME', 'idem_inbox_next' LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 10;
COMMENT ON FUNCTION idempotency.idem_inbox_next(text, integer, interval) IS
    'Leases up to batch_size queued events of a consumer (and events whose lease expired) with FOR UPDATE SKIP LOCKED, oldest first; attempt is the fencing token for idem_inbox_done / idem_inbox_fail.';

CREATE FUNCTION idempotency.idem_inbox_done(consumer pg_catalog.text, event_id pg_catalog.text, attempt integer)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'idem_inbox_done' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idempotency.idem_inbox_done(text, text, integer) IS
    'Marks a leased event done in the worker''s transaction; returns done, or stale when a newer event of its entity was applied (skip the effect then).';

-- The batch form (a name of its own, as idem_outbox_done_batch).
CREATE FUNCTION idempotency.idem_inbox_done_batch(
    consumer pg_catalog.text, event_ids pg_catalog.text[], attempts integer[],
    OUT event_id pg_catalog.text, OUT outcome pg_catalog.text)
RETURNS SETOF pg_catalog.record
AS 'MODULE_PATHNAME', 'idem_inbox_done_batch' LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 10;
COMMENT ON FUNCTION idempotency.idem_inbox_done_batch(text, text[], integer[]) IS
    'Marks done, in one statement, each event of event_ids leased under the attempt at the same position of attempts; returns (event_id, outcome) for each: done, or stale as idem_inbox_done (the entity guard, in the arrays'' order). An event it cannot finish (fenced, finished, unknown) is left out, never raised.';

CREATE FUNCTION idempotency.idem_inbox_fail(
    consumer pg_catalog.text, event_id pg_catalog.text, attempt integer,
    retryable boolean DEFAULT true, error pg_catalog.text DEFAULT NULL,
    max_attempts integer DEFAULT NULL)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'idem_inbox_fail' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idempotency.idem_inbox_fail(text, text, integer, boolean, text, integer) IS
    'Records a failed handling of a leased event; returns received (queued again after a backoff) when retryable and below max_attempts (NULL: idempotency.max_attempts), else failed (dead, kept for inspection).';

REVOKE EXECUTE ON FUNCTION
    idempotency.idem_inbox_receive(text, text, bytea, boolean, text, bytea, text, bigint, interval),
    idempotency.idem_inbox_next(text, integer, interval), idempotency.idem_inbox_done(text, text, integer),
    idempotency.idem_inbox_done_batch(text, text[], integer[]),
    idempotency.idem_inbox_fail(text, text, integer, boolean, text, integer)
FROM PUBLIC;

-- Webhooks: Standard Webhooks and Stripe signatures, a verified receive (docs/webhooks.md) -------
-- idem_webhook_receive never raises for what the sender controls (src/webhooks.cpp): an event id
-- that cannot be recorded is the outcome invalid_event_id.
CREATE FUNCTION idempotency.idem_webhook_verify_standard(
    secrets pg_catalog.text[], msg_id pg_catalog.text, msg_timestamp pg_catalog.text,
    payload pg_catalog.bytea, signature_header pg_catalog.text,
    tolerance interval DEFAULT NULL, now pg_catalog.timestamptz DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_webhook_verify_standard' LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION idempotency.idem_webhook_verify_standard(text[], text, text, bytea, text, interval, timestamptz) IS
    'Standard Webhooks: true when webhook-signature holds a v1 HMAC-SHA256 of msg_id.timestamp.payload under one of the whsec_ secrets and the timestamp is within the tolerance (default idempotency.webhook_tolerance).';
CREATE FUNCTION idempotency.idem_webhook_verify_standard(
    secrets pg_catalog.text[], msg_id pg_catalog.text, msg_timestamp pg_catalog.text,
    payload pg_catalog.text, signature_header pg_catalog.text,
    tolerance interval DEFAULT NULL, now pg_catalog.timestamptz DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_webhook_verify_standard' LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION idempotency.idem_webhook_verify_standard(text[], text, text, text, text, interval, timestamptz) IS
    'Standard Webhooks signature check over the raw text bytes of payload (see the bytea form).';
CREATE FUNCTION idempotency.idem_webhook_verify_standard(
    secret pg_catalog.text, msg_id pg_catalog.text, msg_timestamp pg_catalog.text,
    payload pg_catalog.bytea, signature_header pg_catalog.text,
    tolerance interval DEFAULT NULL, now pg_catalog.timestamptz DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_webhook_verify_standard_1' LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION idempotency.idem_webhook_verify_standard(text, text, text, bytea, text, interval, timestamptz) IS
    'Standard Webhooks signature check with one secret (see the text[] form).';
CREATE FUNCTION idempotency.idem_webhook_verify_standard(
    secret pg_catalog.text, msg_id pg_catalog.text, msg_timestamp pg_catalog.text,
    payload pg_catalog.text, signature_header pg_catalog.text,
    tolerance interval DEFAULT NULL, now pg_catalog.timestamptz DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_webhook_verify_standard_1' LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION idempotency.idem_webhook_verify_standard(text, text, text, text, text, interval, timestamptz) IS
    'Standard Webhooks signature check with one secret over the raw text bytes of payload.';

CREATE FUNCTION idempotency.idem_webhook_verify_stripe(
    secrets pg_catalog.text[], header pg_catalog.text, payload pg_catalog.bytea,
    tolerance interval DEFAULT NULL, now pg_catalog.timestamptz DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_webhook_verify_stripe' LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION idempotency.idem_webhook_verify_stripe(text[], text, bytea, interval, timestamptz) IS
    'Stripe-style: true when the header t=<seconds>,v1=<hex> holds an HMAC-SHA256 of t.payload under one of the secrets (used as raw bytes) and t is within the tolerance.';
CREATE FUNCTION idempotency.idem_webhook_verify_stripe(
    secrets pg_catalog.text[], header pg_catalog.text, payload pg_catalog.text,
    tolerance interval DEFAULT NULL, now pg_catalog.timestamptz DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_webhook_verify_stripe' LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION idempotency.idem_webhook_verify_stripe(text[], text, text, interval, timestamptz) IS
    'Stripe-style signature check over the raw text bytes of payload (see the bytea form).';
CREATE FUNCTION idempotency.idem_webhook_verify_stripe(
    secret pg_catalog.text, header pg_catalog.text, payload pg_catalog.bytea,
    tolerance interval DEFAULT NULL, now pg_catalog.timestamptz DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_webhook_verify_stripe_1' LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION idempotency.idem_webhook_verify_stripe(text, text, bytea, interval, timestamptz) IS
    'Stripe-style signature check with one secret (see the text[] form).';
CREATE FUNCTION idempotency.idem_webhook_verify_stripe(
    secret pg_catalog.text, header pg_catalog.text, payload pg_catalog.text,
    tolerance interval DEFAULT NULL, now pg_catalog.timestamptz DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_webhook_verify_stripe_1' LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION idempotency.idem_webhook_verify_stripe(text, text, text, interval, timestamptz) IS
    'Stripe-style signature check with one secret over the raw text bytes of payload.';

CREATE FUNCTION idempotency.idem_webhook_sign_standard(
    secret pg_catalog.text, msg_id pg_catalog.text, msg_timestamp pg_catalog.text,
    payload pg_catalog.bytea)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'idem_webhook_sign_standard' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION idempotency.idem_webhook_sign_standard(text, text, text, bytea) IS
    'The webhook-signature value v1,<base64> a Standard Webhooks sender computes (for senders and tests).';
CREATE FUNCTION idempotency.idem_webhook_sign_standard(
    secret pg_catalog.text, msg_id pg_catalog.text, msg_timestamp pg_catalog.text,
    payload pg_catalog.text)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'idem_webhook_sign_standard' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION idempotency.idem_webhook_sign_standard(text, text, text, text) IS
    'The Standard Webhooks v1,<base64> signature over the raw text bytes of payload.';

CREATE FUNCTION idempotency.idem_webhook_sign_stripe(secret pg_catalog.text, msg_timestamp bigint,
payload pg_catalog.bytea)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'idem_webhook_sign_stripe' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION idempotency.idem_webhook_sign_stripe(text, bigint, bytea) IS
    'The Stripe-style header value t=<timestamp>,v1=<hex> (for senders and tests).';
CREATE FUNCTION idempotency.idem_webhook_sign_stripe(secret pg_catalog.text, msg_timestamp bigint,
payload pg_catalog.text)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'idem_webhook_sign_stripe' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION idempotency.idem_webhook_sign_stripe(text, bigint, text) IS
    'The Stripe-style header value over the raw text bytes of payload.';

CREATE FUNCTION idempotency.idem_webhook_receive(
    consumer pg_catalog.text, scheme pg_catalog.text, secrets pg_catalog.text[],
    event_id pg_catalog.text, payload pg_catalog.bytea,
    signature_header pg_catalog.text, msg_timestamp pg_catalog.text DEFAULT NULL,
    event_type pg_catalog.text DEFAULT NULL,
    enqueue boolean DEFAULT false, entity_key pg_catalog.text DEFAULT NULL,
    entity_seq bigint DEFAULT NULL,
    tolerance interval DEFAULT NULL, ttl interval DEFAULT NULL,
    now pg_catalog.timestamptz DEFAULT NULL)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'idem_webhook_receive' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idempotency.idem_webhook_receive(text, text, text[], text, bytea, text, text, text, boolean, text, bigint, interval, interval, timestamptz) IS
    'Verifies a webhook (scheme standard | stripe) and records it in the inbox with the SHA-256 of the payload as its hash. outcome: invalid_signature | stale_timestamp | invalid_event_id (nothing written) | new | duplicate | mismatch | stale. What the sender controls never raises.';
CREATE FUNCTION idempotency.idem_webhook_receive(
    consumer pg_catalog.text, scheme pg_catalog.text, secrets pg_catalog.text[],
    event_id pg_catalog.text, payload pg_catalog.text,
    signature_header pg_catalog.text, msg_timestamp pg_catalog.text DEFAULT NULL,
    event_type pg_catalog.text DEFAULT NULL,
    enqueue boolean DEFAULT false, entity_key pg_catalog.text DEFAULT NULL,
    entity_seq bigint DEFAULT NULL,
    tolerance interval DEFAULT NULL, ttl interval DEFAULT NULL,
    now pg_catalog.timestamptz DEFAULT NULL)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'idem_webhook_receive' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idempotency.idem_webhook_receive(text, text, text[], text, text, text, text, text, boolean, text, bigint, interval, interval, timestamptz) IS
    'Verifies a webhook and records it in the inbox; payload given as text, signed and stored as its raw bytes. outcome as for the bytea form.';

REVOKE EXECUTE ON FUNCTION
    idempotency.idem_webhook_receive(text, text, text[], text, bytea, text, text, text, boolean, text, bigint,
                         interval, interval, timestamptz),
    idempotency.idem_webhook_receive(text, text, text[], text, text, text, text, text, boolean, text, bigint,
                         interval, interval, timestamptz)
FROM PUBLIC;

-- Outbox: events written in the caller's transaction, leased to relays per key in emit order ----
-- (docs/outbox.md)
CREATE SEQUENCE idempotency.outbox_seq;
REVOKE ALL ON SEQUENCE idempotency.outbox_seq FROM PUBLIC;
COMMENT ON SEQUENCE idempotency.outbox_seq IS
    'Emit order of outbox events (taken under the lock of the event''s key, so per key it is the commit order too).';

CREATE TABLE idempotency.outbox (
    event_id         uuid        NOT NULL,
    topic            text        NOT NULL,
    seq              bigint      NOT NULL,
    key              text,
    dedup_key        text,
    payload          jsonb,
    payload_bytes    bytea,
    headers          jsonb,
    status           text        NOT NULL CHECK (status IN ('pending', 'leased', 'done', 'dead')),
    attempt          integer     NOT NULL,
    attempt_base     integer     NOT NULL,
    last_error       text,
    emitted_at       timestamptz NOT NULL,
    available_at     timestamptz NOT NULL,
    lease_expires_at timestamptz,
    updated_at       timestamptz NOT NULL,
    expires_at       timestamptz,
    PRIMARY KEY (event_id, topic)
) WITH (fillfactor = 50);
-- The indexes read the life stage from expires_at alone: NULL while pending or leased, the end of
-- the retention once done, infinity once dead. A lease (pending <-> leased) then changes no
-- indexed column and its row version stays on its page (HOT: no index entry), for which the
-- fillfactor leaves room for a whole batch (docs/outbox.md "Storage").
-- The relay's queue: events not yet done or dead, per topic in emit order.
CREATE INDEX outbox_queue ON idempotency.outbox (topic, seq)
    WHERE expires_at IS NULL;
-- The order check: the unfinished (and dead) events of a key, in emit order.
CREATE INDEX outbox_key ON idempotency.outbox (topic, key, seq)
    WHERE key IS NOT NULL AND (expires_at IS NULL OR expires_at = 'infinity'::pg_catalog.timestamptz);
CREATE UNIQUE INDEX outbox_dedup ON idempotency.outbox (topic, dedup_key)
    WHERE dedup_key IS NOT NULL;
REVOKE ALL ON idempotency.outbox FROM PUBLIC;
COMMENT ON TABLE idempotency.outbox IS
    'One row per emitted event: pending (queued, handed out from available_at) | leased (taken by a relay until lease_expires_at) | done (kept until expires_at for dedup_key) | dead (kept with last_error until requeued or deleted; expires_at infinity).';
COMMENT ON INDEX idempotency.outbox_queue IS
    'The queue of idem_outbox_next: pending and leased events per topic in emit order.';
COMMENT ON INDEX idempotency.outbox_key IS
    'The per-key order check of idem_outbox_next: the events of a key not yet done, in emit order.';
COMMENT ON INDEX idempotency.outbox_dedup IS
    'At most one kept event per (topic, dedup_key): the producer''s own dedup key.';
SELECT pg_catalog.pg_extension_config_dump('idempotency.outbox', '');
SELECT pg_catalog.pg_extension_config_dump('idempotency.outbox_seq', '');

-- The per-key lock's secret (docs/security.md "What pg_locks shows"). An emit with a key locks
-- the first 8 bytes of HMAC-SHA256(secret, topic, NUL, key) as an advisory lock: pg_locks, which
-- every role may read, then tells no role which topic and key are being emitted, and a guess
-- cannot be confirmed without the secret. One row, drawn at installation from the server's
-- strong random source (gen_random_uuid: 244 random bits); readable by the extension's owner
-- only, and not dumped (a restored database draws its own, which changes no stored state).
CREATE TABLE idempotency.outbox_key_lock (
    one    boolean PRIMARY KEY DEFAULT true CHECK (one),
    secret bytea   NOT NULL CHECK (pg_catalog.octet_length(secret) = 32)
);
INSERT INTO idempotency.outbox_key_lock (secret)
SELECT pg_catalog.sha256(pg_catalog.convert_to(pg_catalog.gen_random_uuid()::pg_catalog.text
                                               OPERATOR(pg_catalog.||) pg_catalog.gen_random_uuid()::pg_catalog.text,
                                               'UTF8'));
REVOKE ALL ON idempotency.outbox_key_lock FROM PUBLIC;
COMMENT ON TABLE idempotency.outbox_key_lock IS
    'The secret of the outbox''s per-key lock: an emit with a key takes an advisory lock on HMAC-SHA256(secret, topic, key), so pg_locks reveals no topic or key.';

CREATE FUNCTION idempotency.idem_outbox_emit(
    topic pg_catalog.text, payload pg_catalog.jsonb, key pg_catalog.text DEFAULT NULL,
    dedup_key pg_catalog.text DEFAULT NULL,
    headers pg_catalog.jsonb DEFAULT NULL, deliver_after interval DEFAULT NULL)
RETURNS pg_catalog.uuid
AS 'MODULE_PATHNAME', 'idem_outbox_emit' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idempotency.idem_outbox_emit(text, jsonb, text, text, jsonb, interval) IS
    'Writes an outbox event in the caller''s transaction and returns its id (UUIDv7). key orders the events of one aggregate; a second emit with the same topic and dedup_key, while the first event is kept, writes nothing and returns the first id. deliver_after delays the first hand-out.';

CREATE FUNCTION idempotency.idem_outbox_emit(
    topic pg_catalog.text, payload pg_catalog.bytea, key pg_catalog.text DEFAULT NULL,
    dedup_key pg_catalog.text DEFAULT NULL,
    headers pg_catalog.jsonb DEFAULT NULL, deliver_after interval DEFAULT NULL)
RETURNS pg_catalog.uuid
AS 'MODULE_PATHNAME', 'idem_outbox_emit_bytes' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idempotency.idem_outbox_emit(text, bytea, text, text, jsonb, interval) IS
    'idem_outbox_emit for a body that is not JSON (protobuf, Avro, a signed webhook body): idem_outbox_next returns it in payload_bytes, payload NULL.';

-- The text overload: an untyped literal or a driver's text parameter would otherwise be
-- ambiguous between jsonb and bytea.
CREATE FUNCTION idempotency.idem_outbox_emit(
    topic pg_catalog.text, payload pg_catalog.text, key pg_catalog.text DEFAULT NULL,
    dedup_key pg_catalog.text DEFAULT NULL,
    headers pg_catalog.jsonb DEFAULT NULL, deliver_after interval DEFAULT NULL)
RETURNS pg_catalog.uuid
AS 'MODULE_PATHNAME', 'idem_outbox_emit_text' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idempotency.idem_outbox_emit(text, text, text, text, jsonb, interval) IS
    'idem_outbox_emit of JSON text (an untyped literal, a driver''s text parameter): parsed as jsonb, 22P02 when it is not JSON.';

CREATE FUNCTION idempotency.idem_outbox_next(
    topic pg_catalog.text, batch_size integer DEFAULT 100, lease interval DEFAULT NULL,
    OUT event_id pg_catalog.uuid, OUT key pg_catalog.text, OUT payload pg_catalog.jsonb,
    OUT headers pg_catalog.jsonb, OUT attempt integer,
    OUT emitted_at pg_catalog.timestamptz, OUT lease_expires_at pg_catalog.timestamptz,
    OUT payload_bytes pg_catalog.bytea,
    OUT dedup_key pg_catalog.text)
RETURNS SETOF pg_catalog.record
AS 'MODULE_PATHNAME', 'idem_outbox_next' LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 100;
COMMENT ON FUNCTION idempotency.idem_outbox_next(text, integer, interval) IS
    'Leases up to batch_size events of a topic (FOR UPDATE SKIP LOCKED) in emit order: an event of a key only when every earlier event of its key is done (or dead, with idempotency.outbox_dead_blocks_key off). attempt is the fencing token for idem_outbox_done / idem_outbox_fail.';

CREATE FUNCTION idempotency.idem_outbox_done(
    event_id pg_catalog.uuid, attempt integer, topic pg_catalog.text DEFAULT NULL)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'idem_outbox_done' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idempotency.idem_outbox_done(uuid, integer, text) IS
    'Marks a leased event done (returns done); IK002 when attempt no longer owns it. topic is optional (on Citus it routes the call to the shard of the topic).';

-- The batch form: one statement for a relay's batch, each event fenced by its own attempt. A
-- name of its own, not an overload: a driver's untyped parameters ($1, $2) would be ambiguous.
CREATE FUNCTION idempotency.idem_outbox_done_batch(
    event_ids pg_catalog.uuid[], attempts integer[], topic pg_catalog.text DEFAULT NULL,
    OUT event_id pg_catalog.uuid)
RETURNS SETOF pg_catalog.uuid
AS 'MODULE_PATHNAME', 'idem_outbox_done_batch' LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 100;
COMMENT ON FUNCTION idempotency.idem_outbox_done_batch(uuid[], integer[], text) IS
    'Marks done each event of event_ids that is leased under the attempt at the same position of attempts, in one statement; returns the ids it finished. An event it cannot finish (fenced, already finished, unknown) is left out, never raised: the rest of the batch is done.';

CREATE FUNCTION idempotency.idem_outbox_fail(
    event_id pg_catalog.uuid, attempt integer, retryable boolean DEFAULT true,
    error pg_catalog.text DEFAULT NULL, topic pg_catalog.text DEFAULT NULL)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'idem_outbox_fail' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idempotency.idem_outbox_fail(uuid, integer, boolean, text, text) IS
    'Records a failed delivery of a leased event: pending (handed out again after a backoff) when retryable and below idempotency.max_attempts, else dead (kept with error).';

CREATE FUNCTION idempotency.idem_outbox_fail_batch(
    event_ids pg_catalog.uuid[], attempts integer[], retryable boolean DEFAULT true,
    error pg_catalog.text DEFAULT NULL, topic pg_catalog.text DEFAULT NULL,
    OUT event_id pg_catalog.uuid, OUT status pg_catalog.text)
RETURNS SETOF pg_catalog.record
AS 'MODULE_PATHNAME', 'idem_outbox_fail_batch' LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 100;
COMMENT ON FUNCTION idempotency.idem_outbox_fail_batch(uuid[], integer[], boolean, text, text) IS
    'Records a failed delivery of each event of event_ids leased under the attempt at the same position of attempts, as idem_outbox_fail does (one error for the batch); returns (event_id, status) for each: pending (after its backoff) or dead. An event it cannot fail (fenced, finished, unknown) is left out, never raised.';

CREATE FUNCTION idempotency.idem_outbox_requeue(event_id pg_catalog.uuid, topic pg_catalog.text DEFAULT NULL)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'idem_outbox_requeue' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idempotency.idem_outbox_requeue(uuid, text) IS
    'Brings a dead event back (pending at once, a new budget of idempotency.max_attempts); returns pending. 55000 when the event is not dead.';

REVOKE EXECUTE ON FUNCTION idempotency.idem_outbox_emit(text, jsonb, text, text, jsonb, interval),
    idempotency.idem_outbox_emit(text, bytea, text, text, jsonb, interval),
    idempotency.idem_outbox_emit(text, text, text, text, jsonb, interval),
    idempotency.idem_outbox_next(text, integer, interval), idempotency.idem_outbox_done(uuid, integer, text),
    idempotency.idem_outbox_done_batch(uuid[], integer[], text),
    idempotency.idem_outbox_fail(uuid, integer, boolean, text, text),
    idempotency.idem_outbox_fail_batch(uuid[], integer[], boolean, text, text), idempotency.idem_outbox_requeue(uuid, text)
FROM PUBLIC;

-- Lifecycle: stuck operations, retention, purging, pg_cron (docs/lifecycle.md) ------------------

-- Lists the processing records whose lease ended at least older_than ago: operations whose
-- worker died or hung. Their outcome is unknown, not failed: reconcile each with the downstream
-- provider, then idem_complete / idem_fail it (after reclaiming it with idem_claim). C, checking
-- as its caller (src/records_stuck.cpp): with scope bindings it lists only the records of the
-- scopes the caller may use.
CREATE FUNCTION idempotency.idem_stuck(
    older_than interval DEFAULT '0',
    OUT scope pg_catalog.text, OUT key pg_catalog.text, OUT attempt integer,
    OUT fingerprint pg_catalog.bytea, OUT created_at pg_catalog.timestamptz,
    OUT updated_at pg_catalog.timestamptz, OUT lease_expires_at pg_catalog.timestamptz,
    OUT expires_at pg_catalog.timestamptz)
RETURNS SETOF pg_catalog.record
AS 'MODULE_PATHNAME', 'idem_stuck' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION idempotency.idem_stuck(interval) IS
    'Processing records whose lease expired at least older_than ago (outcome unknown: reconcile, then complete or fail); with scope bindings, only those of scopes the caller may use.';

-- One bounded, non-waiting purge step on one table (records | inbox | outbox): deletes at most
-- batch_size expired rows found after ctid "after" and returns how many it deleted and the ctid
-- to continue after (NULL once the end of the table was reached). idem_purge and
-- idem_purge_loop repeat it.
CREATE FUNCTION idempotency.idem_purge_batch(
    target pg_catalog.text, batch_size integer, after pg_catalog.tid DEFAULT '(0,0)',
    include_stuck boolean DEFAULT false, stuck_older_than interval DEFAULT '0',
    OUT deleted integer, OUT last pg_catalog.tid)
RETURNS pg_catalog.record
AS 'MODULE_PATHNAME', 'idem_purge_batch' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idempotency.idem_purge_batch(text, integer, tid, boolean, interval) IS
    'One purge step of records, inbox or outbox: at most batch_size expired rows after ctid "after", SKIP LOCKED; last is where to continue (NULL: end of table).';

-- Deletes expired rows in one transaction: finished records past their TTL, settled inbox
-- entries past their retention and done outbox events past idempotency.outbox_ttl, at most
-- batch_size rows per table per iteration, until nothing is left or max_batches iterations ran.
-- Never a record with a live lease; stuck records only with include_stuck. Pending, leased and
-- dead outbox events are never purged. Returns the number of rows deleted.
CREATE FUNCTION idempotency.idem_purge(
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
            step := idempotency.idem_purge_batch(targets[i], batch_size, pos[i], include_stuck,
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
COMMENT ON FUNCTION idempotency.idem_purge(integer, integer, boolean, interval) IS
    'Deletes expired finished records, settled inbox entries and done outbox events past idempotency.outbox_ttl in bounded SKIP LOCKED batches (one transaction); returns the count. For scheduled purging use CALL idempotency.idem_purge_loop().';

-- The same as idem_purge (its round over the targets is idem_purge's: test/drift), but commits
-- after every iteration so that no lock is held for longer than one batch; stops when nothing is
-- left or after max_duration. What pg_cron calls; deleted
-- returns the count (CALL idem_purge_loop() shows it). On a Citus coordinator (records
-- distributed) it runs idem_purge_shards on every worker and on this node instead. A procedure
-- that commits cannot have a SET clause: each of its transactions starts by pinning the search
-- path (set_config local ends with the transaction), and every name in it is qualified (pg_cron
-- runs it under the target database's search_path, which that database's owner may set).
CREATE PROCEDURE idempotency.idem_purge_loop(
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
                                    'idempotency', batch_size, max_duration, include_stuck, stuck_older_than)
        LOOP
            IF w.success AND w.result OPERATOR(pg_catalog.~) '^[0-9]+$' THEN
                deleted := deleted OPERATOR(pg_catalog.+) w.result::bigint;
            ELSE
                RAISE WARNING 'idem_purge_loop: the purge of worker %:% failed: %', w.nodename, w.nodeport, w.result;
            END IF;
        END LOOP;
        CALL idempotency.idem_purge_shards(batch_size, max_duration, include_stuck, stuck_older_than, here);
        deleted := deleted OPERATOR(pg_catalog.+) here;
        RETURN;
    END IF;
    deadline := pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) max_duration;
    deleted := 0;
    LOOP
        more := false;
        FOR i IN 1 .. pg_catalog.array_length(targets, 1) LOOP
            CONTINUE WHEN pos[i] IS NULL;
            step := idempotency.idem_purge_batch(targets[i], batch_size, pos[i], include_stuck,
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
COMMENT ON PROCEDURE idempotency.idem_purge_loop(integer, interval, boolean, interval, interval, bigint) IS
    'Purges like idem_purge, committing after every batch (no long-held locks), for at most max_duration; the procedure the pg_cron job calls. On a Citus coordinator it purges the shards of every worker (idem_purge_shards).';

-- Raises 55000 unless pg_cron can manage jobs from here: pg_cron is loaded
-- (cron.database_name is set), this is its database, and CREATE EXTENSION pg_cron ran in it.
-- cron.database_name is a superuser-only setting: a role that may not read it learns whether this
-- is the cron database from pg_cron's presence here (CREATE EXTENSION pg_cron succeeds only in
-- the database cron.database_name names). cron_sql, when given, is the statement to run in the
-- cron database (the hint shows it). Executable by PUBLIC (it reads no stored state): the
-- functions that call it run with their caller's rights.
CREATE FUNCTION idempotency.idem_require_pg_cron(cron_sql pg_catalog.text DEFAULT NULL)
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
                         'or run CALL idempotency.idem_purge_loop() from any other scheduler.';
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
COMMENT ON FUNCTION idempotency.idem_require_pg_cron(text) IS
    'Checks that pg_cron can manage jobs from this database: raises 55000 unless pg_cron is loaded (cron.database_name), this is its database and the pg_cron extension is installed; cron_sql, when given, is shown in the hint as the statement to run there. idem_schedule_purge and idem_unschedule_purge call it.';

-- Registers (or updates) the pg_cron job 'idempotency-purge:<database>' that runs
-- idem_purge_loop in database on schedule. Run it in the cron database (cron.database_name);
-- from any other database it raises an error whose hint is the exact SQL to run there.
-- The job runs only the extension's own procedure: its command is a DO block that pins the
-- search path, checks that <schema>.idem_purge_loop with its exact signature is a member of
-- extension idempotency in that database, and only then calls it with every argument typed (no
-- other overload can be chosen); otherwise the run fails with 55000 and says why in
-- cron.job_run_details. run_as: the role the job runs as (pg_cron's per-job user), which needs
-- nothing but EXECUTE on idem_purge_loop and idem_purge_batch and LOGIN (docs/lifecycle.md);
-- pg_cron lets only a superuser schedule a job for another role. A job of the same name under
-- another user is replaced, never left beside the new one.
CREATE FUNCTION idempotency.idem_schedule_purge(
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
        pg_catalog.quote_ident('idempotency') OPERATOR(pg_catalog.||)
            '.idem_purge_loop(integer,interval,boolean,interval,interval,bigint)',
        'idempotency', 'idempotency', batch_size);
    cron_sql := pg_catalog.format('SELECT %I.idem_schedule_purge(%L, %L, %s%s);', 'idempotency',
                                  schedule, database, batch_size,
                                  CASE WHEN run_as IS NULL THEN ''
                                       ELSE pg_catalog.format(', run_as => %L', run_as) END);
    PERFORM idempotency.idem_require_pg_cron(cron_sql);
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
COMMENT ON FUNCTION idempotency.idem_schedule_purge(text, name, integer, name) IS
    'Registers or updates the pg_cron job idempotency-purge:<database>, which runs the extension''s idem_purge_loop there (and nothing else: 55000 when it is not installed); run_as: the role the job runs as (a superuser may name another role); run it in the cron database.';

-- Removes the pg_cron job of database, whichever user it runs as (another user's only for a
-- superuser, as pg_cron allows); false when there was none.
CREATE FUNCTION idempotency.idem_unschedule_purge(
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
    PERFORM idempotency.idem_require_pg_cron(pg_catalog.format('SELECT %I.idem_unschedule_purge(%L);',
                                                               'idempotency', database));
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
COMMENT ON FUNCTION idempotency.idem_unschedule_purge(name) IS
    'Removes the pg_cron job idempotency-purge:<database>; false when it did not exist.';

REVOKE EXECUTE ON FUNCTION idempotency.idem_stuck(interval), idempotency.idem_purge_batch(text, integer, tid, boolean, interval),
    idempotency.idem_purge(integer, integer, boolean, interval), idempotency.idem_schedule_purge(text, name, integer, name),
    idempotency.idem_unschedule_purge(name)
FROM PUBLIC;
REVOKE EXECUTE ON PROCEDURE idempotency.idem_purge_loop(integer, interval, boolean, interval, interval, bigint)
FROM PUBLIC;

-- Operations: counters, per-scope / consumer / topic state, privileges (docs/operations.md) -----

-- Cumulative counters (shared memory, needs shared_preload_libraries)
CREATE FUNCTION idempotency.idem_counters(
    OUT counter pg_catalog.text, OUT value bigint, OUT stats_reset pg_catalog.timestamptz)
RETURNS SETOF pg_catalog.record
AS 'MODULE_PATHNAME', 'idem_counters' LANGUAGE C VOLATILE PARALLEL SAFE ROWS 8;
COMMENT ON FUNCTION idempotency.idem_counters() IS
    'Cumulative counters since stats_reset: claimed, replayed, in_progress, mismatch, reclaimed (takeovers), refused_fenced (IK002), refused_finished (IK003), inbox_duplicate. value and stats_reset are NULL when idempotency is not in shared_preload_libraries (counters off).';

CREATE FUNCTION idempotency.idem_counters_enabled()
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_counters_enabled' LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION idempotency.idem_counters_enabled() IS
    'True when the counters of idem_counters() are kept, i.e. idempotency is in shared_preload_libraries.';

CREATE FUNCTION idempotency.idem_stats_reset()
RETURNS pg_catalog.timestamptz
AS 'MODULE_PATHNAME', 'idem_stats_reset' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idempotency.idem_stats_reset() IS
    'Sets every counter of idem_counters() to zero and returns the reset time; error 55000 when the counters are off.';

REVOKE EXECUTE ON FUNCTION idempotency.idem_counters() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idempotency.idem_counters_enabled() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idempotency.idem_stats_reset() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idempotency.idem_counters() TO pg_monitor;
GRANT EXECUTE ON FUNCTION idempotency.idem_counters_enabled() TO pg_monitor;

-- Per-scope, per-consumer and per-topic state, computed from the tables (works without preload)

CREATE VIEW idempotency.idem_stats AS
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
COMMENT ON VIEW idempotency.idem_stats IS
    'Idempotency-Key records per scope: processing (all unfinished, includes stuck), stuck (processing with an expired lease, the same records idem_stuck() lists, also past their TTL: their outcome is unknown), completed and failed (within their TTL), expired (finished records past the TTL, awaiting purge), oldest_processing_age. Scans idempotency.records.';

CREATE VIEW idempotency.idem_inbox_stats AS
SELECT i.consumer,
       pg_catalog.count(*) FILTER (
           WHERE i.status OPERATOR(pg_catalog.=) ANY (ARRAY['received', 'processing'])
              OR i.expires_at OPERATOR(pg_catalog.>) pg_catalog.statement_timestamp()) AS received,
       pg_catalog.count(*) FILTER (
           WHERE i.status OPERATOR(pg_catalog.=) ANY (ARRAY['received', 'processing'])) AS pending,
       pg_catalog.count(*) FILTER (
           WHERE i.status OPERATOR(pg_catalog.=) 'processing') AS processing,
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
           WHERE i.status OPERATOR(pg_catalog.=) ANY (ARRAY['done', 'failed', 'stale'])
             AND i.expires_at OPERATOR(pg_catalog.<=) pg_catalog.statement_timestamp()) AS expired,
       pg_catalog.statement_timestamp() OPERATOR(pg_catalog.-) pg_catalog.min(i.received_at) FILTER (
           WHERE i.status OPERATOR(pg_catalog.=) ANY (ARRAY['received', 'processing'])) AS oldest_pending_age
FROM idempotency.inbox i
GROUP BY i.consumer;
COMMENT ON VIEW idempotency.idem_inbox_stats IS
    'Inbox events per consumer: received (every event id recorded but the expired ones, duplicates are not rows), pending (queued or leased, whatever their age: they never expire), processing (leased, also when the lease ran out), processed (done), failed (dead), stale, expired (done, failed or stale past the TTL, awaiting purge), oldest_pending_age. Scans idempotency.inbox.';

CREATE VIEW idempotency.idem_outbox_stats AS
SELECT o.topic,
       pg_catalog.count(*) FILTER (WHERE o.status OPERATOR(pg_catalog.=) 'pending') AS pending,
       pg_catalog.count(*) FILTER (
           WHERE o.status OPERATOR(pg_catalog.=) 'pending'
             AND o.available_at OPERATOR(pg_catalog.>) pg_catalog.statement_timestamp()) AS waiting,
       pg_catalog.count(*) FILTER (WHERE o.status OPERATOR(pg_catalog.=) 'leased') AS leased,
       pg_catalog.count(*) FILTER (WHERE o.status OPERATOR(pg_catalog.=) 'dead') AS dead,
       pg_catalog.count(*) FILTER (WHERE o.status OPERATOR(pg_catalog.=) 'done') AS done,
       pg_catalog.statement_timestamp() OPERATOR(pg_catalog.-) pg_catalog.min(o.emitted_at) FILTER (
           WHERE o.status OPERATOR(pg_catalog.=) ANY (ARRAY['pending', 'leased'])) AS oldest_pending_age
FROM idempotency.outbox o
GROUP BY o.topic;
COMMENT ON VIEW idempotency.idem_outbox_stats IS
    'Outbox events per topic: pending (not yet delivered, waiting included), waiting (pending, held back until available_at by deliver_after or a retry backoff), leased, dead, done (kept until the purge), oldest_pending_age (the lag: the oldest event pending or leased). Scans idempotency.outbox.';
REVOKE ALL ON idempotency.idem_stats, idempotency.idem_inbox_stats, idempotency.idem_outbox_stats FROM PUBLIC;
GRANT SELECT ON idempotency.idem_stats, idempotency.idem_inbox_stats, idempotency.idem_outbox_stats TO pg_monitor;

-- Tenants apart (docs/tenants.md) ----------------------------------------------------------------
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
CREATE FUNCTION idempotency.idem_bind(kind pg_catalog.text, prefix pg_catalog.text, role pg_catalog.regrole)
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
COMMENT ON FUNCTION idempotency.idem_bind(text, text, regrole) IS
    'Binds the scopes, inbox consumers or outbox topics (kind) starting with prefix to role: only its members may use them. True when the binding is new, false when an existing one was moved to role.';

-- Removes the binding of kind and prefix. True when there was one.
CREATE FUNCTION idempotency.idem_unbind(kind pg_catalog.text, prefix pg_catalog.text)
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
COMMENT ON FUNCTION idempotency.idem_unbind(text, text) IS
    'Removes the binding of kind and prefix: its names are open again (or fall to a shorter bound prefix). True when there was one.';

REVOKE EXECUTE ON FUNCTION idempotency.idem_bind(text, text, regrole), idempotency.idem_unbind(text, text) FROM PUBLIC;

-- The bindings, for the extension's owner and superusers.
CREATE VIEW idempotency.idem_bindings AS
    SELECT b.kind, b.prefix, b.role
    FROM idempotency.bindings AS b
    ORDER BY b.kind, b.prefix;
REVOKE ALL ON idempotency.idem_bindings FROM PUBLIC;
COMMENT ON VIEW idempotency.idem_bindings IS
    'The bindings of idempotency.bindings (kind, prefix, role), by kind and prefix.';

-- Citus: distributed tables (docs/citus.md) -------------------------------------------------------
-- idem_distribute() distributes the extension's tables and delegates its per-key functions. It
-- looks every Citus object up by name at run time (to_regproc, to_regclass, EXECUTE with %I/%L
-- or parameters), so the extension does not depend on Citus: without it, the call only says
-- what to do.
--
-- Run once on a Citus coordinator, after CREATE EXTENSION idempotency: records by scope, inbox
-- and inbox_entities by consumer, all three co-located; the outbox by topic, in a co-location
-- group of its own; the per-key functions delegated to the worker that owns their key. What is
-- already so is left alone; one row per object says what was done ('distributed', 'delegated')
-- or that it already was ('unchanged').
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
-- The functions (docs/citus.md "The outbox"):
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
CREATE FUNCTION idempotency.idem_distribute(OUT object pg_catalog.text, OUT action pg_catalog.text)
RETURNS SETOF pg_catalog.record
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- the tables are in schema idempotency, the functions in the extension's schema
    ext_schema pg_catalog.text := 'idempotency';
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
                         '(SELECT citus_add_node(host, port)), then call idempotency.idem_distribute() there.';
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
                             'undistribute them: recreate the extension and call idempotency.idem_distribute().';
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
COMMENT ON FUNCTION idempotency.idem_distribute() IS
    'Run once on a Citus coordinator: distributes records by scope, inbox and inbox_entities by consumer (co-located), the outbox by topic (its own co-location group), and delegates the per-key functions (idem_outbox_next by topic) to the worker owning the key; a second call changes nothing. Without Citus it raises 0A000 with what to do.';
REVOKE EXECUTE ON FUNCTION idempotency.idem_distribute() FROM PUBLIC;

-- Purging a distributed table: the purge of the shards of this node. Bounded batches of
-- FOR UPDATE SKIP LOCKED deletes, of the rows idem_purge_batch deletes on one node, on each
-- shard placement of records, inbox and outbox that this node holds (pg_dist_placement of
-- pg_dist_local_group), committing after every round, for at most max_duration. CALL
-- idem_purge_loop() on the coordinator runs it on every worker (run_command_on_workers). No SET
-- clause (a procedure with one cannot COMMIT): it pins the search path at the start of each
-- transaction, and every name is qualified. Its conditions are src/lifecycle.cpp's (test/drift).
CREATE PROCEDURE idempotency.idem_purge_shards(
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
            USING ERRCODE = '0A000', HINT = 'Without Citus, CALL idempotency.idem_purge_loop() purges the tables.';
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
COMMENT ON PROCEDURE idempotency.idem_purge_shards(integer, interval, boolean, interval, bigint) IS
    'Citus: purges the shards of records, inbox and outbox that this node holds (finished records past their TTL, settled inbox entries, done outbox events past idempotency.outbox_ttl), in bounded SKIP LOCKED batches, committing after every round; CALL idempotency.idem_purge_loop() on the coordinator runs it on every worker.';
REVOKE EXECUTE ON PROCEDURE idempotency.idem_purge_shards(integer, interval, boolean, interval, bigint) FROM PUBLIC;

-- Initial privileges ----------------------------------------------------------------------------
-- The GRANTs and REVOKEs above record each object's resulting ACL in pg_init_privs as the
-- extension's initial privileges (the owner's, and pg_monitor's), which pg_dump leaves out of a
-- dump; the grants users make afterwards are dumped. An update script that recreates a function
-- restores the grants users had made on it and then keeps only these entries in pg_init_privs,
-- as a fresh installation records them (src/sql/idempotency--0.7--1.0.0.sql).
