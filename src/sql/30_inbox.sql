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
