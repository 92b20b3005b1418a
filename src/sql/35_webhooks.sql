
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
