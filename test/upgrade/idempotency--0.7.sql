-- FROZEN TEST FIXTURE: the install of idempotency 0.7, for the upgrade tests only. Never edit it.
-- It is the SQL that CREATE EXTENSION idempotency VERSION '0.7' ran before 1.0.0: the scripts
-- idempotency--0.1.sql, --0.1--0.2, --0.2--0.3, --0.3--0.4, --0.4--0.5, --0.5--0.6 and
-- --0.6--0.7, as the Makefile of commit 51ad4b2 assembled them from the parts that commit
-- kept in its src/sql/ (since removed), concatenated in that order with their \echo lines
-- dropped (the server drops them too). The paths and versions its comments name are those of
-- that tree. test/stages/upgrade.sh and sql/upgrade.sql copy it into the server's extension
-- directory for the time of a test, as idempotency--0.7.sql, to make a 0.7 database;
-- DEVELOPERS.md "Versions and upgrades".
\echo Use "CREATE EXTENSION idempotency VERSION '0.7'" to load this file. \quit

-- ==== idempotency--0.1.sql ====
-- idempotency extension install script (assembled from src/sql/*.sql by the Makefile).

-- Internal tables live in their own schema; PUBLIC gets no access to it. The functions run
-- their SQL as the schema's owner (see README "Privileges").
CREATE SCHEMA idempotency;
REVOKE ALL ON SCHEMA idempotency FROM PUBLIC;
COMMENT ON SCHEMA idempotency IS
    'Internal storage of the idempotency extension; use the idem_* functions, not these tables.';

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

-- Request fingerprints (RFC 8785 JSON Canonicalization Scheme + SHA-256) ---------------------

CREATE FUNCTION idem_canonical_json(doc jsonb, exact_numbers boolean DEFAULT false)
RETURNS text
AS 'MODULE_PATHNAME', 'idem_canonical_json_jsonb' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION idem_canonical_json(jsonb, boolean) IS
    'RFC 8785 (JCS) canonical text of a jsonb value; exact_numbers keeps every decimal digit instead of IEEE-754 doubles.';

CREATE FUNCTION idem_canonical_json(doc text, exact_numbers boolean DEFAULT false)
RETURNS text
AS 'MODULE_PATHNAME', 'idem_canonical_json_text' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION idem_canonical_json(text, boolean) IS
    'RFC 8785 (JCS) canonical text of raw JSON text, parsed strictly as I-JSON (no duplicate names, lone surrogates, NaN/Infinity or invalid UTF-8).';

CREATE FUNCTION idem_fingerprint(doc jsonb, exclude text[] DEFAULT NULL,
                                 include text[] DEFAULT NULL,
                                 exact_numbers boolean DEFAULT false)
RETURNS bytea
AS 'MODULE_PATHNAME', 'idem_fingerprint_jsonb' LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION idem_fingerprint(jsonb, text[], text[], boolean) IS
    'SHA-256 (32 bytes) of the RFC 8785 canonical form of a jsonb request after dropping the exclude paths and keeping only the include paths; NULL for a NULL document.';

CREATE FUNCTION idem_fingerprint(doc text, exclude text[] DEFAULT NULL,
                                 include text[] DEFAULT NULL,
                                 exact_numbers boolean DEFAULT false)
RETURNS bytea
AS 'MODULE_PATHNAME', 'idem_fingerprint_text' LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION idem_fingerprint(text, text[], text[], boolean) IS
    'SHA-256 (32 bytes) of the RFC 8785 canonical form of raw JSON text (strict I-JSON) after the exclude/include path filters; NULL for a NULL document.';

-- UUIDv7, HMAC and constant-time comparison ----------------------------------------------------

CREATE FUNCTION idem_uuid_v7()
RETURNS uuid
AS 'MODULE_PATHNAME', 'idem_uuid_v7' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION idem_uuid_v7() IS
    'A new RFC 9562 version-7 UUID (Unix milliseconds + sequence + 62 random bits), strictly increasing within the session.';

CREATE FUNCTION idem_uuid_v7_time(id uuid)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'idem_uuid_v7_time' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION idem_uuid_v7_time(uuid) IS
    'The millisecond timestamp embedded in a version-7 UUID; error 22023 for other UUIDs.';

CREATE FUNCTION idem_hmac_sha256(key bytea, message bytea)
RETURNS bytea
AS 'MODULE_PATHNAME', 'idem_hmac_sha256' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION idem_hmac_sha256(bytea, bytea) IS
    'HMAC-SHA256 (RFC 2104, FIPS 180-4) of message under key, 32 bytes.';

CREATE FUNCTION idem_secure_equal(a bytea, b bytea)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_secure_equal' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION idem_secure_equal(bytea, bytea) IS
    'Compares two byte strings in time that depends only on their lengths (for signatures and tokens).';
-- Inbox: per-consumer event dedup, a leased work queue, an ordering guard, webhook signatures --

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
    PRIMARY KEY (consumer, event_id),
    CHECK ((entity_key IS NULL) = (entity_seq IS NULL))
) WITH (fillfactor = 90);
CREATE INDEX inbox_queue ON idempotency.inbox (consumer, received_at)
    WHERE status IN ('received', 'processing');
REVOKE ALL ON idempotency.inbox FROM PUBLIC;
COMMENT ON TABLE idempotency.inbox IS
    'One row per (consumer, event id) seen: received (queued) | processing (leased) | done | failed (dead) | stale (older than the last applied event of its entity).';
COMMENT ON INDEX idempotency.inbox_queue IS
    'The work queue of idem_inbox_next: queued and leased events per consumer in arrival order.';
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

CREATE FUNCTION idem_inbox_receive(
    consumer text, event_id text, payload_hash bytea DEFAULT NULL,
    enqueue boolean DEFAULT false, event_type text DEFAULT NULL, payload bytea DEFAULT NULL,
    entity_key text DEFAULT NULL, entity_seq bigint DEFAULT NULL, ttl interval DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'idem_inbox_receive' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_inbox_receive(text, text, bytea, boolean, text, bytea, text, bigint, interval) IS
    'Records an event for a consumer in the caller''s transaction. outcome: new | duplicate | mismatch (same id, different payload hash) | stale (older than the last applied event of its entity). enqueue stores it for idem_inbox_next.';

CREATE FUNCTION idem_inbox_next(
    consumer text, batch_size integer DEFAULT 10, lease interval DEFAULT NULL,
    OUT event_id text, OUT event_type text, OUT payload bytea, OUT attempt integer,
    OUT entity_key text, OUT entity_seq bigint, OUT payload_hash bytea,
    OUT received_at timestamptz, OUT lease_expires_at timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'idem_inbox_next' LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 10;
COMMENT ON FUNCTION idem_inbox_next(text, integer, interval) IS
    'Leases up to batch_size queued events of a consumer (and events whose lease expired) with FOR UPDATE SKIP LOCKED, oldest first; attempt is the fencing token for idem_inbox_done / idem_inbox_fail.';

CREATE FUNCTION idem_inbox_done(consumer text, event_id text, attempt integer)
RETURNS text
AS 'MODULE_PATHNAME', 'idem_inbox_done' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_inbox_done(text, text, integer) IS
    'Marks a leased event done in the worker''s transaction; returns done, or stale when a newer event of its entity was applied (skip the effect then).';

CREATE FUNCTION idem_inbox_fail(
    consumer text, event_id text, attempt integer, retryable boolean DEFAULT true,
    error text DEFAULT NULL, max_attempts integer DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'idem_inbox_fail' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_inbox_fail(text, text, integer, boolean, text, integer) IS
    'Records a failed handling of a leased event; returns received (queued again) when retryable and below max_attempts, else failed (dead, kept for inspection).';

-- Webhook signatures ---------------------------------------------------------------------------

CREATE FUNCTION idem_webhook_verify_standard(
    secrets text[], msg_id text, msg_timestamp text, payload bytea, signature_header text,
    tolerance interval DEFAULT NULL, now timestamptz DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_webhook_verify_standard' LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION idem_webhook_verify_standard(text[], text, text, bytea, text, interval, timestamptz) IS
    'Standard Webhooks: true when webhook-signature holds a v1 HMAC-SHA256 of msg_id.timestamp.payload under one of the whsec_ secrets and the timestamp is within the tolerance (default idempotency.webhook_tolerance).';
CREATE FUNCTION idem_webhook_verify_standard(
    secrets text[], msg_id text, msg_timestamp text, payload text, signature_header text,
    tolerance interval DEFAULT NULL, now timestamptz DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_webhook_verify_standard' LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION idem_webhook_verify_standard(text[], text, text, text, text, interval, timestamptz) IS
    'Standard Webhooks signature check over the raw text bytes of payload (see the bytea form).';
CREATE FUNCTION idem_webhook_verify_standard(
    secret text, msg_id text, msg_timestamp text, payload bytea, signature_header text,
    tolerance interval DEFAULT NULL, now timestamptz DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_webhook_verify_standard_1' LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION idem_webhook_verify_standard(text, text, text, bytea, text, interval, timestamptz) IS
    'Standard Webhooks signature check with one secret (see the text[] form).';
CREATE FUNCTION idem_webhook_verify_standard(
    secret text, msg_id text, msg_timestamp text, payload text, signature_header text,
    tolerance interval DEFAULT NULL, now timestamptz DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_webhook_verify_standard_1' LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION idem_webhook_verify_standard(text, text, text, text, text, interval, timestamptz) IS
    'Standard Webhooks signature check with one secret over the raw text bytes of payload.';

CREATE FUNCTION idem_webhook_verify_stripe(
    secrets text[], header text, payload bytea,
    tolerance interval DEFAULT NULL, now timestamptz DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_webhook_verify_stripe' LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION idem_webhook_verify_stripe(text[], text, bytea, interval, timestamptz) IS
    'Stripe-style: true when the header t=<seconds>,v1=<hex> holds an HMAC-SHA256 of t.payload under one of the secrets (used as raw bytes) and t is within the tolerance.';
CREATE FUNCTION idem_webhook_verify_stripe(
    secrets text[], header text, payload text,
    tolerance interval DEFAULT NULL, now timestamptz DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_webhook_verify_stripe' LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION idem_webhook_verify_stripe(text[], text, text, interval, timestamptz) IS
    'Stripe-style signature check over the raw text bytes of payload (see the bytea form).';
CREATE FUNCTION idem_webhook_verify_stripe(
    secret text, header text, payload bytea,
    tolerance interval DEFAULT NULL, now timestamptz DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_webhook_verify_stripe_1' LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION idem_webhook_verify_stripe(text, text, bytea, interval, timestamptz) IS
    'Stripe-style signature check with one secret (see the text[] form).';
CREATE FUNCTION idem_webhook_verify_stripe(
    secret text, header text, payload text,
    tolerance interval DEFAULT NULL, now timestamptz DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_webhook_verify_stripe_1' LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION idem_webhook_verify_stripe(text, text, text, interval, timestamptz) IS
    'Stripe-style signature check with one secret over the raw text bytes of payload.';

CREATE FUNCTION idem_webhook_sign_standard(
    secret text, msg_id text, msg_timestamp text, payload bytea)
RETURNS text
AS 'MODULE_PATHNAME', 'idem_webhook_sign_standard' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION idem_webhook_sign_standard(text, text, text, bytea) IS
    'The webhook-signature value v1,<base64> a Standard Webhooks sender computes (for senders and tests).';
CREATE FUNCTION idem_webhook_sign_standard(
    secret text, msg_id text, msg_timestamp text, payload text)
RETURNS text
AS 'MODULE_PATHNAME', 'idem_webhook_sign_standard' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION idem_webhook_sign_standard(text, text, text, text) IS
    'The Standard Webhooks v1,<base64> signature over the raw text bytes of payload.';

CREATE FUNCTION idem_webhook_sign_stripe(secret text, msg_timestamp bigint, payload bytea)
RETURNS text
AS 'MODULE_PATHNAME', 'idem_webhook_sign_stripe' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION idem_webhook_sign_stripe(text, bigint, bytea) IS
    'The Stripe-style header value t=<timestamp>,v1=<hex> (for senders and tests).';
CREATE FUNCTION idem_webhook_sign_stripe(secret text, msg_timestamp bigint, payload text)
RETURNS text
AS 'MODULE_PATHNAME', 'idem_webhook_sign_stripe' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION idem_webhook_sign_stripe(text, bigint, text) IS
    'The Stripe-style header value over the raw text bytes of payload.';

CREATE FUNCTION idem_webhook_receive(
    consumer text, scheme text, secrets text[], event_id text, payload bytea,
    signature_header text, msg_timestamp text DEFAULT NULL, event_type text DEFAULT NULL,
    enqueue boolean DEFAULT false, entity_key text DEFAULT NULL, entity_seq bigint DEFAULT NULL,
    tolerance interval DEFAULT NULL, ttl interval DEFAULT NULL, now timestamptz DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'idem_webhook_receive' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_webhook_receive(text, text, text[], text, bytea, text, text, text, boolean, text, bigint, interval, interval, timestamptz) IS
    'Verifies a webhook (scheme standard | stripe) and records it in the inbox with the SHA-256 of the payload as its hash. outcome: invalid_signature | stale_timestamp (nothing written) | new | duplicate | mismatch | stale.';
CREATE FUNCTION idem_webhook_receive(
    consumer text, scheme text, secrets text[], event_id text, payload text,
    signature_header text, msg_timestamp text DEFAULT NULL, event_type text DEFAULT NULL,
    enqueue boolean DEFAULT false, entity_key text DEFAULT NULL, entity_seq bigint DEFAULT NULL,
    tolerance interval DEFAULT NULL, ttl interval DEFAULT NULL, now timestamptz DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'idem_webhook_receive' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_webhook_receive(text, text, text[], text, text, text, text, text, boolean, text, bigint, interval, interval, timestamptz) IS
    'Verifies a webhook and records it in the inbox; payload given as text, signed and stored as its raw bytes.';

-- Lifecycle: stuck operations, retention, purging, pg_cron (README "Lifecycle") ------------------

-- Lists the processing records whose lease ended at least older_than ago: operations whose
-- worker died or hung. Their outcome is unknown, not failed: reconcile each with the downstream
-- provider, then idem_complete / idem_fail it (after reclaiming it with idem_claim).
CREATE FUNCTION idem_stuck(
    older_than interval DEFAULT '0',
    OUT scope text, OUT key text, OUT attempt integer, OUT fingerprint bytea,
    OUT created_at timestamptz, OUT updated_at timestamptz, OUT lease_expires_at timestamptz,
    OUT expires_at timestamptz)
RETURNS SETOF record
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF older_than IS NULL THEN
        RAISE EXCEPTION 'older_than must not be null' USING ERRCODE = '22004';
    END IF;
    IF older_than < interval '0' THEN
        RAISE EXCEPTION 'older_than must not be negative' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
        SELECT r.scope, r.key, r.attempt, r.fingerprint, r.created_at, r.updated_at,
               r.lease_expires_at, r.expires_at
        FROM idempotency.records AS r
        WHERE r.status = 'processing' AND r.lease_expires_at <= clock_timestamp() - older_than
        ORDER BY r.lease_expires_at, r.scope, r.key;
END
$$;
COMMENT ON FUNCTION idem_stuck(interval) IS
    'Processing records whose lease expired at least older_than ago (outcome unknown: reconcile, then complete or fail).';

-- One bounded, non-waiting purge step on one table (records | inbox): deletes at most batch_size
-- expired rows found after ctid "after" and returns how many it deleted and the ctid to continue
-- after (NULL once the end of the table was reached). idem_purge and idem_purge_loop repeat it.
CREATE FUNCTION idem_purge_batch(
    target text, batch_size integer, after tid DEFAULT '(0,0)', include_stuck boolean DEFAULT false,
    stuck_older_than interval DEFAULT '0', OUT deleted integer, OUT last tid)
RETURNS record
AS 'MODULE_PATHNAME', 'idem_purge_batch' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_purge_batch(text, integer, tid, boolean, interval) IS
    'One purge step of records or inbox: at most batch_size expired rows after ctid "after", SKIP LOCKED; last is where to continue (NULL: end of table).';

-- Deletes expired rows in one transaction: finished records past their TTL and settled inbox
-- entries past their retention, at most batch_size rows per table per iteration, until nothing
-- is left or max_batches iterations ran. Never a record with a live lease; stuck records only
-- with include_stuck. Returns the number of rows deleted.
CREATE FUNCTION idem_purge(
    batch_size integer DEFAULT 1000, max_batches integer DEFAULT NULL,
    include_stuck boolean DEFAULT false, stuck_older_than interval DEFAULT '0')
RETURNS bigint
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    targets constant text[] := ARRAY['records', 'inbox'];
    pos tid[] := ARRAY['(0,0)', '(0,0)']::tid[];
    step record;
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
        FOR i IN 1 .. array_length(targets, 1) LOOP
            CONTINUE WHEN pos[i] IS NULL;
            step := @extschema@.idem_purge_batch(targets[i], batch_size, pos[i], include_stuck,
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
COMMENT ON FUNCTION idem_purge(integer, integer, boolean, interval) IS
    'Deletes expired finished records and settled inbox entries in bounded SKIP LOCKED batches (one transaction); returns the count. For scheduled purging use CALL idem_purge_loop().';

-- The same as idem_purge, but commits after every iteration so that no lock is held for longer
-- than one batch; stops when nothing is left or after max_duration. What pg_cron calls. deleted
-- returns the count (CALL idem_purge_loop() shows it).
CREATE PROCEDURE idem_purge_loop(
    batch_size integer DEFAULT 1000, max_duration interval DEFAULT '4 minutes',
    include_stuck boolean DEFAULT false, stuck_older_than interval DEFAULT '0',
    pause interval DEFAULT '0', INOUT deleted bigint DEFAULT NULL)
LANGUAGE plpgsql
AS $$
DECLARE
    targets constant text[] := ARRAY['records', 'inbox'];
    pos tid[] := ARRAY['(0,0)', '(0,0)']::tid[];
    step record;
    deadline timestamptz;
    more boolean;
BEGIN
    IF max_duration IS NULL OR pause IS NULL THEN
        RAISE EXCEPTION '% must not be null', CASE WHEN pause IS NULL THEN 'pause' ELSE 'max_duration' END
            USING ERRCODE = '22004';
    END IF;
    deadline := pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) max_duration;
    deleted := 0;
    LOOP
        more := false;
        FOR i IN 1 .. pg_catalog.array_length(targets, 1) LOOP
            CONTINUE WHEN pos[i] IS NULL;
            step := @extschema@.idem_purge_batch(targets[i], batch_size, pos[i], include_stuck,
                                                 stuck_older_than);
            deleted := deleted OPERATOR(pg_catalog.+) step.deleted;
            pos[i] := step.last;
            more := more OR step.last IS NOT NULL;
        END LOOP;
        COMMIT;
        EXIT WHEN NOT more OR pg_catalog.clock_timestamp() OPERATOR(pg_catalog.>=) deadline;
        IF pause OPERATOR(pg_catalog.>) interval '0' THEN
            PERFORM pg_catalog.pg_sleep(pg_catalog.date_part('epoch', pause));
        END IF;
    END LOOP;
END
$$;
COMMENT ON PROCEDURE idem_purge_loop(integer, interval, boolean, interval, interval, bigint) IS
    'Purges like idem_purge, committing after every batch (no long-held locks), for at most max_duration; the procedure the pg_cron job calls.';

-- Registers (or updates) the pg_cron job 'idempotency-purge:<database>' that runs
-- idem_purge_loop in database on schedule. Run it in the cron database (cron.database_name);
-- from any other database it raises an error whose hint is the exact SQL to run there.
CREATE FUNCTION idem_schedule_purge(
    schedule text DEFAULT '*/5 * * * *', database name DEFAULT current_database(),
    batch_size integer DEFAULT 1000)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    job_name text;
    command text;
    cron_sql text;
    cron_db text;
    jobid bigint;
