"""What the FastAPI and the Flask payment services share: the contract's settings
(examples/README.md) and the application's SQL. Not a part of the idempotency package."""
import hashlib
import json
import os
import re
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
MANUAL = env("IDEMPOTENCY", "on") == "manual"  # the record by hand (below), for bench/ only
# The pool's connections (the libpq environment: PGHOST, PGPORT, ...): autocommit, and never a
# named prepared statement, which PgBouncer's transaction pooling cannot follow (README.md);
# PREPARE=on: psycopg's default, a statement prepared at its 5th use on a connection (direct
# connections or PgBouncer >= 1.21 with max_prepared_statements only).
PREPARE = env("PREPARE", "off") == "on"
CONNECT = {"autocommit": True, "prepare_threshold": 5 if PREPARE else None}
# The two payment modes, one operation (POST /v1/payments: a key is the same request in either);
# IDEMPOTENCY=off: the same handler in a plain transaction (bench/ only).
SINGLE = Options(mode="single" if IDEMPOTENCY else "off")
TWO_PHASE = Options(mode="two-phase" if IDEMPOTENCY else "off", lease=LEASE)


def payment(body):
    """The body as a payment (customer, amount, currency), or None."""
    try:
        p = json.loads(body)
    except ValueError:
        return None
    ok = (isinstance(p, dict) and isinstance(p.get("customer"), str)
          and isinstance(p.get("currency"), str) and type(p.get("amount")) is int
          and 0 < p["amount"] < 2**63)
    return p if ok else None


def options(mode, body):
    """The request's Options by ?mode=; None for a body that is not a payment or an unknown
    mode: the route answers 400 and nothing is claimed or stored."""
    if MANUAL or mode not in ("", "two-phase") or payment(body) is None:
        return None
    return TWO_PHASE if mode == "two-phase" else SINGLE


def principal(body):
    """Who a key belongs to. This demo has no authentication, so it is the payment's customer;
    a real service returns its authenticated user."""
    p = payment(body)
    return p and p["customer"]


# IDEMPOTENCY=manual (bench/http.sh's yardstick): single-transaction mode with the exactly-once
# record written by hand instead of the package, as a careful user would without the extension
# (the table manual_keys, examples/schema.sql): the same pool, statements with parameters; one
# payment per key, a retry gets the stored answer byte for byte, another body under the key is
# refused. The routes' pay_by_hand: BEGIN; CLAIM (none: a retry, STORED); INSERT; STORE; COMMIT.
CLAIM = ("INSERT INTO manual_keys (scope, key, fingerprint) VALUES (%s, %s, %s)"
         " ON CONFLICT DO NOTHING RETURNING true")
STORED = "SELECT fingerprint, status, headers, body FROM manual_keys WHERE scope = %s AND key = %s"
STORE = "UPDATE manual_keys SET status = %s, headers = %s, body = %s WHERE scope = %s AND key = %s"
NO_KEY = {"error": "an Idempotency-Key header is required"}
OTHER_BODY = {"error": "this Idempotency-Key was used with another request body"}


def manual_record(header, body, customer):
    """IDEMPOTENCY=manual: the key (an RFC 8941 string "k-1" or a bare k-1; None: no key), the
    scope (the principal and the operation, as the package's) and the fingerprint (SHA-256 of
    the raw body)."""
    key = (header or "").strip()
    if len(key) >= 2 and key[0] == key[-1] == '"':
        key = re.sub(r'\\(.)', r'\1', key[1:-1])
    return key or None, f"{customer}/POST /v1/payments", hashlib.sha256(body).digest()


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
