"""What the FastAPI and the Flask payment services share: the contract's settings
(examples/README.md) and the application's SQL. Not a part of the idempotency package."""
import os
from datetime import timedelta

from idempotency import Options


def env(name, default):
    return os.environ.get(name) or default  # unset or empty: the default


PORT = int(env("PORT", "8080"))
POOL_SIZE = int(env("POOL_SIZE", "8"))
LEASE = timedelta(seconds=float(env("LEASE_SECONDS", "10")))
PROVIDER_DELAY = float(env("PROVIDER_DELAY_MS", "100")) / 1000
COMPLETE_DELAY = float(env("COMPLETE_DELAY_MS", "0")) / 1000
WEBHOOK_SECRET = env("WEBHOOK_SECRET", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
IDEMPOTENCY = env("IDEMPOTENCY", "on") != "off"
# The pool's connections (the libpq environment: PGHOST, PGPORT, ...): autocommit, and never a
# named prepared statement, which PgBouncer's transaction pooling cannot follow (README.md);
# PREPARE=on: psycopg's default, a statement prepared at its 5th use on a connection (direct
# connections or PgBouncer >= 1.21 with max_prepared_statements only).
PREPARE = env("PREPARE", "off") == "on"
CONNECT = {"autocommit": True, "prepare_threshold": 5 if PREPARE else None}
# The two payment modes; IDEMPOTENCY=off: the same handler in a plain transaction (bench/ only).
SINGLE = Options("payments", mode="single" if IDEMPOTENCY else "off")
TWO_PHASE = Options("payments-two-phase", mode="two-phase" if IDEMPOTENCY else "off", lease=LEASE)


def options(mode):
    return TWO_PHASE if mode == "two-phase" else SINGLE


INSERT = ("INSERT INTO payments (customer, amount, currency, provider_ref) VALUES (%s, %s, %s, %s)"
          " RETURNING id::text, to_json(payments)")
# The fake payment provider's ledger: a charge per key, as Stripe's (examples/schema.sql).
CHARGE = ("INSERT INTO provider_charges (idempotency_key, amount, currency) VALUES (%s, %s, %s)"
          " ON CONFLICT (idempotency_key) DO NOTHING RETURNING id::text")
FIND_CHARGE = "SELECT id::text FROM provider_charges WHERE idempotency_key = %s"
RECEIVE = "SELECT idempotency.idem_webhook_receive('payments-webhooks', 'standard', ARRAY[%s], %s, %s, %s, %s)"
EFFECT = "INSERT INTO webhook_events (event_id, type, payment_id) VALUES (%s, %s, %s)"
WEBHOOK_STATUS = {"new": 200, "duplicate": 200, "stale": 200, "mismatch": 409}  # else 400


def receive_args(headers, body):
    return (WEBHOOK_SECRET, headers.get("webhook-id"), body, headers.get("webhook-signature"),
            headers.get("webhook-timestamp"))


def effect_args(headers, event):
    return headers.get("webhook-id"), event.get("type"), (event.get("data") or {}).get("payment_id")