BEGIN
    IF schedule IS NULL OR database IS NULL OR batch_size IS NULL THEN
        RAISE EXCEPTION '% must not be null',
            CASE WHEN schedule IS NULL THEN 'schedule'
                 WHEN database IS NULL THEN 'database' ELSE 'batch_size' END
            USING ERRCODE = '22004';
    END IF;
    IF batch_size < 1 THEN
        RAISE EXCEPTION 'batch_size must be positive' USING ERRCODE = '22023';
    END IF;
    job_name := 'idempotency-purge:' || database;
    command := format('CALL %I.idem_purge_loop(batch_size => %s)', '@extschema@', batch_size);
    cron_sql := format('SELECT cron.schedule_in_database(%L, %L, %L, %L);',
                       job_name, schedule, command, database);
    cron_db := current_setting('cron.database_name', true);
    IF cron_db IS NULL OR cron_db = '' THEN
        RAISE EXCEPTION 'pg_cron is not loaded'
            USING ERRCODE = '55000',
                  HINT = 'Add pg_cron to shared_preload_libraries, set cron.database_name, '
                         'restart the server, and run CREATE EXTENSION pg_cron in that database; '
                         'or run CALL idem_purge_loop() from any other scheduler.';
    END IF;
    IF current_database() <> cron_db THEN
        RAISE EXCEPTION 'pg_cron jobs are managed from database "%", not "%"',
                        cron_db, current_database()
            USING ERRCODE = '55000',
                  DETAIL = 'pg_cron lives in one database (cron.database_name) and runs jobs '
                           'in other databases with cron.schedule_in_database.',
                  HINT = format('Run in database "%s": %s', cron_db, cron_sql);
    END IF;
    IF NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'pg_cron') THEN
        RAISE EXCEPTION 'extension pg_cron is not installed in database "%"', cron_db
            USING ERRCODE = '55000',
                  HINT = format('Run CREATE EXTENSION pg_cron in database "%s".', cron_db);
    END IF;
    IF database = current_database() THEN
        EXECUTE 'SELECT cron.schedule($1, $2, $3)' INTO jobid
            USING job_name, schedule, command;
    ELSE
        EXECUTE 'SELECT cron.schedule_in_database($1, $2, $3, $4)' INTO jobid
            USING job_name, schedule, command, database::text;
    END IF;
    RETURN jobid;
