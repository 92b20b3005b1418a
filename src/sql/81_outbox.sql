
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
