-- The example services' own tables (examples/README.md). Safe to run more than once.
CREATE EXTENSION IF NOT EXISTS idempotency;

-- One row per charge the service made. No unique constraint on the Idempotency-Key: only the
-- extension stands between a retry storm and a second payment.
CREATE TABLE IF NOT EXISTS payments (
    id           uuid PRIMARY KEY DEFAULT idem_uuid_v7(),
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
    id              uuid PRIMARY KEY DEFAULT idem_uuid_v7(),
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