END
$$;
COMMENT ON FUNCTION idem_schedule_purge(text, name, integer) IS
    'Registers or updates the pg_cron job idempotency-purge:<database> (CALL idem_purge_loop()); run it in the cron database.';

-- Removes the pg_cron job of database; false when there was none.
CREATE FUNCTION idem_unschedule_purge(database name DEFAULT current_database())
RETURNS boolean
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    job_name text;
    cron_sql text;
    cron_db text;
    found_job boolean;
BEGIN
    IF database IS NULL THEN
        RAISE EXCEPTION 'database must not be null' USING ERRCODE = '22004';
    END IF;
    job_name := 'idempotency-purge:' || database;
    cron_sql := format('SELECT cron.unschedule(%L);', job_name);
    cron_db := current_setting('cron.database_name', true);
    IF cron_db IS NULL OR cron_db = '' THEN
        RAISE EXCEPTION 'pg_cron is not loaded'
            USING ERRCODE = '55000',
                  HINT = 'Add pg_cron to shared_preload_libraries, set cron.database_name, '
                         'restart the server, and run CREATE EXTENSION pg_cron in that database; '
                         'or run CALL idem_purge_loop() from any other scheduler.';
    END IF;
    IF current_database() <> cron_db THEN
        RAISE EXCEPTION 'pg_cron jobs are managed from database "%", not "%"',
                        cron_db, current_database()
            USING ERRCODE = '55000',
                  DETAIL = 'pg_cron lives in one database (cron.database_name) and runs jobs '
                           'in other databases with cron.schedule_in_database.',
                  HINT = format('Run in database "%s": %s', cron_db, cron_sql);
    END IF;
    IF NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'pg_cron') THEN
        RAISE EXCEPTION 'extension pg_cron is not installed in database "%"', cron_db
            USING ERRCODE = '55000',
                  HINT = format('Run CREATE EXTENSION pg_cron in database "%s".', cron_db);
    END IF;
    EXECUTE 'SELECT EXISTS (SELECT FROM cron.job WHERE jobname = $1 AND username = current_user)'
        INTO found_job USING job_name;
    IF found_job THEN
        EXECUTE 'SELECT cron.unschedule($1)' USING job_name;
    END IF;
    RETURN found_job;
