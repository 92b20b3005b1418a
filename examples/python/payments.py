#!/usr/bin/env python3
"""A payment service that charges once per Idempotency-Key: http.server, psycopg 3, the extension.

The HTTP contract is examples/README.md; how to run it is examples/python/README.md.
"""
import json
import os
import sys
import time
import traceback
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

def env(name, default):
    return os.environ.get(name) or default  # unset or empty: the default


PORT = int(env("PORT", "8080"))
POOL_SIZE = int(env("POOL_SIZE", "8"))
LEASE = timedelta(seconds=float(env("LEASE_SECONDS", "10")))
PROVIDER_DELAY = float(env("PROVIDER_DELAY_MS", "100")) / 1000
COMPLETE_DELAY = float(env("COMPLETE_DELAY_MS", "0")) / 1000
WEBHOOK_SECRET = env("WEBHOOK_SECRET", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
IDEMPOTENCY = env("IDEMPOTENCY", "on") != "off"

# Request data the database refuses: a malformed or over-long key, a body that is not I-JSON.
BAD_REQUEST = {"22023", "22001", "22P02", "22021", "22003", "54001"}

# The connection settings come from the libpq environment (PGHOST, PGPORT, ...). autocommit: every
# statement outside `conn.transaction()` commits on its own. prepare_threshold=None: never a named
# prepared statement, which PgBouncer's transaction pooling cannot follow (README.md).
pool = ConnectionPool(min_size=POOL_SIZE, open=False, kwargs={
    "autocommit": True, "prepare_threshold": None, "row_factory": dict_row})

CLAIM = """
    SELECT k.key, c.outcome, c.attempt, c.response_status, c.response_body, c.response_headers,
           greatest(1, ceil(extract(epoch FROM c.lease_expires_at - clock_timestamp())))::int AS retry_after
    FROM idem_key_from_header(%(header)s) AS k(key),
         idem_claim(%(scope)s, k.key, idem_fingerprint(%(body)s::text), lease => %(lease)s) AS c"""


def answer(status, obj, headers=()):
    return status, json.dumps(obj).encode(), {"Content-Type": "application/json", **dict(headers)}


def stored(row):
    """A stored result, sent again byte for byte."""
    headers = {**(row["response_headers"] or {}), "Idempotent-Replayed": "true"}
    return row["response_status"], row["response_body"] or b"", headers


def answer_claim(c):
    """The answer to a claim that does not let this request run."""
    if c["outcome"] == "replayed":
        return stored(c)
    if c["outcome"] == "in_progress":
        return answer(409, {"error": "a request with this key is in progress"}, {"Retry-After": str(c["retry_after"])})
    return answer(422, {"error": "this key was used with another request"})  # mismatch


def insert_payment(conn, p, provider_ref=None):
    """INSERT INTO payments; returns the 201 answer: (status, body bytes, headers)."""
    row = conn.execute(
        "INSERT INTO payments (customer, amount, currency, provider_ref) VALUES (%s, %s, %s, %s)"
        " RETURNING id::text, to_json(payments)::text AS json",
        (p["customer"], p["amount"], p["currency"], provider_ref)).fetchone()
    return 201, row["json"].encode(), {"Location": f"/v1/payments/{row['id']}", "Content-Type": "application/json"}


def complete(conn, scope, c, result):
    """idem_complete of the answer: the payment's id, the exact body bytes and the headers."""
    status, body, headers = result
    payment_id = headers["Location"].rsplit("/", 1)[1]
    conn.execute("SELECT idem_complete(%s, %s, %s, resource_id => %s, response_status => %s,"
                 " response_body => %s, response_headers => %s)",
                 (scope, c["key"], c["attempt"], payment_id, status, body, Jsonb(headers)))
    return result


def pay_single(header, text, p):
    """Single-transaction mode: one call of create_payment (examples/schema.sql), the claim, the
    payment when claimed and idem_complete of its answer, a transaction by itself."""
    with pool.connection() as conn:
        r = conn.execute("SELECT * FROM create_payment(%s, %s, %s, %s, %s)",
                         (header, text, p["customer"], p["amount"], p["currency"])).fetchone()
    if r["outcome"] == "claimed":  # the new payment's answer, as stored
        return r["response_status"], r["response_body"], r["response_headers"]
    return answer_claim(r)


def pay_two_phase(header, text, p):
    """Two-phase mode: the claim commits alone, the provider is called outside any transaction."""
    scope = "payments-two-phase"
    with pool.connection() as conn:
        c = conn.execute(CLAIM, {"header": header, "scope": scope, "body": text, "lease": LEASE}).fetchone()
    if c["outcome"] not in ("claimed", "reclaimed"):
        return answer_claim(c)
    # reclaimed: the previous attempt's charge is unknown, not absent: ask the provider first.
    charge_id = provider_find(c["key"]) if c["outcome"] == "reclaimed" else None
    charge_id = charge_id or provider_charge(c["key"], p)
    time.sleep(COMPLETE_DELAY)
    try:
        with pool.connection() as conn, conn.transaction():
            return complete(conn, scope, c, insert_payment(conn, p, charge_id))
    except psycopg.Error as e:
        if e.sqlstate == "IK002":  # fenced: another attempt owns the key now; send nothing of ours
            return answer(409, {"error": "another attempt took over"}, {"Retry-After": "1"})
        if e.sqlstate == "IK003":  # already finished by another attempt: answer what it stored
            with pool.connection() as conn:
                return stored(conn.execute("SELECT * FROM idem_lookup(%s, %s)", (scope, c["key"])).fetchone())
        raise


def pay_baseline(p):
    """IDEMPOTENCY=off, for bench/ only: BEGIN; INSERT; COMMIT, and a retry charges again."""
    with pool.connection() as conn, conn.transaction():
        return insert_payment(conn, p)


def provider_charge(key, p):
    """The fake payment provider: slow, and idempotent on the key it is given, as Stripe is."""
    time.sleep(PROVIDER_DELAY)
    with pool.connection() as conn:
        row = conn.execute("INSERT INTO provider_charges (idempotency_key, amount, currency) VALUES (%s, %s, %s)"
                           " ON CONFLICT (idempotency_key) DO NOTHING RETURNING id::text",
                           (key, p["amount"], p["currency"])).fetchone()
    return row["id"] if row else provider_find(key)


def provider_find(key):
    """The provider's charge made under this key, or None."""
    with pool.connection() as conn:
        row = conn.execute("SELECT id::text FROM provider_charges WHERE idempotency_key = %s", (key,)).fetchone()
    return row and row["id"]


def receive_webhook(headers, body):
    """idem_webhook_receive and the event's effect in one transaction."""
    with pool.connection() as conn, conn.transaction():
        outcome = conn.execute(
            "SELECT idem_webhook_receive('payments-webhooks', 'standard', ARRAY[%s], %s, %s, %s, %s) AS outcome",
            (WEBHOOK_SECRET, headers.get("webhook-id"), body, headers.get("webhook-signature"),
             headers.get("webhook-timestamp"))).fetchone()["outcome"]
        if outcome == "new":
            event = json.loads(body)
            conn.execute("INSERT INTO webhook_events (event_id, type, payment_id) VALUES (%s, %s, %s)",
                         (headers.get("webhook-id"), event.get("type"), (event.get("data") or {}).get("payment_id")))
    status = {"new": 200, "duplicate": 200, "stale": 200, "mismatch": 409}.get(outcome, 400)
    return answer(status, {"outcome": outcome})


def parse_payment(body):
    """The body as text and as a payment, or None when it is not one."""
    try:
        text = body.decode()
        p = json.loads(text)
    except ValueError:
        return None
    ok = (isinstance(p, dict) and isinstance(p.get("customer"), str) and isinstance(p.get("currency"), str)
          and type(p.get("amount")) is int and 0 < p["amount"] < 2**63)
    return (text, p) if ok else None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: every answer has a Content-Length
    # The headers and the body are two writes: without TCP_NODELAY, Nagle's algorithm holds the
    # body back until the client's delayed ACK, 40 ms per request on keep-alive connections.
    disable_nagle_algorithm = True

    def do_GET(self):
        if self.path == "/healthz":
            self.send(200, b"ok", {"Content-Type": "text/plain"})
        else:
            self.send(*answer(404, {}))

    def do_POST(self):
        url = urlsplit(self.path)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            self.send(*self.route(url.path, parse_qs(url.query).get("mode", [""])[0], body))
        except ValueError:  # a signed webhook body that is not JSON: rolled back, nothing written
            self.send(*answer(400, {"error": "body is not JSON"}))
        except psycopg.Error as e:
            if e.sqlstate in BAD_REQUEST:
                self.send(*answer(400, {"error": e.sqlstate}))
            elif e.sqlstate is None or e.sqlstate == "25006":  # no connection, or a read-only server
                self.send(*answer(503, {"error": "database unavailable"}, {"Retry-After": "1"}))
            else:
                traceback.print_exc()
                self.send(*answer(500, {"error": e.sqlstate}))

    def route(self, path, mode, body):
        if path == "/v1/webhooks/provider":
            return receive_webhook(self.headers, body)
        if path != "/v1/payments":
            return answer(404, {})
        header, payment = self.headers.get("Idempotency-Key"), parse_payment(body)
        if header is None:
            return answer(400, {"error": "an Idempotency-Key header is required"})
        if payment is None or mode not in ("", "two-phase"):
            return answer(400, {"error": "the body must be a payment: customer, amount, currency"})
        if not IDEMPOTENCY:
            return pay_baseline(payment[1])
        return (pay_two_phase if mode == "two-phase" else pay_single)(header, *payment)

    def send(self, status, body, headers):
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):  # no line per request on stderr
        pass


class Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        """A client that went away (a reset, a broken pipe) is not an error of the service."""
        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)


if __name__ == "__main__":
    pool.open(wait=True)
    server = Server(("127.0.0.1", PORT), Handler)
    print(f"listening on 127.0.0.1:{PORT}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
