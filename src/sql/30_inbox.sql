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