END
$$;
COMMENT ON FUNCTION idem_unschedule_purge(name) IS
    'Removes the pg_cron job idempotency-purge:<database>; false when it did not exist.';

-- ==== idempotency--0.1--0.2.sql ====
-- idempotency 0.1 -> 0.2 (assembled from src/sql/5*.sql by the Makefile into
-- idempotency--0.1--0.2.sql; CREATE EXTENSION without VERSION runs 0.1 and then this script).

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

-- idem_claim returns a named row type ---------------------------------------------------------
-- Same columns as 0.1's OUT parameters, but a named type lets the executor take the row
-- description from the type cache instead of rebuilding it from pg_proc on every call (about 3 %
-- of a replay's backend CPU, bench/RESULTS.md "Load and cost"). A function's return type cannot be
-- altered, so idem_claim is dropped and created again here, with its comment, and the EXECUTE
-- grants it had before the update are given to the new function. The update stops with an error
-- if a view or other object depends on idem_claim (drop it first, recreate it after).
CREATE TYPE idem_claim_result AS (
    outcome          text,
    attempt          integer,
    resource_id      text,
    response         jsonb,
    response_status  integer,
    lease_expires_at timestamptz,
    expires_at       timestamptz
);
COMMENT ON TYPE idem_claim_result IS
    'Result row of idem_claim: outcome (claimed | replayed | in_progress | mismatch | reclaimed), attempt (the fencing token), the stored result of a replay (resource_id, response, response_status), lease_expires_at and expires_at.';

DO $$
DECLARE
    old_acl pg_catalog.aclitem[];
    grantee text;
BEGIN
    SELECT p.proacl INTO old_acl FROM pg_catalog.pg_proc p
    WHERE p.oid OPERATOR(pg_catalog.=)
          'idem_claim(text, text, bytea, interval, interval, boolean)'::pg_catalog.regprocedure;

    DROP FUNCTION idem_claim(text, text, bytea, interval, interval, boolean);
    CREATE FUNCTION idem_claim(
        scope text, key text, fingerprint bytea DEFAULT NULL, lease interval DEFAULT NULL,
        ttl interval DEFAULT NULL, wait boolean DEFAULT true)
    RETURNS idem_claim_result
    AS 'MODULE_PATHNAME', 'idem_claim' LANGUAGE C VOLATILE PARALLEL UNSAFE;
    COMMENT ON FUNCTION idem_claim(text, text, bytea, interval, interval, boolean) IS
        'Claims an Idempotency-Key in a scope. outcome: claimed | replayed | in_progress | mismatch | reclaimed; attempt is the fencing token.';

    -- Stateful: not executable by PUBLIC (as src/sql/50_operations.sql), then the grants it had before.
    REVOKE EXECUTE ON FUNCTION idem_claim(text, text, bytea, interval, interval, boolean) FROM PUBLIC;
    FOR grantee IN
        SELECT CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                    ELSE pg_catalog.quote_ident(r.rolname) END
               OPERATOR(pg_catalog.||) CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END
        FROM pg_catalog.aclexplode(old_acl) a
        LEFT JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) a.grantee
        WHERE a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'
          AND a.grantee OPERATOR(pg_catalog.<>) a.grantor
    LOOP
        EXECUTE 'GRANT EXECUTE ON FUNCTION idem_claim(text, text, bytea, interval, interval, boolean) TO '
                OPERATOR(pg_catalog.||) grantee;
    END LOOP;
END $$;

-- Initial privileges ------------------------------------------------------------------------------
-- A GRANT or REVOKE run by an extension script records the object's whole resulting ACL in
-- pg_init_privs as the extension's own initial privileges, and pg_dump leaves those out of a
-- dump. Run by ALTER EXTENSION UPDATE, the REVOKEs above would thereby record the grants that
-- users made under 0.1 (the README has them grant idempotency_user before updating) as the
-- extension's, and a dump and restore would silently lose them. Keep only the extension's own
-- entries, as a fresh installation records them: the owner's, and pg_monitor's.
UPDATE pg_catalog.pg_init_privs i
SET initprivs = ARRAY(
    SELECT pg_catalog.makeaclitem(x.grantee, x.grantor, x.privilege_type, x.is_grantable)
    FROM pg_catalog.aclexplode(i.initprivs) x
    WHERE x.grantee OPERATOR(pg_catalog.=) p.proowner
       OR x.grantee OPERATOR(pg_catalog.=) 'pg_monitor'::pg_catalog.regrole)
FROM pg_catalog.pg_proc p, pg_catalog.pg_depend d, pg_catalog.pg_extension e
WHERE i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
  AND i.objoid OPERATOR(pg_catalog.=) p.oid
  AND i.privtype OPERATOR(pg_catalog.=) 'e'
  AND d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
  AND d.objid OPERATOR(pg_catalog.=) p.oid
  AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
  AND d.refobjid OPERATOR(pg_catalog.=) e.oid
  AND d.deptype OPERATOR(pg_catalog.=) 'e'
  AND e.extname OPERATOR(pg_catalog.=) 'idempotency';

-- ==== idempotency--0.2--0.3.sql ====
-- idempotency 0.2 -> 0.3 (assembled from src/sql/6*.sql by the Makefile into
-- idempotency--0.2--0.3.sql; CREATE EXTENSION without VERSION runs 0.1, then 0.1 -> 0.2, then
-- this script).

-- Lifecycle: the pg_cron precondition written once ---------------------------------------------
-- 0.1 wrote the same three checks (pg_cron loaded, this is its database, the extension exists)
-- into both idem_schedule_purge and idem_unschedule_purge. They move into one internal helper;
-- the two functions are recreated with the same signatures, behaviour, comments and grants
-- (CREATE OR REPLACE keeps the grants).

