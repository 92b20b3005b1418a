-- The example services' own tables (examples/README.md). Safe to run more than once.
CREATE EXTENSION IF NOT EXISTS idempotency;

-- One row per charge the service made. No unique constraint on the Idempotency-Key: only the
-- extension stands between a retry storm and a second payment.
CREATE TABLE IF NOT EXISTS payments (
    id           uuid PRIMARY KEY DEFAULT idempotency.idem_uuid_v7(),
    customer     text NOT NULL,
    amount       bigint NOT NULL CHECK (amount > 0),
    currency     text NOT NULL,
    provider_ref text,                       -- two-phase mode: the provider's charge id
    status       text NOT NULL DEFAULT 'succeeded',
    created_at   timestamptz NOT NULL DEFAULT now()
);

-- The fake payment provider's ledger (two-phase mode). It stands for an external system that is
-- itself idempotent on the key it is given, as Stripe is: a second charge request under the same
-- key returns the first charge.
CREATE TABLE IF NOT EXISTS provider_charges (
    id              uuid PRIMARY KEY DEFAULT idempotency.idem_uuid_v7(),
    idempotency_key text NOT NULL UNIQUE,
    amount          bigint NOT NULL,
    currency        text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);

-- The effect of a provider webhook: one row per event applied.
CREATE TABLE IF NOT EXISTS webhook_events (
    event_id    text NOT NULL,
    type        text NOT NULL,
    payment_id  text,
    received_at timestamptz NOT NULL DEFAULT now()
);

-- IDEMPOTENCY=manual (bench/http.sh's yardstick): the exactly-once record of POST /v1/payments
-- written by hand, without the extension, as a careful user would: one row per scope (the
-- principal and the operation, as the packages' scope) and key, claimed by INSERT ... ON CONFLICT
-- DO NOTHING in the request's transaction, the answer stored by UPDATE before COMMIT.
-- fingerprint: SHA-256 of the raw body, computed by the service. No expiry, no lease, no fencing.
CREATE TABLE IF NOT EXISTS manual_keys (
    scope       text NOT NULL,
    key         text NOT NULL,
    fingerprint bytea NOT NULL,
    status      integer,
    body        bytea,
    headers     jsonb,
    PRIMARY KEY (scope, key)
);

-- Single-transaction mode of POST /v1/payments as one server-side function (the Python service
-- calls it; examples/README.md): the claim, the payment only when claimed, the stored
-- answer, all in the caller's transaction (autocommit: the call is a transaction by itself). One
-- round trip, and PL/pgSQL keeps its statements' plans for the session, which matters when the
-- driver may not prepare statements (PgBouncer before 1.21 in transaction mode): a statement
-- planned on every call costs more than the whole claim (docs/clients.md).
CREATE OR REPLACE FUNCTION create_payment(
    idempotency_key_header text, request_body text, customer text, amount bigint, currency text,
    OUT outcome text, OUT response_status integer, OUT response_body bytea,
    OUT response_headers jsonb, OUT retry_after integer)
LANGUAGE plpgsql AS $$
DECLARE
    k text := idempotency.idem_key_from_header(idempotency_key_header);
    c idempotency.idem_claim_result;
    p payments;
BEGIN
    c := idempotency.idem_claim('payments', k, idempotency.idem_fingerprint(request_body));
    outcome := c.outcome;
    IF c.outcome <> 'claimed' THEN -- replayed (the stored answer), in_progress, mismatch
        response_status := c.response_status;
        response_body := c.response_body;
        response_headers := c.response_headers;
        retry_after := greatest(1, ceil(extract(epoch FROM c.lease_expires_at - clock_timestamp())));
        RETURN;
    END IF;
    INSERT INTO payments (customer, amount, currency)
    VALUES (create_payment.customer, create_payment.amount, create_payment.currency) RETURNING * INTO p;
    response_status := 201;
    response_body := convert_to(to_json(p)::text, 'UTF8');
    response_headers := jsonb_build_object('Location', '/v1/payments/' || p.id,
                                           'Content-Type', 'application/json');
    PERFORM idempotency.idem_complete('payments', k, c.attempt, p.id::text, NULL, response_status,
                          response_body, response_headers);
END $$;