-- Raises 55000 unless pg_cron can manage jobs from here: pg_cron is loaded
-- (cron.database_name is set), this is its database, and CREATE EXTENSION pg_cron ran in it.
-- cron_sql, when given, is the statement to run in the cron database (the hint shows it).
-- In the extension's schema and executable by PUBLIC (it reads no stored state): the two
-- functions run with their caller's rights, and a caller who may schedule must reach it.
CREATE FUNCTION @extschema@.idem_require_pg_cron(cron_sql text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    cron_db text := current_setting('cron.database_name', true);
BEGIN
    IF cron_db IS NULL OR cron_db = '' THEN
        RAISE EXCEPTION 'pg_cron is not loaded'
            USING ERRCODE = '55000',
                  HINT = 'Add pg_cron to shared_preload_libraries, set cron.database_name, '
                         'restart the server, and run CREATE EXTENSION pg_cron in that database; '
                         'or run CALL idem_purge_loop() from any other scheduler.';
    END IF;
    IF current_database() <> cron_db THEN
        RAISE EXCEPTION 'pg_cron jobs are managed from database "%", not "%"',
                        cron_db, current_database()
            USING ERRCODE = '55000',
                  DETAIL = 'pg_cron lives in one database (cron.database_name) and runs jobs '
                           'in other databases with cron.schedule_in_database.',
                  HINT = CASE WHEN cron_sql IS NULL THEN format('Connect to database "%s".', cron_db)
                              ELSE format('Run in database "%s": %s', cron_db, cron_sql) END;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'pg_cron') THEN
        RAISE EXCEPTION 'extension pg_cron is not installed in database "%"', cron_db
            USING ERRCODE = '55000',
                  HINT = format('Run CREATE EXTENSION pg_cron in database "%s".', cron_db);
    END IF;
END
$$;
COMMENT ON FUNCTION @extschema@.idem_require_pg_cron(text) IS
    'Checks that pg_cron can manage jobs from this database: raises 55000 unless pg_cron is loaded (cron.database_name), this is its database and the pg_cron extension is installed; cron_sql, when given, is shown in the hint as the statement to run there. idem_schedule_purge and idem_unschedule_purge call it.';

-- Registers (or updates) the pg_cron job 'idempotency-purge:<database>' that runs
-- idem_purge_loop in database on schedule. Run it in the cron database (cron.database_name);
-- from any other database it raises an error whose hint is the exact SQL to run there.
CREATE OR REPLACE FUNCTION idem_schedule_purge(
    schedule text DEFAULT '*/5 * * * *', database name DEFAULT current_database(),
    batch_size integer DEFAULT 1000)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    job_name text;
    command text;
    cron_sql text;
    jobid bigint;
BEGIN
    IF schedule IS NULL OR database IS NULL OR batch_size IS NULL THEN
        RAISE EXCEPTION '% must not be null',
            CASE WHEN schedule IS NULL THEN 'schedule'
                 WHEN database IS NULL THEN 'database' ELSE 'batch_size' END
            USING ERRCODE = '22004';
    END IF;
    IF batch_size < 1 THEN
        RAISE EXCEPTION 'batch_size must be positive' USING ERRCODE = '22023';
    END IF;
    job_name := 'idempotency-purge:' || database;
    command := format('CALL %I.idem_purge_loop(batch_size => %s)', '@extschema@', batch_size);
    cron_sql := format('SELECT cron.schedule_in_database(%L, %L, %L, %L);',
                       job_name, schedule, command, database);
    PERFORM @extschema@.idem_require_pg_cron(cron_sql);
    IF database = current_database() THEN
        EXECUTE 'SELECT cron.schedule($1, $2, $3)' INTO jobid
            USING job_name, schedule, command;
    ELSE
        EXECUTE 'SELECT cron.schedule_in_database($1, $2, $3, $4)' INTO jobid
            USING job_name, schedule, command, database::text;
    END IF;
    RETURN jobid;
END
$$;
COMMENT ON FUNCTION idem_schedule_purge(text, name, integer) IS
    'Registers or updates the pg_cron job idempotency-purge:<database> (CALL idem_purge_loop()); run it in the cron database.';

-- Removes the pg_cron job of database; false when there was none.
CREATE OR REPLACE FUNCTION idem_unschedule_purge(database name DEFAULT current_database())
RETURNS boolean
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    job_name text;
    found_job boolean;
BEGIN
    IF database IS NULL THEN
        RAISE EXCEPTION 'database must not be null' USING ERRCODE = '22004';
    END IF;
    job_name := 'idempotency-purge:' || database;
    PERFORM @extschema@.idem_require_pg_cron(format('SELECT cron.unschedule(%L);', job_name));
    EXECUTE 'SELECT EXISTS (SELECT FROM cron.job WHERE jobname = $1 AND username = current_user)'
        INTO found_job USING job_name;
    IF found_job THEN
        EXECUTE 'SELECT cron.unschedule($1)' USING job_name;
    END IF;
    RETURN found_job;
END
$$;
COMMENT ON FUNCTION idem_unschedule_purge(name) IS
    'Removes the pg_cron job idempotency-purge:<database>; false when it did not exist.';

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

-- Purging a distributed table: the purge of the shards of this node. Bounded batches of
-- FOR UPDATE SKIP LOCKED deletes, as idem_purge_batch does, on each shard placement of records
-- and inbox that this node holds (pg_dist_placement of pg_dist_local_group), committing after
-- every round, for at most max_duration. CALL idem_purge_loop() on the coordinator runs it on
-- every worker (run_command_on_workers). No SET clause: a procedure with one cannot COMMIT, so
-- every name is qualified.
CREATE PROCEDURE @extschema@.idem_purge_shards(
    batch_size integer DEFAULT 1000, max_duration interval DEFAULT '4 minutes',
    include_stuck boolean DEFAULT false, stuck_older_than interval DEFAULT '0',
    INOUT deleted bigint DEFAULT NULL)
LANGUAGE plpgsql
AS $$
DECLARE
    shards text[];
    is_records boolean[];
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
            'pg_catalog.array_agg(s.logicalrelid OPERATOR(pg_catalog.=) ''idempotency.records''::pg_catalog.regclass ORDER BY s.shardid) '
            'FROM pg_catalog.pg_dist_shard s JOIN pg_catalog.pg_dist_placement p ON p.shardid OPERATOR(pg_catalog.=) s.shardid '
            'WHERE s.logicalrelid OPERATOR(pg_catalog.=) ANY (ARRAY[''idempotency.records'', ''idempotency.inbox'']::pg_catalog.regclass[]) '
            'AND p.groupid OPERATOR(pg_catalog.=) (SELECT g.groupid FROM pg_catalog.pg_dist_local_group g)'
        INTO shards, is_records;
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
            -- shard_name() quotes the name it returns
            EXECUTE pg_catalog.format(
                'WITH d AS (DELETE FROM %1$s AS r WHERE r.ctid OPERATOR(pg_catalog.=) ANY '
                '(ARRAY(SELECT s.ctid FROM %1$s AS s WHERE s.expires_at OPERATOR(pg_catalog.<) $2 AND %2$s '
                'LIMIT $1 FOR UPDATE SKIP LOCKED)) RETURNING 1) SELECT pg_catalog.count(*) FROM d',
                shards[i],
                CASE WHEN is_records[i]
                     THEN '(s.status OPERATOR(pg_catalog.<>) ''processing'' OR ($3 AND s.lease_expires_at '
                          'OPERATOR(pg_catalog.<) $4 AND s.lease_expires_at OPERATOR(pg_catalog.<) $2))'
                     ELSE 's.status OPERATOR(pg_catalog.=) ANY (''{done,failed,stale}''::pg_catalog.text[])' END)
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
    'Citus: purges the shards of records and inbox that this node holds, in bounded SKIP LOCKED batches, committing after every round; CALL idem_purge_loop() on the coordinator runs it on every worker.';
REVOKE EXECUTE ON PROCEDURE @extschema@.idem_purge_shards(integer, interval, boolean, interval, bigint) FROM PUBLIC;

-- idem_purge_loop as in 0.1, and on a Citus cluster (records distributed) it runs
-- idem_purge_shards on every worker and on this node, and returns the total.
CREATE OR REPLACE PROCEDURE @extschema@.idem_purge_loop(
    batch_size integer DEFAULT 1000, max_duration interval DEFAULT '4 minutes',
    include_stuck boolean DEFAULT false, stuck_older_than interval DEFAULT '0',
    pause interval DEFAULT '0', INOUT deleted bigint DEFAULT NULL)
LANGUAGE plpgsql
AS $$
DECLARE
    targets constant text[] := ARRAY['records', 'inbox'];
    pos tid[] := ARRAY['(0,0)', '(0,0)']::tid[];
    step record;
    deadline timestamptz;
    more boolean;
    distributed boolean := false;
    w record;
    here bigint;
BEGIN
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
                                    '@extschema@', batch_size, max_duration, include_stuck, stuck_older_than)
        LOOP
            IF w.success AND w.result OPERATOR(pg_catalog.~) '^[0-9]+$' THEN
                deleted := deleted OPERATOR(pg_catalog.+) w.result::bigint;
            ELSE
                RAISE WARNING 'idem_purge_loop: the purge of worker %:% failed: %', w.nodename, w.nodeport, w.result;
            END IF;
        END LOOP;
        CALL @extschema@.idem_purge_shards(batch_size, max_duration, include_stuck, stuck_older_than, here);
        deleted := deleted OPERATOR(pg_catalog.+) here;
        RETURN;
    END IF;
    deadline := pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) max_duration;
    deleted := 0;
    LOOP
        more := false;
        FOR i IN 1 .. pg_catalog.array_length(targets, 1) LOOP
            CONTINUE WHEN pos[i] IS NULL;
            step := @extschema@.idem_purge_batch(targets[i], batch_size, pos[i], include_stuck,
                                                 stuck_older_than);
            deleted := deleted OPERATOR(pg_catalog.+) step.deleted;
            pos[i] := step.last;
            more := more OR step.last IS NOT NULL;
        END LOOP;
        COMMIT;
        EXIT WHEN NOT more OR pg_catalog.clock_timestamp() OPERATOR(pg_catalog.>=) deadline;
        IF pause OPERATOR(pg_catalog.>) interval '0' THEN
            PERFORM pg_catalog.pg_sleep(pg_catalog.date_part('epoch', pause));
        END IF;
    END LOOP;
END
$$;
COMMENT ON PROCEDURE @extschema@.idem_purge_loop(integer, interval, boolean, interval, interval, bigint) IS
    'Purges like idem_purge, committing after every batch (no long-held locks), for at most max_duration; the procedure the pg_cron job calls. On a Citus coordinator it purges the shards of every worker (idem_purge_shards).';

-- ==== idempotency--0.3--0.4.sql ====
-- idempotency 0.3 -> 0.4 (assembled from src/sql/7*.sql by the Makefile into
-- idempotency--0.3--0.4.sql; CREATE EXTENSION without VERSION runs 0.1, then every upgrade
-- script up to default_version, ending with this one).

-- Inbox (0.4): the primary key leads with the event id, as the textbook processed_event table's
-- does. Most rows of an inbox share one consumer, so a key that starts with it makes every index
-- comparison compare two columns instead of one (issue 18: 8,000 of 80,000 instructions of a
-- first delivery). Lookups are by both columns, so nothing else changes. The update rebuilds the
-- index under an ACCESS EXCLUSIVE lock on idempotency.inbox (docs/operations.md, "Upgrades").
ALTER TABLE idempotency.inbox
    DROP CONSTRAINT inbox_pkey,
    ADD CONSTRAINT inbox_pkey PRIMARY KEY (event_id, consumer);

-- The queue index ends with the event id, the tie-breaker of idem_inbox_next's ORDER BY
-- received_at, event_id: the index scan then yields the queue in that order and the LIMIT stops
-- after the batch, where 0.3's (consumer, received_at) needed an incremental sort that reads at
-- least 32 entries per call (issue 18). Rebuilt under the same lock as the primary key.
DROP INDEX idempotency.inbox_queue;
CREATE INDEX inbox_queue ON idempotency.inbox (consumer, received_at, event_id)
    WHERE status IN ('received', 'processing');
COMMENT ON INDEX idempotency.inbox_queue IS
    'The work queue of idem_inbox_next: queued and leased events per consumer in arrival order (event id breaks ties).';

-- Webhooks (issue 18) --------------------------------------------------------------------------
-- idem_webhook_receive answers one more outcome: invalid_event_id, an authentic delivery whose
-- event id cannot be recorded (NULL, empty, longer than 1024 bytes), where it raised 22004 /
-- 22023 / 22001 before. What the sender controls never raises (src/webhooks.cpp).
COMMENT ON FUNCTION idem_webhook_receive(text, text, text[], text, bytea, text, text, text, boolean, text, bigint, interval, interval, timestamptz) IS
    'Verifies a webhook (scheme standard | stripe) and records it in the inbox with the SHA-256 of the payload as its hash. outcome: invalid_signature | stale_timestamp | invalid_event_id (nothing written) | new | duplicate | mismatch | stale. What the sender controls never raises.';
COMMENT ON FUNCTION idem_webhook_receive(text, text, text[], text, text, text, text, text, boolean, text, bigint, interval, interval, timestamptz) IS
    'Verifies a webhook and records it in the inbox; payload given as text, signed and stored as its raw bytes. outcome as for the bytea form.';

-- Lifecycle: idem_inbox_stats counts queued and leased events whatever their age ---------------
-- 0.2's view counted a queued or leased event past its TTL as expired ("awaiting the purge") and
-- no longer as received, pending or processing, nor in oldest_pending_age. But such an event
-- never expires: the purge never deletes it, idem_inbox_next still hands it out, a redelivery is
-- still a duplicate (docs/inbox.md "Retention"). It is now counted as pending, like any other
-- queued or leased event, and expired holds exactly the finished entries (done, failed, stale)
-- past their TTL, the ones the purge deletes (docs/operations.md "Which state is counted where").
-- CREATE OR REPLACE keeps the view's columns, its grants (pg_monitor, nothing for PUBLIC) and its
-- membership of the extension; the comment is restated to say what changed.
CREATE OR REPLACE VIEW idem_inbox_stats AS
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
COMMENT ON VIEW idem_inbox_stats IS
    'Inbox events per consumer: received (every event id recorded but the expired ones, duplicates are not rows), pending (queued or leased, whatever their age: they never expire), processing (leased, also when the lease ran out), processed (done), failed (dead), stale, expired (done, failed or stale past the TTL, awaiting purge), oldest_pending_age. Scans idempotency.inbox.';

-- ==== idempotency--0.4--0.5.sql ====
-- idempotency 0.4 -> 0.5 (assembled from src/sql/8*.sql by the Makefile into
-- idempotency--0.4--0.5.sql; CREATE EXTENSION without VERSION runs 0.1, then every upgrade
-- script up to default_version, ending with this one).

-- Outbox: events written in the caller's transaction, leased to relays per key in emit order ----
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
) WITH (fillfactor = 85);
-- The relay's queue: events not yet done or dead, per topic in emit order.
CREATE INDEX outbox_queue ON idempotency.outbox (topic, seq)
    WHERE status IN ('pending', 'leased');
-- The order check: the unfinished (and dead) events of a key, in emit order.
CREATE INDEX outbox_key ON idempotency.outbox (topic, key, seq)
    WHERE key IS NOT NULL AND status <> 'done';
CREATE UNIQUE INDEX outbox_dedup ON idempotency.outbox (topic, dedup_key)
    WHERE dedup_key IS NOT NULL;
REVOKE ALL ON idempotency.outbox FROM PUBLIC;
COMMENT ON TABLE idempotency.outbox IS
    'One row per emitted event: pending (queued, handed out from available_at) | leased (taken by a relay until lease_expires_at) | done (kept until expires_at for dedup_key) | dead (kept with last_error until requeued or deleted).';
COMMENT ON INDEX idempotency.outbox_queue IS
    'The queue of idem_outbox_next: pending and leased events per topic in emit order.';
COMMENT ON INDEX idempotency.outbox_key IS
    'The per-key order check of idem_outbox_next: the events of a key not yet done, in emit order.';
COMMENT ON INDEX idempotency.outbox_dedup IS
    'At most one kept event per (topic, dedup_key): the producer''s own dedup key.';
SELECT pg_catalog.pg_extension_config_dump('idempotency.outbox', '');
SELECT pg_catalog.pg_extension_config_dump('idempotency.outbox_seq', '');

CREATE FUNCTION idem_outbox_emit(
    topic text, payload jsonb, key text DEFAULT NULL, dedup_key text DEFAULT NULL,
    headers jsonb DEFAULT NULL, deliver_after interval DEFAULT NULL)
RETURNS uuid
AS 'MODULE_PATHNAME', 'idem_outbox_emit' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_outbox_emit(text, jsonb, text, text, jsonb, interval) IS
    'Writes an outbox event in the caller''s transaction and returns its id (UUIDv7). key orders the events of one aggregate; a second emit with the same topic and dedup_key, while the first event is kept, writes nothing and returns the first id. deliver_after delays the first hand-out.';

CREATE FUNCTION idem_outbox_emit(
    topic text, payload bytea, key text DEFAULT NULL, dedup_key text DEFAULT NULL,
    headers jsonb DEFAULT NULL, deliver_after interval DEFAULT NULL)
RETURNS uuid
AS 'MODULE_PATHNAME', 'idem_outbox_emit_bytes' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_outbox_emit(text, bytea, text, text, jsonb, interval) IS
    'idem_outbox_emit for a body that is not JSON (protobuf, Avro, a signed webhook body): idem_outbox_next returns it in payload_bytes, payload NULL.';

-- The text overload: an untyped literal or a driver's text parameter would otherwise be
-- ambiguous between jsonb and bytea.
CREATE FUNCTION idem_outbox_emit(
    topic text, payload text, key text DEFAULT NULL, dedup_key text DEFAULT NULL,
    headers jsonb DEFAULT NULL, deliver_after interval DEFAULT NULL)
RETURNS uuid
AS 'MODULE_PATHNAME', 'idem_outbox_emit_text' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_outbox_emit(text, text, text, text, jsonb, interval) IS
    'idem_outbox_emit of JSON text (an untyped literal, a driver''s text parameter): parsed as jsonb, 22P02 when it is not JSON.';

CREATE FUNCTION idem_outbox_next(
    topic text, batch_size integer DEFAULT 100, lease interval DEFAULT NULL,
    OUT event_id uuid, OUT key text, OUT payload jsonb, OUT headers jsonb, OUT attempt integer,
    OUT emitted_at timestamptz, OUT lease_expires_at timestamptz, OUT payload_bytes bytea,
    OUT dedup_key text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'idem_outbox_next' LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 100;
COMMENT ON FUNCTION idem_outbox_next(text, integer, interval) IS
    'Leases up to batch_size events of a topic (FOR UPDATE SKIP LOCKED) in emit order: an event of a key only when every earlier event of its key is done (or dead, with idempotency.outbox_dead_blocks_key off). attempt is the fencing token for idem_outbox_done / idem_outbox_fail.';

CREATE FUNCTION idem_outbox_done(event_id uuid, attempt integer, topic text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'idem_outbox_done' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_outbox_done(uuid, integer, text) IS
    'Marks a leased event done (returns done); IK002 when attempt no longer owns it. topic is optional (on Citus it routes the call to the shard of the topic).';

CREATE FUNCTION idem_outbox_fail(
    event_id uuid, attempt integer, retryable boolean DEFAULT true, error text DEFAULT NULL,
    topic text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'idem_outbox_fail' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_outbox_fail(uuid, integer, boolean, text, text) IS
    'Records a failed delivery of a leased event: pending (handed out again after a backoff) when retryable and below idempotency.max_attempts, else dead (kept with error).';

CREATE FUNCTION idem_outbox_requeue(event_id uuid, topic text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'idem_outbox_requeue' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_outbox_requeue(uuid, text) IS
    'Brings a dead event back (pending at once, a new budget of idempotency.max_attempts); returns pending. 55000 when the event is not dead.';

CREATE VIEW idem_outbox_stats AS
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
COMMENT ON VIEW idem_outbox_stats IS
    'Outbox events per topic: pending (not yet delivered, waiting included), waiting (pending, held back until available_at by deliver_after or a retry backoff), leased, dead, done (kept until the purge), oldest_pending_age (the lag: the oldest event pending or leased). Scans idempotency.outbox.';
REVOKE ALL ON idem_outbox_stats FROM PUBLIC;
GRANT SELECT ON idem_outbox_stats TO pg_monitor;
-- Stateful: not for PUBLIC (docs/operations.md "Privileges"; test/tap/operations.sql checks).
REVOKE EXECUTE ON FUNCTION idem_outbox_emit(text, jsonb, text, text, jsonb, interval),
    idem_outbox_emit(text, bytea, text, text, jsonb, interval),
    idem_outbox_emit(text, text, text, text, jsonb, interval),
    idem_outbox_next(text, integer, interval), idem_outbox_done(uuid, integer, text),
    idem_outbox_fail(uuid, integer, boolean, text, text), idem_outbox_requeue(uuid, text)
FROM PUBLIC;

-- Inbox (0.5): the same retries as the outbox (src/leased_queue.cpp). A retryable failure queues
-- the event again from available_at (exponential backoff with jitter, idempotency.retry_backoff_*)
-- instead of at once, and max_attempts defaults to idempotency.max_attempts: an event whose
-- worker fails, or dies and lets the lease expire, on every attempt is dead (failed) after that
-- many attempts instead of being handed out for ever. Adding a column without a default
-- rewrites nothing. IF NOT EXISTS for Citus: on a distributed inbox, ALTER EXTENSION UPDATE runs
-- this script on every worker too, and the coordinator's ALTER TABLE then reaches the workers'
-- tables again (without it, 42701 on a worker and the update fails; test/stages/citus.sh).
ALTER TABLE idempotency.inbox ADD COLUMN IF NOT EXISTS available_at timestamptz;
COMMENT ON COLUMN idempotency.inbox.available_at IS
    'A queued (received) event is not handed out before this time (a retry''s backoff); NULL: at once.';
COMMENT ON FUNCTION idem_inbox_fail(text, text, integer, boolean, text, integer) IS
    'Records a failed handling of a leased event; returns received (queued again after a backoff) when retryable and below max_attempts (NULL: idempotency.max_attempts), else failed (dead, kept for inspection).';

-- Lifecycle (0.5): idem_purge and idem_purge_loop also purge the outbox: done events past their
-- retention (expires_at, idempotency.outbox_ttl after the event was done). Pending, leased and
-- dead events are never purged: a dead event stays until it is requeued or deleted. The bodies
-- are 0.1's and 0.3's with the third target (CREATE OR REPLACE keeps their grants).
CREATE OR REPLACE FUNCTION idem_purge(
    batch_size integer DEFAULT 1000, max_batches integer DEFAULT NULL,
    include_stuck boolean DEFAULT false, stuck_older_than interval DEFAULT '0')
RETURNS bigint
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    targets constant text[] := ARRAY['records', 'inbox', 'outbox'];
    pos tid[] := ARRAY['(0,0)', '(0,0)', '(0,0)']::tid[];
    step record;
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
        FOR i IN 1 .. array_length(targets, 1) LOOP
            CONTINUE WHEN pos[i] IS NULL;
            step := @extschema@.idem_purge_batch(targets[i], batch_size, pos[i], include_stuck,
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
COMMENT ON FUNCTION idem_purge(integer, integer, boolean, interval) IS
    'Deletes expired finished records, settled inbox entries and done outbox events past idempotency.outbox_ttl in bounded SKIP LOCKED batches (one transaction); returns the count. For scheduled purging use CALL idem_purge_loop().';

CREATE OR REPLACE PROCEDURE @extschema@.idem_purge_loop(
    batch_size integer DEFAULT 1000, max_duration interval DEFAULT '4 minutes',
    include_stuck boolean DEFAULT false, stuck_older_than interval DEFAULT '0',
    pause interval DEFAULT '0', INOUT deleted bigint DEFAULT NULL)
LANGUAGE plpgsql
AS $$
DECLARE
    targets constant text[] := ARRAY['records', 'inbox', 'outbox'];
    pos tid[] := ARRAY['(0,0)', '(0,0)', '(0,0)']::tid[];
    step record;
    deadline timestamptz;
    more boolean;
    distributed boolean := false;
    w record;
    here bigint;
BEGIN
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
                                    '@extschema@', batch_size, max_duration, include_stuck, stuck_older_than)
        LOOP
            IF w.success AND w.result OPERATOR(pg_catalog.~) '^[0-9]+$' THEN
                deleted := deleted OPERATOR(pg_catalog.+) w.result::bigint;
            ELSE
                RAISE WARNING 'idem_purge_loop: the purge of worker %:% failed: %', w.nodename, w.nodeport, w.result;
            END IF;
        END LOOP;
        CALL @extschema@.idem_purge_shards(batch_size, max_duration, include_stuck, stuck_older_than, here);
        deleted := deleted OPERATOR(pg_catalog.+) here;
        RETURN;
    END IF;
    deadline := pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) max_duration;
    deleted := 0;
    LOOP
        more := false;
        FOR i IN 1 .. pg_catalog.array_length(targets, 1) LOOP
            CONTINUE WHEN pos[i] IS NULL;
            step := @extschema@.idem_purge_batch(targets[i], batch_size, pos[i], include_stuck,
                                                 stuck_older_than);
            deleted := deleted OPERATOR(pg_catalog.+) step.deleted;
            pos[i] := step.last;
            more := more OR step.last IS NOT NULL;
        END LOOP;
        COMMIT;
        EXIT WHEN NOT more OR pg_catalog.clock_timestamp() OPERATOR(pg_catalog.>=) deadline;
        IF pause OPERATOR(pg_catalog.>) interval '0' THEN
            PERFORM pg_catalog.pg_sleep(pg_catalog.date_part('epoch', pause));
        END IF;
    END LOOP;
END
$$;
COMMENT ON PROCEDURE @extschema@.idem_purge_loop(integer, interval, boolean, interval, interval, bigint) IS
    'Purges like idem_purge, committing after every batch (no long-held locks), for at most max_duration; the procedure the pg_cron job calls. On a Citus coordinator it purges the shards of every worker (idem_purge_shards).';

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

-- ==== idempotency--0.5--0.6.sql ====
-- idempotency 0.5 -> 0.6 (assembled from src/sql/9*.sql by the Makefile into
-- idempotency--0.5--0.6.sql; CREATE EXTENSION without VERSION runs 0.1, then every upgrade
-- script up to default_version, ending with this one).

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

-- The Idempotency-Key header (0.6) ----------------------------------------------------------------
CREATE FUNCTION idem_key_from_header(value text)
RETURNS text
AS 'MODULE_PATHNAME', 'idem_key_from_header' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION idem_key_from_header(text) IS
    'The key an Idempotency-Key header value carries: an RFC 8941 Structured Field string ("k", the IETF draft''s form; parameters ignored) or an unquoted key (k), the same key either way; 22023 for a malformed value.';

-- Initial privileges (0.6: restated after the functions recreated above) --------------------
-- A GRANT or REVOKE run by an extension script records the object's whole resulting ACL in
-- pg_init_privs as the extension's own initial privileges, and pg_dump leaves those out of a
-- dump. Run by ALTER EXTENSION UPDATE, the REVOKEs above would thereby record the grants that
-- users made under 0.1 (the README has them grant idempotency_user before updating) as the
-- extension's, and a dump and restore would silently lose them. Keep only the extension's own
-- entries, as a fresh installation records them: the owner's, and pg_monitor's.
UPDATE pg_catalog.pg_init_privs i
SET initprivs = ARRAY(
    SELECT pg_catalog.makeaclitem(x.grantee, x.grantor, x.privilege_type, x.is_grantable)
    FROM pg_catalog.aclexplode(i.initprivs) x
    WHERE x.grantee OPERATOR(pg_catalog.=) p.proowner
       OR x.grantee OPERATOR(pg_catalog.=) 'pg_monitor'::pg_catalog.regrole)
FROM pg_catalog.pg_proc p, pg_catalog.pg_depend d, pg_catalog.pg_extension e
WHERE i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
  AND i.objoid OPERATOR(pg_catalog.=) p.oid
  AND i.privtype OPERATOR(pg_catalog.=) 'e'
  AND d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
  AND d.objid OPERATOR(pg_catalog.=) p.oid
  AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
  AND d.refobjid OPERATOR(pg_catalog.=) e.oid
  AND d.deptype OPERATOR(pg_catalog.=) 'e'
  AND e.extname OPERATOR(pg_catalog.=) 'idempotency';

-- ==== idempotency--0.6--0.7.sql ====
-- idempotency 0.6 -> 0.7 (assembled from src/sql/a*.sql by the Makefile into
-- idempotency--0.6--0.7.sql; CREATE EXTENSION without VERSION runs 0.1, then every upgrade
-- script up to default_version, ending with this one).

-- idem_claim's planner support (0.7) ------------------------------------------------------------
-- The planner fills a call's omitted arguments with their defaults, and every execution of the
-- plan then evaluates them. idem_claim_support (src/records_claim_support.cpp) drops the
-- trailing ones that are at their defaults; idem_claim takes an absent argument as its default.
-- A support function is set by a superuser, as CREATE EXTENSION idempotency is run.
CREATE FUNCTION idem_claim_support(internal) RETURNS internal
AS 'MODULE_PATHNAME', 'idem_claim_support' LANGUAGE C STRICT;
COMMENT ON FUNCTION idem_claim_support(internal) IS
    'Planner support of idem_claim: drops the trailing arguments at their defaults from the plan (fewer expressions to evaluate per call).';
-- The planner calls a support function without an EXECUTE check: PUBLIC needs no grant.
REVOKE EXECUTE ON FUNCTION idem_claim_support(internal) FROM PUBLIC;
ALTER FUNCTION idem_claim(text, text, bytea, interval, interval, boolean)
    SUPPORT idem_claim_support;
